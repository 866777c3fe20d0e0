/* SPDX-License-Identifier: Apache-2.0 */
/* broker/roster_int.h — what the roster's two files share and nobody else
 * sees: the connection's state (struct ro_conn) and the bindings part
 * (rosterbind.c) that the thread (roster.c) calls.
 */
#ifndef FLEETFS_BROKER_ROSTER_INT_H
#define FLEETFS_BROKER_ROSTER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <amqp.h>
#include <glib.h>

#include "broker/roster.h"
#include "broker/topology.h"
#include "fleetfs/os/os.h"

#define RO_CH 1

struct ro_conn {
    ro_config cfg;
    ro_callbacks cb;
    GThread *thread;
    os_wake wake;
    char rkey[256]; /* roster.<host>.<coord_id> */

    GMutex lock; /* guards up to the marker */
    ro_status st;
    bool stop, leaving, kicked;
    gint64 stop_at;                   /* monotonic µs of the stop request */
    char **want_groups, **want_leads; /* ro_hear's, sorted */
    bool want_dirty;
    bool want_wide;   /* ro_wide's: roster.# besides */
    GPtrArray *asks;  /* leads to ask for a heartbeat */
    int sockfd;       /* while connected, else -1: ro_stop may shut it down */
    bool finished;    /* roster_main returned */
    bool left_behind; /* did not end in time: never freed */
    GCond done_cv;

    /* ---- roster thread only ---- */
    amqp_connection_state_t amqp;
    bool connected;
    unsigned uri_index;
    int64_t next_attempt_ms, backoff_ms;
    int64_t up_since_ms; /* when the current connection was made */
    char last_loss[256]; /* why the last connection was lost */
    bool flapping;       /* lost again and again right after connecting */
    int64_t next_beat_ms, last_beat_ms;
    char shown[300];    /* host:port of the current URI, no credentials */
    char host[128];     /* the host word */
    char qname[128];    /* our queue, while connected */
    GHashTable *bound;  /* binding key -> 1, on our queue now */
    char **groups;      /* the groups our key carries (ro_hear's) */
    GHashTable *gone;   /* group just left -> monotonic ms until it leaves the key */
    int64_t last_iv_ms; /* the interval of our last heartbeat */
    bool fallback;      /* a scoped binding was refused: roster.# from now on */

    topo_group_beats gb; /* scoped: which beats carry our group words */
    unsigned self_n;     /* beats since the last with our self word */
    bool self_mode;      /* the last sync bound our self word, not our key */
};

/* rosterbind.c */
gint rob_cmp_str(gconstpointer a, gconstpointer b);
/* After a refused synchronous call on the roster channel: its reply code,
 * the channel reopened (0: anything else) */
int rob_channel_refused(ro_conn *r);
/* scoped, and the broker took our scoped bindings */
bool rob_scoped(ro_conn *r);
/* Bind what is wanted and not bound, unbind the rest: 0, or -1 with why */
int rob_sync(ro_conn *r, char *why, size_t n);
/* Tell the roster thread (its wake-up fd) */
void rob_wake(ro_conn *r);

#endif
