/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/fleet.h — the daemon's parts, wired together in main.c and
 * handed to the FUSE handlers through the tree (tree.c).  Each part owns its own
 * state and lock; this struct only points at them.
 */
#ifndef FLEETFS_FLEET_H
#define FLEETFS_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "broker/conn.h"
#include "broker/roster.h"
#include "fleetfs/model/mailbox.h"
#include "fleetfs/face/notify.h"
#include "fleetfs/config/options.h"
#include "fleetfs/inject/inject.h"
#include "fleetfs/presence/presence.h"
#include "fleetfs/spawn/asked.h"

typedef struct fleet {
    fs_opts *opts;
    mailbox *mb;
    br_conn *br;
    notifier *nt;
    injector *inj;      /* NULL: inject=none */
    presence *pr;       /* the presence table (heartbeats in and out) */
    ro_conn *ro;        /* the roster thread and its own broker connection */
    struct spawnd *spd; /* the control service (spawnd.h); NULL until it runs */
    char host[256];
    char *mountpoint;   /* absolute */
    int64_t started_ms; /* monotonic */
    uid_t uid;
    gid_t gid;
    bool uri_defaulted;     /* no URI given: amqp://localhost:5672 is tried */
    struct ag_registry *ag; /* this host's agents (agents/agents.h) */
    /* hosts.c: the control requests this host sent (hosts/<h>/spawns) */
    GMutex hs_lock;
    ak_book *asked;
    struct claims *cl; /* claims/ (face/claims.h) */
} fleet;

/* name is in peers/: configured, or discovered by presence */
bool fleet_is_peer(const fleet *f, const char *name);

#endif
