/* broker/conn.h — the broker thread: sole owner of the AMQP connection.
 *
 * rabbitmq-c is not thread-safe, so exactly one thread (br_run) touches the
 * amqp_connection_state_t.  Every other thread hands it a request (publish,
 * ack, probe) and waits on a completion with its own deadline; a caller
 * that gives up (FE_TIMEOUT) leaves the request to the broker thread, which
 * still carries it out and tells the owner the real outcome (late_confirm,
 * late_ack).  Deliveries come back through br_callbacks, on the broker
 * thread.  broker/ includes nothing from fleetfs/ but log.h and errors.h
 * (make check).
 *
 * Two connections, each owned by its own broker thread: br_new makes the
 * consuming one and, inside it, a publishing one (conn_int.h), so that a
 * resource alarm of the broker, which blocks only connections that
 * publish, never stops consuming, acks or typing.  Publishes and receipts
 * go on the publishing connection; acks and probes on the consuming one.
 *
 * Channels: 1 publish (confirm mode, mandatory), 2 consume the own mailbox
 * (exclusive, manual ack, qos prefetch), 3 probe (passive declares; a 404
 * closes it and it is reopened after close-ok, see BROKER-FACTS.md),
 * 4 consume the own receipt queue (exclusive).  A channel the broker closes
 * is reopened alone (close-ok first); the connection is only dropped when
 * the connection fails, or sends nothing for two heartbeat intervals.
 *
 * Results: FE_OK; FE_NOT_CONNECTED (nothing was sent: ECOMM); FE_TIMEOUT
 * (the state is unknown: no confirm in time, or the link or publish channel
 * was lost after the publish left); FE_FULL, FE_NO_MAILBOX, FE_MISMATCH,
 * FE_ACCESS (the broker's refusals); FE_BLOCKED (a resource alarm blocks
 * publishing: nothing was sent); FE_INTERNAL.
 */
#ifndef FLEETFS_BROKER_CONN_H
#define FLEETFS_BROKER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/errors.h"

typedef struct br_conn br_conn;

/* The longest message id the broker layer carries (AMQP message_id). */
#define BR_MSG_ID_MAX 64

typedef struct {
    char **uris;            /* NULL-terminated; may carry credentials, never printed as is */
    const char *vhost;      /* NULL or "": the URI's own vhost */
    const char *coord_id;   /* owner of lead.<coord_id>.inbox */
    const char *queue_type; /* classic | quorum */
    long max_length;
    int64_t message_ttl_ms;
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
} br_config;

/* What the broker thread should do with a delivery, decided by the owner. */
typedef enum { BR_KEEP, BR_ACK, BR_REJECT } br_action;

typedef struct {
    /* On the broker thread, for every delivery on the own mailbox.
     * Must not call back into br_* synchronously. */
    br_action (*deliver)(void *ud, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                         size_t len);
    /* On the broker thread, for every receipt on lead.<coord_id>.receipts
     * (redelivered: the broker's flag, set on a copy it delivered before). */
    br_action (*receipt)(void *ud, bool redelivered, const char *body, size_t len);
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
    /* Generation of the consumer channel: it grows every time that channel
     * is (re)opened, on a new connection or after the broker closed the
     * channel alone.  Delivery tags belong to a channel, so a tag is only
     * meaningful with the epoch it was delivered under; the broker requeues
     * whatever an old epoch held and redelivers it under the new one. */
    uint64_t epoch;
    int64_t since_ms;  /* when link last changed */
    unsigned attempts; /* connect attempts since the last success */
    /* while connected: the node, as host:port of the URI in use, and what
     * the broker says it is ("RabbitMQ 3.10.8, cluster rabbit@h1") */
    char node[300];
    char server[256];
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
 * *unread: the mailbox had no consumer at send time. */
fe_code br_publish(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                   const char *body, size_t len, int64_t timeout_ms, bool *unread, char *detail,
                   size_t dlen);

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

const char *br_link_name(br_link l);

#endif
