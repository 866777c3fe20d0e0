/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/claims.h — claims/ in the tree: the fleet's claims as this
 * mount knows them, and taking, releasing and noting ours (doc/claims.md).
 *
 * The broker holds each claim (broker/claims.h); this part keeps the
 * listing: claims announced on the fleet's claims exchange (taken, held,
 * noted, released), checked against the broker by probes of each claim's
 * lock (its consumer count), about a second apart for a claim a mkdir
 * here found taken, round-robin for the others.  A claim the broker says
 * is free leaves the listing, and inotify watchers of claims/ see
 * IN_DELETE (the notifier's poker).  Our own claims are what the broker
 * granted us and have not been lost since: the claims thread tells.
 *
 * Locks: the table behind its own lock, a leaf (nothing is called under
 * it but the notifier's nt_entry, which only enqueues).
 */
#ifndef FLEETFS_FACE_CLAIMS_H
#define FLEETFS_FACE_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

struct fleet;
typedef struct claims claims;

/* The table and the claims thread (not running yet). */
claims *cl_new(struct fleet *f, char **uris);
void cl_run(claims *c);
/* Tells the thread to stop, never waits (stop_all: with the broker threads). */
void cl_stop_begin(claims *c);
/* Ends the thread; claims held are released with its connection.  Bounded
 * from cl_stop_begin (bc_stop). */
void cl_stop(claims *c);
void cl_free(claims *c);

/* name is listed in claims/ */
bool cl_known(claims *c, const char *name);
/* claims/ listed: the names, sorted (g_strfreev) */
char **cl_list(claims *c);
/* claims/NAME/holder: one JSON object (doc/claims.md).  viewer: the
 * local agent whose home the file is in (agents/<gid>/claims/NAME/holder;
 * `mine` then means held by that agent), or NULL for the lead's claims/. */
GString *cl_render(claims *c, const char *name, const char *viewer);
/* mkdir claims/NAME (agent NULL: for the lead) or agents/<gid>/claims/NAME
 * (agent: that local agent's gid, named in the holder record): 0 (ours,
 * granted by the broker), or an errno: EINVAL (bad name), EEXIST (held:
 * another's, or ours already), ENOTCONN (no broker), EAGAIN (no answer in
 * time), ENOSPC (we hold too many), EIO. */
int cl_take(claims *c, const char *name, const char *agent, const char *note, char *why, size_t n);
/* mkdir: cl_take without a note; each failure logged. */
int cl_mkdir(claims *c, const char *name, const char *agent);
/* rmdir, the rule of doc/claims.md ("Agents as holders"): the lead
 * (agent NULL) releases any claim this mount holds, an agent's too (that
 * agent is told by a message from the lead); an agent only its own.
 * 0, EPERM (not ours, or another's of this mount), ENOENT (not a claim),
 * ENOTCONN, EAGAIN. */
int cl_release(claims *c, const char *name, const char *agent);
/* echo note > .../claims/NAME/note, by the same rule as cl_release:
 * 0, EPERM, ENOENT. */
int cl_note(claims *c, const char *name, const char *agent, const char *buf, size_t len);
/* echo 60 > .../claims/NAME/lease (a duration: "90", "90s", "5m"; 1 s to
 * a day), by the rule of cl_release: from now on the claim is given up
 * (reported lost) unless written again within that time.  0, EINVAL,
 * EPERM, ENOENT. */
#define CL_LEASE_MAX_MS (24LL * 3600 * 1000)
int cl_lease(claims *c, const char *name, const char *agent, const char *buf, size_t len);

/* The claims thread's callbacks (ud: the claims), public for the unit
 * tests: one event of fleet.claims (JSON), one probe's consumer count. */
void cl_event(void *ud, const char *body, size_t len);
void cl_probed(void *ud, const char *name, int consumers);

#endif
