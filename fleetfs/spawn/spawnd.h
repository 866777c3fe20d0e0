/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/spawn/spawnd.h — the far host's control service (SPEC section 11): what
 * this fleetfs does with the requests that arrive in control.<me>.
 *
 * The broker thread consumes control.<me> (br_control_consume) and hands
 * every delivery to spd_delivery, which only copies it onto the service's
 * queue: starting an agent takes up to a profile's ready_timeout, so it
 * runs on the service's own thread, never on the broker thread or a FUSE
 * thread.  There, one request at a time: decode, check (signature, to,
 * expiry), refuse a replay (a persisted seen store), decide
 * (spawn/check.c through sr_spawn / sr_stop), start or stop, register the
 * spawned agent and type its brief once, answer `spawned` to the
 * requester through the receipts outbox, and only then ack the delivery.
 * Design and the reasons in spawnd.c.
 *
 * Threads: spd_start after the injector runs (ag_serve); spd_delivery on
 * the broker thread; spd_stop before the injector and the broker thread
 * stop. */
#ifndef FLEETFS_SPAWND_H
#define FLEETFS_SPAWND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/conn.h"
#include "fleetfs/agents/agents.h"
#include "fleetfs/config/options.h"
#include "fleetfs/inject/inject.h"
#include "fleetfs/model/mailbox.h"

typedef struct spawnd spawnd;

/* What the service uses of the daemon, and nothing else (kept by value;
 * every pointer must outlive the service). */
typedef struct {
    const fs_opts *opts;
    const char *mountpoint; /* absolute: named in a typed brief */
    mailbox *mb;            /* the lead's: entities, control envelopes */
    br_conn *br;            /* control.<me>: consumed and acked here */
    ag_registry *ag;        /* registers what it starts, retires what stops */
    injector **inj;         /* types a brief once (atomic; NULL: none) */
} spd_ctx;

/* Opens the spawn ledger and the control seen store (state_dir), ends
 * what a previous run left half done (sr_recover: answered failed, panes
 * closed; agents started before and answered are served again) and
 * starts the thread.  NULL and *err when a state file cannot be opened
 * (the mount goes on without the service: requests wait in control.<me>).
 * spd_consume then starts the consumer of control.<me>, once the broker
 * callback can reach s. */
spawnd *spd_start(const spd_ctx *ctx, char **err);
void spd_consume(spawnd *s);
/* Broker thread: a delivery of control.<me>.  Always BR_KEEP (acked by
 * the service once the outcome is recorded); after spd_stop the delivery
 * stays unacked and comes back on the next run. */
br_action spd_delivery(spawnd *s, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                       size_t len);
/* Ends the thread after the request under way; spd_free frees. */
void spd_stop(spawnd *s);
void spd_free(spawnd *s);

#endif
