/* SPDX-License-Identifier: Apache-2.0 */
/* broker/conn.h — the broker thread: sole owner of the AMQP connection.
 *
 * rabbitmq-c is not thread-safe, so exactly one thread (br_run) touches the
 * amqp_connection_state_t.  Every other thread hands it a request (publish,
 * ack, probe) and waits on a completion with its own deadline; a caller
 * that gives up (FE_TIMEOUT) leaves the request to the broker thread, which
 * still carries it out and tells the owner the real outcome (late_confirm,
 * late_ack).  A send does not wait at all (br_publish_start): the thread
 * tells its outcome to a callback, on the confirm or at its deadline, and
 * the callback answers the writer from there (SPEC section 6, revised).
 * Deliveries come back through br_callbacks, on the broker thread.  broker/ includes nothing from fleetfs/ but log.h and errors.h
 * (make check).
 *
 * Two connections, each owned by its own broker thread: br_new makes the
 * consuming one and, inside it, a publishing one (conn_int.h), so that a
 * resource alarm of the broker, which blocks only connections that
 * publish, never stops consuming, acks or typing.  Publishes and receipts
 * go on the publishing connection; acks and probes on the consuming one.
 *
 * Channels: 1 publish (confirm mode, mandatory), 2 consume the own mailbox
 * (box 0: exclusive, manual ack, qos prefetch), 3 probe (passive declares,
 * and the bindings of every box; a 404 closes it and it is reopened after
 * close-ok, see BROKER-FACTS.md), 4 consume the own receipt queue
 * (exclusive), 5 the publishing connection's canary, 6 the ping (probes.c),
 * 7 the passive declare of a routed publish's exchange (asked without
 * waiting, once per connection, probes.c), 8 to 15 the passive declares
 * of queues (probes.c), and from 16 up one channel per further box (the
 * lowest number free when it is added).  A
 * channel the broker closes is reopened alone (close-ok first; the publish,
 * canary, probe, ping and exchange-check channels without waiting for the
 * open-ok, pubchan.c and probes.c); the
 * connection is only dropped when the connection fails, or sends nothing
 * for two heartbeat intervals.
 *
 * Boxes (issue 18): the consuming connection serves mailboxes ("boxes")
 * besides the lead's own, box 0, each on its own channel with its own
 * epoch, consumer state and takeover grace, so that a refusal on one never
 * disturbs another.  A consumer channel is (re)opened only while rabbitmq-c
 * holds no queued frame, and a delivery on a channel that is not the open
 * channel of a box is dropped unseen (the broker requeued it when that
 * channel closed): a delivery is always reported with the epoch of the
 * channel it arrived on, never with a reopened channel's (issue 16, 2.1).
 *
 * Results: FE_OK; FE_NOT_CONNECTED (nothing was sent: ECOMM); FE_TIMEOUT
 * (the state is unknown: no confirm in time, or the link or publish channel
 * was lost after the publish left); FE_FULL, FE_NO_MAILBOX, FE_MISMATCH,
 * FE_ACCESS (the broker's refusals); FE_BLOCKED (a resource alarm blocks
 * publishing: nothing was sent); FE_NOT_EMPTY (br_box_remove: the mailbox
 * holds messages, kept); FE_BAD_INPUT (a call the API refuses);
 * FE_INTERNAL.
 */
#ifndef FLEETFS_BROKER_CONN_H
#define FLEETFS_BROKER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/base/errors.h"

typedef struct br_conn br_conn;
struct br_death; /* broker/death.h */

/* The longest message id the broker layer carries (AMQP message_id). */
#define BR_MSG_ID_MAX 64

typedef struct {
    char **uris;            /* NULL-terminated; may carry credentials, never printed as is */
    const char *vhost;      /* NULL or "": the URI's own vhost */
    const char *coord_id;   /* owner of lead.<coord_id>.inbox */
    const char *queue_type; /* classic | quorum */
    long max_length;
    int64_t message_ttl_ms;
    int64_t agent_expires_ms; /* an agent mailbox's x-expires (broker/expiry.h) */
    int prefetch;
    const char *ca;   /* CA file for amqps:// */
    const char *host; /* for the connection name shown by the broker */
    /* name of the environment variable the URIs (and their passwords) came
     * from, for the messages; NULL: FLEET_BROKER_URI */
    const char *uri_env;
    /* How long an exclusive-use refusal of the own mailbox is taken for the
     * previous consumer (a daemon just unmounted) still letting go: the
     * consume is retried meanwhile (BR_CONS_WAITING).  0: no grace. */
    int64_t takeover_grace_ms;
    /* Box 0's bindings to fleet.msg (BR_EXCHANGE_MSG), e.g. "broadcast.all",
     * "broadcast.<g>": NULL-terminated, NULL or empty for none.  Made (and
     * made again after every reconnect) like any box's keys; a key that
     * cannot be bound leaves the lead consuming (br_box_status.bound). */
    const char *const *lead_bind_keys;
} br_config;

/* The topic exchange of agent mailboxes and broadcasts (SPEC section 10):
 * durable; declared at connect where the login may (with per-host logins
 * `scripts/broker host add` makes it). */
#define BR_EXCHANGE_MSG "fleet.msg"
/* The direct exchange of the control plane (SPEC section 11): requests to
 * start and stop agents go to it with the far host's coord_id as key and
 * land in control.<coord_id> (br_control_queue), which `fleetfs declare`
 * (scripts/broker host add) makes and binds, and a mount whose login may
 * configure makes and binds for itself.  A per-host login may publish
 * to it but may not bind anything to it (no read permission on it): a
 * direct exchange has no topic permissions, so a login that could bind
 * could bind its own queue with another host's key and read its requests. */
#define BR_EXCHANGE_CONTROL "fleet.control"
/* Box ids: 0 is the lead's own mailbox (lead.<coord_id>.inbox, set up from
 * br_config); any other value below BR_BOX_MAX is the caller's to give. */
#define BR_BOX_LEAD 0u
#define BR_BOX_MAX 100000u
/* The longest queue name and bind key a box takes. */
#define BR_QUEUE_MAX 160

/* What the broker thread should do with a delivery, decided by the owner. */
typedef enum { BR_KEEP, BR_ACK, BR_REJECT } br_action;

typedef struct {
    /* On the broker thread, for every delivery on the own mailbox.
     * Must not call back into br_* synchronously. */
    br_action (*deliver)(void *ud, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                         size_t len);
    /* On the broker thread, for every delivery on every box (box 0
     * included) when set; deliver is then never called.  epoch: of the
     * channel the delivery arrived on (acks need it, br_ack_box).  Must not
     * call back into br_* synchronously.  br_box_add needs it. */
    br_action (*deliver_box)(void *ud, unsigned box, uint64_t epoch, uint64_t tag, bool redelivered,
                             const char *body, size_t len);
    /* On the broker thread, for every receipt on lead.<coord_id>.receipts
     * (epoch: of the channel it arrived on, where BR_ACK acks it at once;
     * redelivered: the broker's flag, set on a copy it delivered before). */
    br_action (*receipt)(void *ud, uint64_t epoch, bool redelivered, const char *body, size_t len);
    /* On the broker thread, for every delivery on the own control queue
     * (br_control_consume): epoch and tag for br_ack_control.  Must not
     * call back into br_* synchronously; BR_KEEP until the owner decided. */
    br_action (*control)(void *ud, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                         size_t len);
    /* On the broker thread, for every delivery on the own dead-letter queue
     * lead.<coord_id>.dead (br_dead_consume): a message this host sent
     * (BR_HEADER_HOST says so) that the broker dead-lettered, with what its
     * x-death says (broker/death.h).  BR_ACK or BR_REJECT (the queue has no
     * dead-letter exchange: both only remove it); BR_KEEP is taken as ack.
     * Must not call back into br_* synchronously. */
    br_action (*dead)(void *ud, const struct br_death *d, const char *body, size_t len);
    /* Connection or consumer state changed (status files). */
    void (*changed)(void *ud);
    /* A publish whose writer gave up (br_publish returned FE_TIMEOUT) got
     * its answer after all: FE_OK (in the mailbox), FE_FULL, FE_NO_MAILBOX,
     * or FE_TIMEOUT again when the connection or channel went away before
     * the confirm (still unknown: the message may be in the mailbox).
     * On the broker thread. */
    void (*late_confirm)(void *ud, const char *peer, const char *msg_id, fe_code result,
                         bool unread);
    /* An ack whose caller gave up (br_ack returned FE_TIMEOUT) was still
     * carried out by the broker thread afterwards, or not.  result FE_OK:
     * the ack went to the broker, the message (every tag <= tag when
     * multiple) is consumed: forget it, never ack it again (a second ack of
     * a tag closes the consumer channel with 406).  Anything else: no ack
     * was sent; the message is still held, or will be redelivered (on a
     * new epoch).  On the broker thread; may be NULL. */
    void (*late_ack)(void *ud, uint64_t epoch, uint64_t tag, bool multiple, fe_code result);
    /* late_ack with the box (br_ack_box and br_ack): when set, it is called
     * for every box, box 0 included, and late_ack never. */
    void (*late_ack_box)(void *ud, unsigned box, uint64_t epoch, uint64_t tag, bool multiple,
                         fe_code result);
    void *ud;
} br_callbacks;

typedef enum { BR_CONNECTING, BR_CONNECTED, BR_UNREACHABLE } br_link;
typedef enum {
    BR_CONS_NONE,
    BR_CONS_OK,
    BR_CONS_WAITING, /* refused as in exclusive use, within takeover_grace */
    BR_CONS_EXCLUSIVE,
    BR_CONS_MISMATCH,
    BR_CONS_ERROR
} br_cons;

typedef struct {
    br_link link;
    char uri[512]; /* current URI, password redacted */
    char vhost[256];
    char reason[512]; /* why unreachable, or "" */
    br_cons consumer;
    char consumer_reason[512];
    bool tls;
    /* Generation of box 0's consumer channel (its br_box_status.epoch): it
     * grows (by one or more: every box's channel takes the next number of
     * one counter) every time that channel is (re)opened, on a new
     * connection or after the channel closed alone.  Delivery tags belong
     * to a channel, so a tag is only meaningful with the epoch it was
     * delivered under; the broker requeues whatever an old epoch held and
     * redelivers it under the new one. */
    uint64_t epoch;
    /* box 0's channel of that epoch is open: what it delivered can be
     * acked, also while its consumer is paused because the receipt queue
     * cannot be consumed (consumer not ok) */
    bool acks_open;
    int64_t since_ms;  /* when link last changed */
    unsigned attempts; /* connect attempts since the last success */
    /* while connected: the node, as host:port of the URI in use, and what
     * the broker says it is ("RabbitMQ 3.10.8, cluster rabbit@h1") */
    char node[300];
    char server[256];
    /* the queue type the broker makes for ours (broker/quirks.h) */
    char queue_type[96];
    int heartbeat_s; /* negotiated AMQP heartbeat, 0: none */
    /* The publishing connection is blocked by a resource alarm of the
     * broker (connection.blocked, with the broker's reason): sends fail at
     * once with FE_BLOCKED; consuming and acks, on the other connection,
     * go on. */
    bool blocked;
    char blocked_reason[256];
} br_status;

typedef struct {
    bool valid; /* false: never probed or broker unreachable */
    bool present;
    uint32_t messages; /* ready only */
    uint32_t consumers;
    int64_t at_ms;
    fe_code err;
    char detail[256];
    /* this login was refused (403) when it tried to create the queue: with
     * per-host logins, a host that was never added (scripts/broker host add) */
    bool create_refused;
} br_probe;

/* br_new sets everything up without a thread, so the owner can wire its
 * callbacks' targets before any callback can run; br_run starts the
 * thread.  br_start is both. */
br_conn *br_new(const br_config *cfg, const br_callbacks *cb);
void br_run(br_conn *c);
br_conn *br_start(const br_config *cfg, const br_callbacks *cb);
/* br_stop ends the thread and closes the connection (the broker takes
 * back what we held, unacked); status calls still work after it.  br_free
 * stops (if needed) and frees. */
void br_stop(br_conn *c);
void br_free(br_conn *c);

void br_get_status(br_conn *c, br_status *st);
/* Blocks until the first connect attempt finished (either way) or timeout. */
bool br_wait_first_attempt(br_conn *c, int64_t timeout_ms);

/* Publish body to peer's mailbox and wait for the broker's confirm.
 * may_create: declare the mailbox when absent (configured peers).
 * ttl_ms > 0: the AMQP per-message `expiration` (ms): the broker drops the
 * message itself once it waited that long in a queue (dead-lettered like
 * a queue-TTL expiry); 0: none.
 * *unread: the mailbox had no consumer at send time. */
fe_code br_publish(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                   const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms, bool *unread,
                   char *detail, size_t dlen);

/* The asynchronous publish (SPEC section 6, revised): the caller hands
 * over bytes ready to publish and does not wait.  done is told the outcome
 * exactly once: the confirm's (FE_OK, with unread and detail as
 * br_publish gives them; FE_FULL, FE_NO_MAILBOX, ...), FE_NOT_CONNECTED
 * when nothing went out, or FE_TIMEOUT at timeout_ms after the call when
 * no answer came by then (the state is unknown; late_confirm tells the
 * real outcome when it comes, as for a br_publish that gave up).  done runs
 * on the publishing connection's thread, which owns the connection: it
 * must not call br_* synchronously (it may record and reply; the write is
 * answered from there).  Only if that thread is itself stuck (a send(2)
 * the broker does not read, which the watchdog breaks after STUCK_MS) does
 * the watchdog thread tell the FE_TIMEOUT instead, within about a second
 * of the deadline, so no caller waits much past timeout_ms.
 * Returns FE_OK when handed over (done may have run already when it
 * returns); anything else (FE_NOT_CONNECTED, FE_BLOCKED, FE_BAD_INPUT):
 * nothing was sent and done is never called. */
typedef void (*br_publish_done)(void *ud, fe_code result, bool unread, const char *detail);
fe_code br_publish_start(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                         const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                         br_publish_done done, void *ud, char *detail, size_t dlen);
/* br_publish_route (below) without the wait, as br_publish_start. */
fe_code br_publish_route_start(br_conn *c, const char *exchange, const char *key,
                               const char *probe_queue, const char *msg_id, const char *body,
                               size_t len, int64_t ttl_ms, int64_t timeout_ms, br_publish_done done,
                               void *ud, char *detail, size_t dlen);

/* Publish a receipt to lead.<peer>.receipts (declared when absent) and
 * wait for the broker's confirm: the receipts outbox keeps an entry until
 * this says FE_OK. */
fe_code br_publish_receipt(br_conn *c, const char *peer, const char *msg_id, const char *body,
                           size_t len, int64_t timeout_ms, char *detail, size_t dlen);

/* Ack delivery tag (and every earlier one when multiple) of epoch on the
 * consumer channel.  FE_NOT_CONNECTED: not sent (no link, or the tag's
 * channel is gone: the message will be redelivered).  FE_TIMEOUT: the
 * broker thread did not get to it in time; it still will, and late_ack
 * tells the outcome. */
fe_code br_ack(br_conn *c, uint64_t epoch, uint64_t tag, bool multiple, int64_t timeout_ms);

/* Passive declare of a queue.  A cached answer younger than max_age_ms is
 * returned without asking the broker. */
fe_code br_probe_queue(br_conn *c, const char *queue, int64_t max_age_ms, int64_t timeout_ms,
                       br_probe *out);
/* The last answer for queue, without blocking; false when there is none. */
bool br_probe_cached(br_conn *c, const char *queue, br_probe *out);

/* "lead.<id>.inbox" */
void br_inbox_queue(const char *id, char *out, size_t n);
/* "agent.<gid>.inbox" (gid: <name>@<coord_id>) */
void br_agent_queue(const char *gid, char *out, size_t n);
/* "control.<id>": the host's control queue, bound to fleet.control with
 * key <id> */
void br_control_queue(const char *id, char *out, size_t n);

/* ---- boxes: the mailboxes this connection consumes ------------------ */

typedef struct {
    char queue[BR_QUEUE_MAX];
    /* the consumer, as br_status.consumer is for the lead (WAITING,
     * EXCLUSIVE, MISMATCH, ERROR with the reason); BR_CONS_NONE while not
     * connected or not tried yet */
    br_cons consumer;
    char reason[512];
    /* generation of the box's channel (0: never opened); grows on every
     * (re)open and is never reused by another box of this connection */
    uint64_t epoch;
    /* the channel of that epoch is open: its deliveries can be acked (also
     * while the consumer is paused or refused on it) */
    bool acks_open;
    /* every bind key is bound on this connection; else bind_reason says
     * which one the broker refused and why (retried every 3 s) */
    bool bound;
    char bind_reason[384];
    /* the own dead letters' queue only: how many times a declare found it
     * at its cap (TOPO_DLQ_MAX_LENGTH), so the broker may have dropped the
     * oldest (doc/protocol.md section 4), and the count it last found */
    unsigned found_full;
    uint32_t full_count;
} br_box_status;

/* Add box (1 <= box < BR_BOX_MAX) consuming queue: returns 0 at once (the
 * broker thread does the work, now and after every reconnect), -1 with
 * errno EINVAL (bad id, empty or too long names, keys without an exchange,
 * no deliver_box callback, the publishing connection) or EEXIST (box is in
 * use with another queue or exchange; box 0 with any queue but
 * lead.<coord_id>.inbox).
 * The broker thread declares queue with the fleet's mailbox arguments
 * (those of lead.<coord_id>.inbox), binds it to exchange (NULL or "": no
 * bindings) with each of bind_keys (NULL-terminated; NULL: none), and
 * consumes it exclusively with manual ack and the prefetch bound, on the
 * box's own channel.  An exclusive-use refusal within takeover_grace is
 * waited out like the lead's; any refusal is that box's alone (its status
 * says why, retried every 3 s).  Boxes other than 0 are consumed only
 * while the own receipt queue is (a receipt queue that cannot be consumed
 * pauses every box, as it pauses the lead's).  Deliveries go to
 * deliver_box.  Adding an existing box with the same queue and exchange
 * replaces its bind keys (new ones bound, dropped ones unbound; the
 * consumer is left alone): also for box 0, which is how the lead's keys
 * change at run time.  Bindings are durable in the broker: a key dropped
 * while fleetfs was not running stays bound until someone unbinds it
 * (doc/operations.md).  Bindings that cannot be made
 * (403 of a per-host login, a missing exchange) do not stop the consumer:
 * br_box_status.bound says so. */
int br_box_add(br_conn *c, unsigned box, const char *queue, const char *exchange,
               const char *const *bind_keys);

/* Stop serving box (not 0) and wait for the broker thread (timeout_ms).
 *  - delete_if_empty, and the box holds deliveries it kept (BR_KEEP) and
 *    has not acked: FE_NOT_EMPTY at once, nothing touched (the box goes on
 *    as it was) — an honest `rmdir` fails ENOTEMPTY.
 *  - Otherwise the box's channel is closed first: its consumer ends (and
 *    with keep, what it held goes back to the queue; acks of its epoch fail
 *    from then on).  Then:
 *  - delete_if_empty: the queue is deleted only when nothing waits in it:
 *    queue.delete if-empty (classic), or, as quorum queues refuse if-empty
 *    (540, a connection error), its keys unbound, its messages counted and
 *    the queue deleted at 0 (a message published to it by name through the
 *    default exchange in between would be lost with it).  FE_OK: gone,
 *    with its bindings (a publish to its keys is returned: ENXIO), or gone
 *    already.  FE_NOT_EMPTY: messages wait in it: nothing is deleted, the
 *    box stays, bound again and consumed again on a new epoch.
 *  - else (keep): every bind key is unbound and the queue kept with what
 *    waits in it (FE_OK): nothing new is routed to it, a publish to its keys
 *    is returned (ENXIO), and br_box_add takes it up again.
 * FE_NOT_CONNECTED: no connection; nothing changed.  FE_BAD_INPUT: no such
 * box (or box 0).  FE_ACCESS: the login may not delete it (the box stays).
 * FE_TIMEOUT: the broker thread did not finish in time; it still will
 * (br_box_status tells).  detail (may be NULL) says what happened. */
fe_code br_box_remove(br_conn *c, unsigned box, bool delete_if_empty, int64_t timeout_ms,
                      char *detail, size_t dlen);

/* The box's state; false when there is no such box. */
bool br_box_status_get(br_conn *c, unsigned box, br_box_status *out);

/* br_ack for a box: tag (and every earlier one when multiple) of epoch on
 * box's channel.  FE_NOT_CONNECTED: not sent (no link, no such box, or the
 * epoch's channel is gone: the message will be redelivered, on a new
 * epoch).  FE_TIMEOUT: late_ack_box (else late_ack) tells the outcome.
 * br_ack(c, e, t, m, to) is br_ack_box(c, 0, e, t, m, to). */
fe_code br_ack_box(br_conn *c, unsigned box, uint64_t epoch, uint64_t tag, bool multiple,
                   int64_t timeout_ms);

/* Publish body to exchange with routing key and wait for the broker's
 * confirm: persistent, mandatory, confirmed, type "coord", on the
 * publishing connection, exactly like br_publish.  probe_queue (NULL or
 * "": none) is passively declared first (at most 1 s old) to tell *unread
 * (it had no consumer); it is never created.  Results as br_publish:
 * FE_NO_MAILBOX when the broker returned it, which for a topic exchange
 * means that no queue at all is bound with a matching key (no such agent;
 * a broadcast group without a member): a message that reached one queue
 * or more is never returned.  FE_NO_MAILBOX also when exchange does not
 * exist (nothing was published).  FE_FULL: the broker nacked it: a
 * mailbox it routes to is full — for a broadcast, the copies of the other
 * members may have been delivered.  A writer that gives up (FE_TIMEOUT)
 * gets late_confirm with peer = key. */
fe_code br_publish_route(br_conn *c, const char *exchange, const char *key, const char *probe_queue,
                         const char *msg_id, const char *body, size_t len, int64_t ttl_ms,
                         int64_t timeout_ms, bool *unread, char *detail, size_t dlen);

/* ---- the control queue (SPEC section 11) ------------------------------
 * control.<coord_id>: requests to start and stop agents here.  Consumed
 * exclusively, manual ack, on a channel of its own like a box (a refusal
 * is its alone; an exclusive-use refusal within takeover_grace is waited
 * out), and paused with the boxes while the receipt queue cannot be
 * consumed.  The queue is declared with the mailbox arguments, as
 * `fleetfs declare` makes it.  Its one binding (fleet.control, key
 * <coord_id>) is made here when this login may configure fleet.control
 * (a shared login with configure rights, as the mount's own mailbox is
 * made), else it is the operator's (`fleetfs declare`: a per-host login
 * may not bind to fleet.control; said once in the log, and
 * br_box_status.bound stays false).  Deliveries go to the control
 * callback. */
/* Start consuming it (now and after every reconnect): 0, or -1 with
 * errno EINVAL (no control callback, the publishing connection). */
int br_control_consume(br_conn *c);
/* Its consumer's state; false until br_control_consume. */
bool br_control_status(br_conn *c, br_box_status *out);
/* Ack (reject: basic.reject without requeue, to the dead-letter queue) a
 * delivery of the control queue.  FE_NOT_CONNECTED: not sent (the epoch's
 * channel is gone: the broker redelivers it, flagged redelivered);
 * FE_TIMEOUT: the broker thread still carries it out, nobody is told. */
fe_code br_ack_control(br_conn *c, uint64_t epoch, uint64_t tag, bool reject, int64_t timeout_ms);

/* ---- the own dead-letter queue (doc/protocol.md section 4) -------------
 * lead.<coord_id>.dead: the dead letters of messages this host sent,
 * routed home from fleet.dlx through the headers exchange fleet.dead by
 * their BR_HEADER_HOST (broker/death.h).  Declared with fleet.dlq's
 * arguments (capped, no dead-letter exchange of its own), consumed
 * exclusively on a channel of its own like a box, paused with the boxes
 * while the receipt queue cannot be consumed.  Its binding to fleet.dead
 * (key <coord_id>, x-match all, BR_HEADER_HOST = <coord_id>) is made here
 * where this login may configure fleet.dead (a shared login: fleet.dead and
 * its binding to fleet.dlx are made at connect as fleet.dlx is), else it
 * is the operator's (`fleetfs declare`); said once.  Deliveries go to the
 * dead callback. */
/* Start consuming it (now and after every reconnect): 0, or -1 with
 * errno EINVAL (no dead callback, the publishing connection). */
int br_dead_consume(br_conn *c);
/* Its consumer's state; false until br_dead_consume. */
bool br_dead_status(br_conn *c, br_box_status *out);

const char *br_link_name(br_link l);

#endif
