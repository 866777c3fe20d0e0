/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claims_int.h — what the claims thread's files share (broker/
 * only): claims.c (the thread: take and release, probes, events),
 * claimapi.c (the thread as other threads reach it: start, watchdog, stop,
 * the requests) and claimconn.c (the connection's login and set-up).
 * Ownership as claims.c's top comment says.
 */
#ifndef FLEETFS_BROKER_CLAIMS_INT_H
#define FLEETFS_BROKER_CLAIMS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <amqp.h>
#include <glib.h>

#include "broker/claims.h"
#include "broker/sideconn.h"
#include "fleetfs/os/os.h"

#define CH_MAIN 1  /* the token: gets, its publish (confirmed), acks */
#define CH_PROBE 2 /* passive declares */
/* the fleet's events, in (our queue's deliveries) and out (announcements,
 * unconfirmed): a channel of their own, so that nothing arrives on CH_MAIN
 * but the answers to a take's own calls (an event's delivery or an
 * announcement's ack between a basic.get-ok and its content made the
 * take's read fail, and dropped the connection: t1110) */
#define CH_EVENTS 3
#define CH_FIRST 4 /* claims: CH_FIRST .. CH_FIRST + BC_MAX_HELD - 1 */
#define RPC_TIMEOUT_MS 2000
/* bc_stop's bound, the broker threads' (conn_int.h STOP_WAIT_MS) and the
 * roster's: this long from the stop request, a kick of the socket, as long
 * again, then the thread is left behind rather than hold the unmount */
#define BC_STOP_WAIT_MS 3000
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define PROBES_PER_ROUND 200
#define HELD_PER_ROUND 20 /* our own claims checked each second */

typedef enum { RQ_TAKE, RQ_RELEASE, RQ_ANNOUNCE, RQ_EXPIRE } rq_kind;

typedef struct {
    rq_kind kind;
    char name[128];
    char *body; /* take: the record; announce: the event; expire: why */
    /* answered under bc_conn.lock */
    int rc;
    uint64_t token;
    char why[256];
    bool done, abandoned;
} bc_req;

typedef struct {
    int ch;
    uint64_t token;
    char tag[128]; /* our consumer's tag: a cancel names it (other_frame) */
} held;

struct bc_conn {
    bc_config cfg;
    bc_callbacks cb;
    GThread *thread;
    GThread *watch; /* bc_watchdog's */
    os_wake wake;

    GMutex lock; /* guards up to the marker */
    GCond done_cv;
    GQueue reqs; /* bc_req *, in order */
    bool stop, up;
    char down_why[256];  /* why not up */
    int sockfd;          /* while connected: bc_watchdog and bc_stop shut it down */
    int64_t progress_ms; /* the thread's last sign of life: a loop, an answer */
    char kick_why[300];  /* why the watchdog shut the socket down ("": it did not) */
    bool finished;       /* the thread has ended */
    int64_t stop_at;     /* monotonic us of the first stop request (bc_stop_begin) */
    bool left_behind;    /* did not end in time: never freed (bc_stop) */

    /* ---- claims thread only ---- */
    amqp_connection_state_t amqp;
    bool connected;
    unsigned uri_index;
    int64_t next_attempt_ms, backoff_ms, last_ok_ms, next_round_ms;
    uint64_t next_tag; /* publish sequence on CH_MAIN */
    char shown[300];
    char reason[256];
    GHashTable *held;   /* name -> held */
    bool *ch_used;      /* BC_MAX_HELD */
    char **probe_names; /* this round's, probed one per loop */
    unsigned probe_at;
    unsigned held_at; /* rotation over held */
};

/* The side connections' helpers (broker/sideconn.h) on the claims
 * connection: the broker's words, the words for the last failed
 * synchronous call, and the code of a channel.close that answered it. */
static inline void bc_bytes_str(amqp_bytes_t b, char *out, size_t n)
{
    sc_bytes_str(b, out, n);
}
static inline void bc_rpc_words(bc_conn *c, const char *what, char *out, size_t n)
{
    sc_rpc_words(c->amqp, what, out, n);
}
static inline int bc_channel_refused(bc_conn *c, int ch)
{
    return sc_channel_refused(c->amqp, ch);
}
/* claims.c: the claims thread (bc_run starts it, claimapi.c). */
gpointer bc_thread_main(gpointer data);

/* claimconn.c: TCP or TLS, login: 0, or -1 and why. */
int bc_open_login(bc_conn *c, const char *uri, char *why, size_t n);
/* The channels, confirms, the events exchange and our queue: 0 or -1. */
int bc_setup(bc_conn *c, char *why, size_t n);

#endif
