/* SPDX-License-Identifier: Apache-2.0 */
/* broker/conn_int.h — inside the broker thread; for broker/ only.
 *
 * struct br_conn, the request and slot types and the thread's constants,
 * shared by the files that make up the broker thread.  Each file is used
 * through a header of its own and calls only files below it (no circle:
 * scripts/check-circles); bottom up:
 *   state.c     clocks, requests, publish timers, the status others read
 *   watchdog.c  the watchdog, and the kick of a connection's socket
 *   slots.c     the slot set (a consumer per box)
 *   chan.c      AMQP channel helpers: open, reopen, a failed call, declare
 *   expiry.c    the idle clocks of agent mailboxes
 *   pubchan.c   CH_PUB and CH_CANARY, and a publish put on CH_PUB
 *   probes.c    passive declares that never hold the thread; the ping
 *   boxes.c     declaring, gating, binding and consuming the slots
 *   boxops.c    what callers ask of the boxes (add, remove, ack)
 *   frames.c    what the broker sends unasked
 *   session.c   the connection's life: connect, set up, drop
 *   conn.c      the thread's loop and the public API (publish.c: the
 *               callers' side of a publish and a probe)
 * A lower file that must reach a higher one does so through the br_up
 * hooks below (drop the connection, a probe answered), set by conn.c.
 *
 * Ownership: the fields of br_conn above the "broker thread only" marker
 * are guarded by br_conn.lock; everything below it is touched by the
 * broker thread alone, and so is the amqp connection.  A br_req is shared
 * by its caller and the broker thread (refcounted, its own mutex).
 */
#ifndef FLEETFS_BROKER_CONN_INT_H
#define FLEETFS_BROKER_CONN_INT_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <amqp.h>

#include "broker/conn.h"
#include "fleetfs/os/os.h"

/* One channel per concern: a 404 on a probe must not close the publish
 * channel, and delivery tags are counted per channel.  CH_PROBE carries the
 * synchronous calls that touch no stuck queue (exchange declares, binds,
 * creating a mailbox); passive declares of a queue go out without waiting,
 * each on a probe channel of its own (probes.c).  Boxes other than 0 take
 * the lowest free number from CH_BOX_FIRST up. */
#define PROBE_CHANNELS 8
enum {
    CH_PUB = 1,
    CH_CONS = 2,
    CH_PROBE = 3,
    CH_RCPT = 4,
    CH_CANARY = 5,
    CH_PING = 6,
    CH_XCHECK = 7, /* the passive declare of a routed publish's exchange (probes.c) */
    CH_PROBE_FIRST = 8,
    CH_BOX_FIRST = CH_PROBE_FIRST + PROBE_CHANNELS
};
/* How long an asked probe (RQ_PROBE) is kept waiting for its answer, and
 * how long a publish waits for the probe of its mailbox before it goes out
 * without it (not knowing whether the mailbox is read). */
#define PROBE_WAIT_MS 5000
#define PROBE_PUBLISH_WAIT_MS 1000
/* A probe unanswered for PING_AFTER_MS while nothing at all came from the
 * broker for as long: is it a stuck queue or a dead link?  A passive
 * declare of an exchange (answered by the broker without any queue) on
 * CH_PING tells; no answer within PING_WAIT_MS drops the connection, as a
 * synchronous call's timeout did (probes.c). */
#define PING_AFTER_MS 2000
#define PING_WAIT_MS 3000

/* The slot of the own receipt queue (not a box a caller can name). */
#define BR_BOX_RECEIPTS UINT32_MAX
/* The slot of the own control queue (br_control_consume; not a box a
 * caller can name either). */
#define BR_BOX_CONTROL (UINT32_MAX - 1)
/* The slot of the own dead-letter queue (br_dead_consume). */
#define BR_BOX_DEAD (UINT32_MAX - 2)

/* One consumer on its own channel: a box (a mailbox the owner reads) or the
 * own receipt queue.  Fields up to the marker are the broker thread's;
 * `st` is shared (br_conn.lock).  The slot array itself changes only on
 * the broker thread, under br_conn.lock (status readers walk it). */
typedef struct br_slot {
    unsigned box;
    char queue[BR_QUEUE_MAX];
    char exchange[BR_QUEUE_MAX]; /* "" : no bindings */
    char **keys;                 /* wanted bind keys (NULL-terminated, never NULL) */
    char **unbind;               /* keys dropped by an update, still to unbind */
    GHashTable *held;            /* delivery tags of this epoch kept (BR_KEEP), not acked yet */
    amqp_channel_t ch;
    bool open;      /* channel.open-ok seen, no close since */
    bool declared;  /* the queue was declared on this connection */
    bool bound;     /* every key bound on this connection */
    bool consuming; /* consume-ok seen, not cancelled since */
    uint64_t epoch;
    int64_t retry_ms; /* when to try what is not done; 0: now */
    /* The gate before each declare (boxes.c, slot_gate): a queue that does
     * not answer must cost its own box only, never the connection.  Since
     * gate_since_ms (0: not gated) the declare waits for the answer to a
     * passive declare of the queue on a probe channel (gate_asked: it went
     * out); gate_ok: it came; gate_warned: its silence was said. */
    int64_t gate_since_ms;
    bool gate_waiting; /* its last round ended at the gate */
    bool gate_asked;
    bool gate_ok;
    bool gate_warned;
    int64_t bind_retry_ms;    /* when to try the bindings again */
    int64_t refused_since_ms; /* first exclusive-use refusal in a row; 0: none */
    bool legacy;              /* an agent mailbox made without x-expires (broker/expiry.h) */
    int64_t renew_ms;         /* when its idle clock is renewed next (expiry.h); 0: not due */
    /* ---- under br_conn.lock ---- */
    br_box_status st;
} br_slot;

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define CONSUMER_RETRY_MS 3000
#define CHANNEL_RETRY_MS 500  /* re-consume after the broker cancelled one consumer */
#define TAKEOVER_RETRY_MS 500 /* re-try an exclusive consume within takeover_grace */
#define RPC_TIMEOUT_MS 5000
/* A box waits at its gate (boxes.c) for the answer to a passive declare
 * of its queue; after GATE_WARN_MS without one it says the queue does not
 * answer, and looks again every GATE_TICK_MS (or at once when it comes). */
#define GATE_WARN_MS 5000
#define GATE_TICK_MS 1000
#define SLOT_GATED 2
#define HEARTBEAT_S 10
/* RabbitMQ tells a connection of a resource alarm (connection.blocked) only
 * when it next publishes: an idle publishing connection publishes an empty,
 * unroutable message this often (CH_CANARY, no confirms), so that a send
 * after an alarm fails at once instead of hanging. */
#define CANARY_MS 1500
/* rabbitmq-c sends without a deadline (amqp_basic_publish, acks): a broker
 * that stops reading while it still sends heartbeats (a resource alarm, a
 * stuck proxy) would hold the broker thread in send() for ever.  The
 * watchdog shuts down the socket of a connected broker thread that has
 * made no progress (a turn of its loop, or anything read) for STUCK_MS;
 * the blocked call then fails and the connection is dropped as usual.
 * br_stop waits STOP_WAIT_MS for the thread, kicks the socket the same
 * way, waits again, and then leaves the thread behind (never freeing what
 * it uses) rather than hang the unmount. */
/* br_read_frames handles at most this many frames, or for this long, per
 * turn of the loop, which then serves the requests and comes back at once
 * (poll without waiting while frames are buffered). */
#define READ_BATCH_FRAMES 256
#define READ_BATCH_MS 50
/* ... and reads only when poll() saw the socket readable or rabbitmq-c
 * holds buffered data: otherwise a read finds nothing (a recv and a poll
 * inside rabbitmq-c, two system calls, per turn).  Nor longer than this
 * without one: rabbitmq-c sends our heartbeats from inside the read. */
#define READ_IDLE_MS 100
#define STUCK_MS 10000
#define WATCHDOG_TICK_MS 1000
#define STOP_WAIT_MS 3000

/* A channel the publishing side publishes on (CH_PUB, CH_CANARY; pubchan.c):
 * open, or reopening after the broker closed it (channel.open sent, its
 * open-ok awaited; then confirm.select sent, its select-ok awaited), the
 * answers read as frames like any other. */
typedef enum { PCH_OPEN, PCH_OPENING, PCH_SELECTING } br_pch;
/* A publishing channel the broker has not opened again this long after it
 * closed it: the connection is dropped and made again (the synchronous
 * reopen this replaced dropped it after RPC_TIMEOUT_MS; a dead link is
 * found sooner, by the ping, probes.c). */
#define PUB_REOPEN_MS 15000

typedef enum { RQ_PUBLISH, RQ_ACK, RQ_PROBE, RQ_STOP, RQ_BOX_ADD, RQ_BOX_REMOVE } rq_kind;

typedef struct br_req {
    rq_kind kind;
    gint refs;
    GMutex m;
    GCond cv;
    bool done;
    bool abandoned;
    fe_code result;
    char detail[512];
    /* publish (peer: for the messages and late_confirm; for a routed
     * publish the routing key) */
    char peer[BR_QUEUE_MAX];
    char queue[BR_QUEUE_MAX];    /* the mailbox, or the queue to probe ("" none) */
    char exchange[BR_QUEUE_MAX]; /* "" : the default exchange */
    char key[BR_QUEUE_MAX];      /* routing key when exchange is set */
    char msg_id[BR_MSG_ID_MAX + 1];
    char *body;
    size_t len;
    bool may_create;
    int64_t ttl_ms; /* > 0: the per-message expiration (ms) */
    bool receipt;   /* to lead.<peer>.receipts, type "receipt" */
    bool unread;
    /* published without an answer to its mailbox's probe (the probe was
     * slow, or not asked): whether anyone reads it is not known, unless
     * the probe answers before the confirm (br_probe_frame) */
    bool unprobed;
    bool returned;
    bool create_asked; /* br_probe_create was asked for its queue */
    uint64_t pub_tag;
    /* ack, box add/remove */
    unsigned box;
    char **keys;
    bool delete_if_empty;
    uint64_t epoch;
    uint64_t tag;
    bool multiple;
    bool reject; /* ack: basic.reject (no requeue: to the dead-letter queue) instead */
    /* probe */
    br_probe probe;
    /* an asynchronous publish (br_publish_start): done is told once (told,
     * under m), by br_req_complete or, at deadline_ms, by the timer
     * (br_timed_tick), which then leaves the request abandoned: its real
     * outcome goes to late_confirm.  timed_link: its place in the
     * connection's `timed` list (under timed_lock; the list holds a ref). */
    br_publish_done done_cb;
    void *done_ud;
    int64_t deadline_ms;
    int64_t timeout_ms;
    bool told;
    GList *timed_link;
} br_req;

/* A probe channel: the passive declare of `queue` in flight on it ("" :
 * free) and what waits for its answer.  A queue that does not answer (its
 * process stuck, a quorum queue without a leader) holds its channel until
 * it does; the waiters leave at their deadlines, the channel stays busy. */
typedef struct {
    br_req *r;
    int64_t deadline_ms;
} br_probe_waiter;

typedef struct {
    char queue[BR_QUEUE_MAX];
    int64_t sent_ms;
    bool open;
    bool warned;    /* its silence was logged */
    GQueue waiters; /* br_probe_waiter*, in arrival order */
} br_probe_chan;

/* What a lower part of the broker thread asks of a higher one, without
 * calling up into it (scripts/check-circles: no file of broker/ calls a
 * file that calls it back).  Set by conn.c when it makes the br_conn,
 * read-only after: drop (session.c's br_session_drop; called as
 * br_drop_connection below), answered (boxes.c's br_slots_answered: a
 * probe answered for a gated box), publish_go and publish_probed (conn.c:
 * a routed publish's exchange is there; a publish's probe answered). */
typedef struct br_up {
    void (*drop)(br_conn *c, const char *why);
    void (*answered)(br_conn *c, const char *queue);
    void (*publish_go)(br_conn *c, br_req *r);
    void (*publish_probed)(br_conn *c, br_req *r, const br_probe *p);
} br_up;

struct br_conn {
    br_config cfg;
    br_callbacks cb;
    br_up up;
    /* Set before the threads start, read-only after: the consuming br_conn
     * owns a publishing one (pub), which knows its owner (owner) and only
     * publishes (publisher: no consumers, no dead-letter set-up). */
    bool publisher;
    br_conn *pub;
    br_conn *owner;
    GThread *thread;
    struct br_req *stop_req; /* owner only: the RQ_STOP br_stop submitted */
    GAsyncQueue *requests;
    os_wake wake;

    GMutex lock; /* guards the fields up to the marker */
    br_status st;
    bool first_attempt_done;
    GCond first_cv;
    GHashTable *probes;    /* queue name -> br_probe* */
    int sockfd;            /* the socket while connected, else -1 (the watchdog's to shut down) */
    char kick_reason[320]; /* why the socket was shut down from outside; "" */
    bool finished;         /* broker_main has returned */
    bool left_behind;      /* the thread did not end in time: never freed */
    bool wd_stop;          /* owner only: the watchdog is to end */
    GCond state_cv;        /* finished, wd_stop */
    GThread *watchdog;     /* owner only */
    /* broker thread writes, the watchdog reads: a turn of the loop or
     * anything read from the broker */
    _Atomic int64_t progress_ms;
    /* asynchronous publishes not told yet, by deadline (br_req.timed_link):
     * the broker thread adds and removes them and tells each at its
     * deadline; the watchdog tells those of a stuck thread */
    GMutex timed_lock;
    GQueue timed;

    /* ---- broker thread only ---- */
    amqp_connection_state_t amqp;
    bool connected;
    bool stopping;
    unsigned uri_index;
    int64_t next_attempt_ms;
    int64_t backoff_ms;
    int64_t last_recv_ms;      /* when the broker last sent anything (heartbeats too) */
    GPtrArray *slots;          /* br_slot*: [0] box 0, [1] the receipt queue, then boxes */
    uint64_t epoch_seq;        /* the last epoch given to a slot's channel */
    uint64_t ghosts_dropped;   /* deliveries of closed channels dropped, not yet logged */
    int64_t consumer_retry_ms; /* when to look at the slots again; 0: nothing to do */
    uint64_t pub_seq;          /* last delivery tag used on CH_PUB */
    int64_t last_pub_ms;       /* last publish (or canary) on this connection */
    bool low_disk;             /* blocked by LavinMQ's low-disk 406 (quirks.h): no
                                * connection.unblocked comes, the canary asks again */
    bool canary_confirms;      /* CH_CANARY is in confirm mode (put there while low_disk) */
    int64_t last_read_ms;      /* br_read_frames last asked rabbitmq-c for frames */
    bool was_connected;        /* connected at least once */
    GQueue inflight;           /* br_req*, ascending pub_tag */
    GHashTable *declared;      /* queues known present on this connection */
    GHashTable *unrouted;      /* receipt queues a receipt came back from (on_return):
                                  * probed, and made, before the next receipt to them */
    br_probe_chan probing[PROBE_CHANNELS]; /* probes.c */
    int64_t ping_sent_ms;                  /* a ping on CH_PING is out since; 0: none */
    /* a routed publish's exchange asked on CH_XCHECK (probes.c): its name
     * while the passive declare is out (""), since when, whether the
     * channel is open (it is reopened without waiting after a 404), and
     * the publishes waiting for the answer (br_req*, in order) */
    char xcheck[BR_QUEUE_MAX];
    int64_t xsent_ms;
    bool xopen;
    GQueue xwaiters;
    /* CH_PUB and CH_CANARY (pubchan.c): open, or reopening since
     * *_reopen_ms without this thread waiting; the publishes meant for
     * CH_PUB meanwhile wait in pubheld (br_req*, in order) */
    br_pch pub_ch;
    br_pch canary_ch;
    int64_t pub_reopen_ms;
    int64_t canary_reopen_ms;
    GQueue pubheld;
    /* this login may configure fleet.control (its declare succeeded on
     * this connection): the control queue is bound to it here, as the
     * mount's own mailbox is made here; else that binding is `fleetfs
     * declare`'s (said once: control_unbound_said) */
    bool control_bindable;
    bool control_unbound_said;
    /* this login made fleet.dead and bound it to fleet.dlx on this
     * connection: lead.<me>.dead is bound to it here, else by `fleetfs
     * declare` (said once: dead_unbound_said) */
    bool dead_bindable;
    bool dead_unbound_said;
};

/* The word a log line about the connection itself starts with:
 * "publisher" for the publishing connection (its lines stay apart from
 * the consuming connection's "broker"), else "broker". */
static inline const char *br_who(const br_conn *c)
{
    return c->publisher ? "publisher" : "broker";
}

/* The connection is gone: every part of the thread forgets what lived on
 * it and the next attempt is timed (session.c, through the br_up hook). */
static inline void br_drop_connection(br_conn *c, const char *why)
{
    c->up.drop(c, why);
}

#endif
