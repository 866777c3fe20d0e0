/* fleetfs/presence.h — who is in the fleet: heartbeats in and out, the
 * presence table, discovery (doc/presence.md, SPEC sections 2, 3 and 9).
 *
 * The roster thread (broker/roster.c) moves raw bodies; this module builds
 * and signs our heartbeat (pr_heartbeat) and judges every heartbeat that
 * arrives (pr_received): it must decode, its routing key must name its
 * sender, its signature must verify against the key trusted for `from`
 * (unless -o insecure), it must be neither past its expiry nor from the
 * future beyond PR_SKEW_MS, and it must be newer than the last one believed
 * from that sender.  Only then does a lead appear or look live.  Anything
 * unverifiable is counted (rejected_heartbeat) and logged once per sender.
 *
 * States: live (heard within three of the sender's intervals), stale (heard
 * before, not since), left (its last heartbeat said it was unmounting),
 * never (configured, never heard).  Discovered leads drop out of peers/
 * after discovery_ttl of silence; configured ones never do.
 *
 * Threads: pr_received on the roster thread, pr_tick on the notifier,
 * everything else on FUSE threads or the mailbox's sender; one lock guards
 * the table.  The hooks only enqueue (notifier), and are called unlocked.
 */
#ifndef FLEETFS_PRESENCE_H
#define FLEETFS_PRESENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#include "fleetfs/options.h"

/* How far a heartbeat's clock may be off ours before it is ignored. */
#define PR_SKEW_MS 30000

typedef struct presence presence;

typedef enum { PR_NEVER, PR_LIVE, PR_STALE, PR_LEFT } pr_state;

typedef struct {
    /* a file changed (relpath as in the tree) */
    void (*changed)(void *ud, const char *relpath);
    /* dir/name appeared (added) or went away: directory watchers */
    void (*entry)(void *ud, const char *dir, const char *name, bool added);
    void *ud;
} pr_hooks;

typedef struct {
    char id[64];
    bool self, configured, listed; /* listed: in peers/ */
    pr_state state;
    int64_t age_ms; /* since the last believed heartbeat; -1 never */
    char host[256];
    char version[64];
    char agent[256];
    char started_at[40];
    char last_at[40]; /* sentAt of the last believed heartbeat, "" never */
} pr_info;

/* Loads the key and the trust directory again (mb_set_security has
 * checked them already).  NULL and *err on failure. */
presence *pr_new(const fs_opts *o, const char *host, const pr_hooks *hooks, char **err);
void pr_free(presence *pr);

/* Our next heartbeat, signed; malloc'd (free), NULL on failure. */
char *pr_heartbeat(presence *pr, const char *agent_words, bool leaving, size_t *len);
/* One delivery from the roster queue. */
void pr_received(presence *pr, const char *routing_key, const char *body, size_t len);
/* The roster link went up or down (status, and how sure pr_liveness is). */
void pr_link(presence *pr, bool up);
/* Once a second: staleness and drop-outs become notifications.  Returns
 * true when agent_words differ from the last heartbeat we sent (the caller
 * then asks the roster thread for one now). */
bool pr_tick(presence *pr, const char *agent_words);

/* name is a configured peer, or a discovered one still listed. */
bool pr_is_peer(presence *pr, const char *name);
/* The names in peers/, sorted; g_strfreev. */
char **pr_peers(presence *pr);
/* What is known of lead id (self included); false if nothing. */
bool pr_get(presence *pr, const char *id, pr_info *out);
/* Every lead known (self, configured, discovered), sorted by id;
 * g_free the array with g_ptr_array_unref (elements are owned). */
GPtrArray *pr_list(presence *pr);
/* "live (2s ago)", "stale (40s ago)", "left (unmounted 3m ago)", "never" */
void pr_words(const pr_info *i, char *out, size_t n);
const char *pr_state_name(pr_state s);
/* For an honest send: 1 live; 0 not live (why says "peer not live
 * (stale 40s)"); -1 presence cannot tell (roster link down or too new). */
int pr_liveness(presence *pr, const char *peer, char *why, size_t n);

uint64_t pr_rejected(presence *pr);
/* Our roster link is up. */
bool pr_link_up(presence *pr);
/* No answer from the roster thread yet: its first attempt is under way. */
bool pr_link_connecting(presence *pr);
/* "connected" or "down: reason" and counts, for the root status */
void pr_link_words(presence *pr, char *out, size_t n);

#endif
