/* SPDX-License-Identifier: Apache-2.0 */
/* run.h — the far host's handling of one control request, everything but
 * the wire (SPEC section 11): check it (check.h), record it (ledger.h),
 * start or close the pane (herdr/spawn.h), and write the answer.
 *
 * The caller (the control queue's consumer) has decoded and accepted the
 * envelope (ctl_accept, its seen store for replays) and signs and sends
 * the answer. A `ready` answer is not sent at once: the caller first types
 * the brief into the new pane like a message and registers the agent
 * (mailbox, heartbeats); if that fails it calls sr_stop's close itself and
 * answers `failed`. Blocking: a start takes up to the profile's
 * ready_timeout, so the caller runs this on a thread of its own, never on
 * a FUSE or broker thread. Not thread-safe (one caller at a time). */
#ifndef FLEETFS_SPAWN_RUN_H
#define FLEETFS_SPAWN_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/spawn/check.h"
#include "fleetfs/spawn/ledger.h"
#include "fleetfs/spawn/sandbox.h"
#include "fleetfs/config/profile.h"
#include "herdr/client.h"

typedef struct {
    const char *coord_id;
    const char *const *spawn_from;
    const prof_set *profiles;
    lg_ledger *ledger;
    const char *backend;      /* "herdr" | "tmux" */
    hd_client *herdr;         /* herdr backend */
    int call_ms;              /* herdr: bound of an ordinary call (0: 3000) */
    const char *tmux_session; /* tmux: NULL for tmux's current session */
    int quiet_ms;             /* tmux: 0 for 500 */
    const sb_host *sandbox;   /* tmux: what confines a profile's agent (sandbox.h) */
    /* A sandboxed start binds the agent's home, so it is registered first:
     * prepare before the pane (-1 and why: not started), unprepare when the
     * start fails (NULL: no such step). */
    int (*prepare)(const char *name, void *arg, char *why, size_t n);
    void (*unprepare)(const char *gid, void *arg);
    /* names in use here that the ledger does not know (configured agents) */
    bool (*name_taken)(const char *name, void *arg);
    void *arg;
} sr_host;

/* A spawn request: *answer becomes the unsigned `spawned` envelope to its
 * requester (state ready, refused or failed; detail; gid). Returns the
 * state's verdict: SC_OK for ready (the pane in the ledger's entry of
 * answer->gid), else the refusal's, or SC_OK with state failed. */
sc_verdict sr_spawn(sr_host *h, const ctl_env *req, int64_t now_ms, ctl_env *answer);
/* A start that sr_spawn answered ready but the caller could not finish
 * (typing the brief, registering the agent), or one found ready after a
 * restart that was never answered: its pane is closed, it is recorded
 * failed, and *answer is `failed` with why (and what became of the pane)
 * to the requester the ledger names.  Nothing when gid is not live. */
void sr_abandon(sr_host *h, const char *gid, const char *why, int64_t now_ms, ctl_env *answer);
/* A stop request: stopped, refused or failed. */
sc_verdict sr_stop(sr_host *h, const ctl_env *req, int64_t now_ms, ctl_env *answer);
/* At start, before any request: every start the ledger shows half done
 * (a fleetfs killed during it) has its pane closed and is answered
 * `failed`; a ready one whose pane is gone is recorded stopped; a tmux
 * window marked for an agent of this host that the ledger does not hold
 * is closed. The answers to send (*answers, g_free) and their count. */
size_t sr_recover(sr_host *h, int64_t now_ms, ctl_env **answers);

#endif
