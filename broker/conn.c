/* broker/conn.c — the broker thread.
 *
 * Ownership: everything in struct br_conn below the "broker thread only"
 * line is touched by the broker thread alone; the fields above it are
 * guarded by br_conn.lock.  Requests travel through a GAsyncQueue and an
 * eventfd that wakes the thread's poll().
 *
 * Confirms: the publish channel is in confirm mode and publishes are
 * pipelined; each publish gets the next delivery tag and waits in
 * `inflight` (ordered by tag) until its basic.ack / basic.nack.  A
 * mandatory publish that found no queue comes back as basic.return
 * *before* its ack (BROKER-FACTS.md), so a return marks the in-flight
 * entry with the same message_id, and the ack that follows completes it as
 * "no such mailbox".
 *
 * Channel errors: a channel.close from the broker (404 on a passive
 * declare, 406 on an argument mismatch, 403 on an exclusive consumer) is
 * answered with channel.close-ok before the channel number is reused;
 * reusing it without that kills the whole connection.
 *
 * Reconnection: capped exponential backoff over the configured URIs in
 * turn; on every new connection the epoch grows, and delivery tags from an
 * older epoch are refused instead of acking the wrong message.
 */
#include "broker/conn.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "broker/topology.h"
#include "fleetfs/envelope.h"
#include "fleetfs/log.h"
#include "fleetfs/options.h"

enum { CH_PUB = 1, CH_CONS = 2, CH_PROBE = 3, CH_RCPT = 4 };

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define CONSUMER_RETRY_MS 3000
#define CHANNEL_RETRY_MS 500  /* re-consume after the broker closed or cancelled one consumer */
#define TAKEOVER_RETRY_MS 500 /* re-try an exclusive consume within takeover_grace */
#define RPC_TIMEOUT_MS 5000
#define HEARTBEAT_S 10

typedef enum { RQ_PUBLISH, RQ_ACK, RQ_PROBE, RQ_STOP } rq_kind;

/* The two consumers, each on its own channel: index into br_conn.consuming. */
enum { CONS_INBOX, CONS_RECEIPTS, CONS__COUNT };
static const amqp_channel_t cons_channel[CONS__COUNT] = {CH_CONS, CH_RCPT};

typedef struct br_req {
    rq_kind kind;
    gint refs;
    GMutex m;
    GCond cv;
    bool done;
    bool abandoned;
    fe_code result;
    char detail[512];
    /* publish */
    char peer[64];
    char queue[96];
    char msg_id[ENV_ID_LEN + 1];
    char *body;
    size_t len;
    bool may_create;
    bool receipt; /* to lead.<peer>.receipts, type "receipt" */
    bool unread;
    bool returned;
    uint64_t pub_tag;
    /* ack */
    uint64_t epoch;
    uint64_t tag;
    bool multiple;
    /* probe */
    br_probe probe;
} br_req;

struct br_conn {
    br_config cfg;
    br_callbacks cb;
    GThread *thread;
    GAsyncQueue *requests;
    int wakefd;

    GMutex lock; /* guards the fields up to the marker */
    br_status st;
    bool first_attempt_done;
    GCond first_cv;
    GHashTable *probes; /* queue name -> br_probe* */

    /* ---- broker thread only ---- */
    amqp_connection_state_t amqp;
    bool connected;
    bool stopping;
    unsigned uri_index;
    int64_t next_attempt_ms;
    int64_t backoff_ms;
    bool consuming[CONS__COUNT]; /* consume-ok seen on that channel, not cancelled since */
    int64_t consumer_retry_ms;   /* when to consume what is not consuming; 0: nothing to do */
    int64_t refused_since_ms;    /* first exclusive-use refusal of the inbox in a row; 0: none */
    uint64_t pub_seq;            /* last delivery tag used on CH_PUB */
    GQueue inflight;             /* br_req*, ascending pub_tag */
    GHashTable *declared;        /* queues known present on this connection */
};

static int64_t now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

const char *br_link_name(br_link l)
{
    switch (l) {
    case BR_CONNECTED:
        return "connected";
    case BR_CONNECTING:
        return "connecting";
    case BR_UNREACHABLE:
        return "unreachable";
    }
    return "unknown";
}

/* ------------------------------------------------------------------ */
/* requests and completions                                            */

static br_req *req_new(rq_kind kind)
{
    br_req *r = g_new0(br_req, 1);
    r->kind = kind;
    r->refs = 2; /* the caller and the broker thread */
    g_mutex_init(&r->m);
    g_cond_init(&r->cv);
    return r;
}

static void req_unref(br_req *r)
{
    if (!g_atomic_int_dec_and_test(&r->refs))
        return;
    g_mutex_clear(&r->m);
    g_cond_clear(&r->cv);
    g_free(r->body);
    g_free(r);
}

/* The caller gave up waiting (FE_TIMEOUT) but the request was carried out
 * (or failed) afterwards: its owner learns the real outcome. */
static void late_answer(br_conn *c, br_req *r)
{
    if (r->kind == RQ_PUBLISH && !r->receipt) { /* a receipt is retried by the outbox */
        log_warn("publish %s to %s: the broker answered '%s' after the writer had given up "
                 "(the write returned ETIMEDOUT); sent now records it",
                 r->msg_id, r->peer, fe_name(r->result));
        if (c->cb.late_confirm)
            c->cb.late_confirm(c->cb.ud, r->peer, r->msg_id, r->result, r->unread);
    } else if (r->kind == RQ_ACK) {
        log_warn("ack of delivery %llu (epoch %llu): %s after the caller had given up",
                 (unsigned long long)r->tag, (unsigned long long)r->epoch,
                 r->result == FE_OK ? "sent to the broker" : "not sent");
        if (c->cb.late_ack)
            c->cb.late_ack(c->cb.ud, r->epoch, r->tag, r->multiple, r->result);
    }
}

/* Broker thread: finish a request and drop the thread's reference. */
static void req_complete(br_conn *c, br_req *r, fe_code result, const char *detail)
{
    bool abandoned;
    g_mutex_lock(&r->m);
    r->result = result;
    if (detail && !r->detail[0])
        g_strlcpy(r->detail, detail, sizeof r->detail);
    r->done = true;
    abandoned = r->abandoned;
    g_cond_signal(&r->cv);
    g_mutex_unlock(&r->m);
    if (abandoned)
        late_answer(c, r);
    req_unref(r);
}

static void submit(br_conn *c, br_req *r)
{
    uint64_t one = 1;
    g_async_queue_push(c->requests, r);
    if (write(c->wakefd, &one, sizeof one) < 0 && errno != EAGAIN)
        log_err("broker: cannot wake the broker thread: %s", strerror(errno));
}

/* Caller side: wait for the answer until the deadline; on timeout the
 * request is left to the broker thread (it frees it, and tells the owner the
 * real outcome through late_confirm or late_ack). *gave_up tells this
 * FE_TIMEOUT from a FE_TIMEOUT answer (a confirm lost with the link). */
static fe_code wait_req(br_req *r, int64_t timeout_ms, bool *gave_up)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    fe_code res;
    g_mutex_lock(&r->m);
    while (!r->done)
        if (!g_cond_wait_until(&r->cv, &r->m, deadline))
            break;
    *gave_up = !r->done;
    if (r->done) {
        res = r->result;
    } else {
        r->abandoned = true;
        res = FE_TIMEOUT;
    }
    g_mutex_unlock(&r->m);
    return res;
}

/* ------------------------------------------------------------------ */
/* status (shared)                                                     */

static void set_link(br_conn *c, br_link link, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = c->st.link != link || strcmp(c->st.reason, reason ? reason : "") != 0;
    c->st.link = link;
    g_strlcpy(c->st.reason, reason ? reason : "", sizeof c->st.reason);
    if (changed)
        c->st.since_ms = env_now_ms();
    g_mutex_unlock(&c->lock);
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
}

static void first_attempt_done(br_conn *c)
{
    g_mutex_lock(&c->lock);
    c->first_attempt_done = true;
    g_cond_broadcast(&c->first_cv);
    g_mutex_unlock(&c->lock);
}

/* Returns whether anything changed.  Leaving BR_CONS_WAITING also ends the
 * first attempt (br_wait_first_attempt waits through a takeover). */
static bool set_consumer(br_conn *c, br_cons cons, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = c->st.consumer != cons || strcmp(c->st.consumer_reason, reason ? reason : "") != 0;
    c->st.consumer = cons;
    g_strlcpy(c->st.consumer_reason, reason ? reason : "", sizeof c->st.consumer_reason);
    g_mutex_unlock(&c->lock);
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
    if (cons != BR_CONS_WAITING && cons != BR_CONS_NONE)
        first_attempt_done(c);
    return changed;
}

static void cache_probe(br_conn *c, const char *queue, const br_probe *p)
{
    g_mutex_lock(&c->lock);
    g_hash_table_replace(c->probes, g_strdup(queue), g_memdup2(p, sizeof *p));
    g_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* AMQP helpers (broker thread)                                        */

static void bytes_to_str(amqp_bytes_t b, char *out, size_t n)
{
    size_t len = b.len < n - 1 ? b.len : n - 1;
    if (len)
        memcpy(out, b.bytes, len);
    out[len] = '\0';
}

static int consumer_index(amqp_channel_t ch)
{
    for (int i = 0; i < CONS__COUNT; i++)
        if (cons_channel[i] == ch)
            return i;
    return -1;
}

/* (Re)open ch.  A fresh channel has no consumer; a fresh consumer channel
 * starts a new epoch, because delivery tags belong to a channel. */
static int open_channel(br_conn *c, amqp_channel_t ch)
{
    int i = consumer_index(ch);
    if (i >= 0)
        c->consuming[i] = false;
    if (ch == CH_CONS) {
        g_mutex_lock(&c->lock);
        c->st.epoch++;
        g_mutex_unlock(&c->lock);
    }
    if (!amqp_channel_open(c->amqp, ch))
        return -1;
    if (ch == CH_PUB && !amqp_confirm_select(c->amqp, ch))
        return -1;
    return 0;
}

/* After a synchronous call failed: classify the failure.  A channel-level
 * error is answered with close-ok and the channel reopened (returns 0, with
 * the broker's code and text); anything else means the connection is gone
 * (returns -1). */
static int rpc_failure(br_conn *c, amqp_channel_t ch, int *code, char *text, size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(c->amqp);
    *code = 0;
    text[0] = '\0';
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = rep.reply.decoded;
        amqp_channel_close_ok_t ok = {0};
        *code = m->reply_code;
        bytes_to_str(m->reply_text, text, n);
        if (amqp_send_method(c->amqp, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK)
            return -1;
        return open_channel(c, ch);
    }
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = rep.reply.decoded;
        amqp_connection_close_ok_t ok = {0};
        *code = m->reply_code;
        bytes_to_str(m->reply_text, text, n);
        amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        return -1;
    }
    if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        g_strlcpy(text, amqp_error_string2(rep.library_error), n);
    else
        g_strlcpy(text, "unexpected reply from the broker", n);
    return -1;
}

static void drop_connection(br_conn *c, const char *why);

/* Passive declare (or a real one with the mailbox arguments) on the probe
 * channel.  Returns -1 when the connection died. */
static int declare_queue(br_conn *c, const char *queue, bool passive, br_probe *p)
{
    amqp_table_entry_t entries[TOPO_MAILBOX_ARGS];
    amqp_table_t args = passive ? amqp_empty_table : topo_mailbox_args(&c->cfg, entries);
    amqp_queue_declare_ok_t *ok;
    int code;

    memset(p, 0, sizeof *p);
    p->at_ms = now_ms();
    ok = amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(queue), passive, 1, 0, 0, args);
    if (ok) {
        p->valid = true;
        p->present = true;
        p->messages = ok->message_count;
        p->consumers = ok->consumer_count;
        cache_probe(c, queue, p);
        g_hash_table_add(c->declared, g_strdup(queue));
        return 0;
    }
    if (rpc_failure(c, CH_PROBE, &code, p->detail, sizeof p->detail) < 0) {
        drop_connection(c, p->detail);
        p->err = FE_NOT_CONNECTED;
        return -1;
    }
    p->valid = true;
    if (code == 404) {
        p->present = false;
        p->err = FE_NO_MAILBOX;
        cache_probe(c, queue, p);
        g_hash_table_remove(c->declared, queue);
    } else {
        p->err = code == 403 ? FE_ACCESS : code == 406 ? FE_MISMATCH : FE_INTERNAL;
        p->valid = false;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* connection set-up                                                   */

static void setup_dead_letters(br_conn *c)
{
    amqp_table_entry_t e[TOPO_DLQ_ARGS];
    amqp_table_t args = topo_dlq_args(e);
    int code;
    char text[256];

    if (!amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLX),
                               amqp_cstring_bytes("fanout"), 0, 1, 0, 0, amqp_empty_table) ||
        !amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLQ), 0, 1, 0, 0, args) ||
        !amqp_queue_bind(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLQ),
                         amqp_cstring_bytes(TOPO_DLX), amqp_cstring_bytes(""), amqp_empty_table)) {
        if (rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
            drop_connection(c, text);
            return;
        }
        log_warn("broker: cannot declare %s/%s (%d %s); poison messages will be dropped, not "
                 "dead-lettered; give this user configure rights on them",
                 TOPO_DLX, TOPO_DLQ, code, text);
    }
}

/* Declare queue with the mailbox arguments and consume it exclusively on
 * ch with manual acks.  Returns 0; or the broker's reply code (channel
 * already reopened) with its text, and *declaring telling which step
 * failed; or -1 when the connection is gone. */
static int consume_queue(br_conn *c, amqp_channel_t ch, const char *queue, char *text, size_t n,
                         bool *declaring)
{
    amqp_table_entry_t entries[TOPO_MAILBOX_ARGS];
    char tag[128];
    int code;

    snprintf(tag, sizeof tag, "fleetfs.%s", queue);
    *declaring = true;
    if (!amqp_queue_declare(c->amqp, ch, amqp_cstring_bytes(queue), 0, 1, 0, 0,
                            topo_mailbox_args(&c->cfg, entries)))
        goto fail;
    *declaring = false;
    if (!amqp_basic_qos(c->amqp, ch, 0, (uint16_t)c->cfg.prefetch, 0) ||
        !amqp_basic_consume(c->amqp, ch, amqp_cstring_bytes(queue), amqp_cstring_bytes(tag), 0, 0,
                            1, amqp_empty_table))
        goto fail;
    return 0;
fail:
    if (rpc_failure(c, ch, &code, text, n) < 0)
        return -1;
    return code ? code : 541;
}

/* Why consuming queue failed, in words a person can act on. */
static br_cons consumer_failure(br_conn *c, const char *queue, int code, bool declaring,
                                const char *text, char *why, size_t n)
{
    if (declaring && code == 406) {
        snprintf(why, n,
                 "configuration mismatch on %s: %s; every fleetfs must use the same "
                 "max_length, message_ttl and queue_type",
                 queue, text);
        return BR_CONS_MISMATCH;
    }
    if (!declaring && code == 403) {
        snprintf(why, n,
                 "another fleetfs is already the consumer of %s (coord_id %s is in use "
                 "elsewhere): %s; stop the other mount or pick another coord_id",
                 queue, c->cfg.coord_id, text);
        return BR_CONS_EXCLUSIVE;
    }
    snprintf(why, n, "cannot %s %s: %d %s", declaring ? "declare" : "consume", queue, code, text);
    return BR_CONS_ERROR;
}

/* An exclusive-use refusal of the inbox within takeover_grace of the first
 * one in a row: most likely the daemon that had this coord_id a moment ago
 * (unmounted, its broker connection not yet closed).  Keep trying. */
static bool takeover_wait(br_conn *c, const char *queue)
{
    char why[256];
    int64_t now = now_ms();
    if (!c->refused_since_ms)
        c->refused_since_ms = now;
    if (now - c->refused_since_ms >= c->cfg.takeover_grace_ms)
        return false;
    snprintf(why, sizeof why,
             "waiting for the previous consumer of %s to go (up to %lld ms, takeover_grace)", queue,
             (long long)c->cfg.takeover_grace_ms);
    if (set_consumer(c, BR_CONS_WAITING, why))
        log_warn("broker: %s is in exclusive use by another connection; %s", queue, why);
    c->consumer_retry_ms = now + TAKEOVER_RETRY_MS;
    return true;
}

static void consumer_refused(br_conn *c, bool inbox, const char *queue, int code, bool declaring,
                             const char *text)
{
    char why[640];
    br_cons st;
    if (inbox && !declaring && code == 403 && takeover_wait(c, queue))
        return;
    st = consumer_failure(c, queue, code, declaring, text, why, sizeof why);
    if (set_consumer(c, st, why))
        log_err("broker: %s", why);
    c->consumer_retry_ms = now_ms() + CONSUMER_RETRY_MS;
}

/* Become the exclusive consumer of the own mailbox, then of the own
 * receipt queue, each on its own channel.  Only a consumer that is not
 * running is (re)started: a basic.consume on a channel whose consumer is
 * still active, with the same tag, is a connection error (530). */
static void setup_consumer(br_conn *c)
{
    char queue[96], text[384];
    bool declaring, started = false;

    for (int i = 0; i < CONS__COUNT; i++) {
        int rc;
        if (c->consuming[i])
            continue;
        topo_consumer_queue(i == CONS_INBOX, c->cfg.coord_id, queue, sizeof queue);
        rc = consume_queue(c, cons_channel[i], queue, text, sizeof text, &declaring);
        if (rc < 0) {
            drop_connection(c, text);
            return;
        }
        if (rc > 0) {
            consumer_refused(c, i == CONS_INBOX, queue, rc, declaring, text);
            /* never hold messages whose receipts we cannot follow: the
             * broker requeues them when their channel closes */
            if (i == CONS_RECEIPTS && c->consuming[CONS_INBOX] &&
                (amqp_channel_close(c->amqp, CH_CONS, AMQP_REPLY_SUCCESS).reply_type !=
                     AMQP_RESPONSE_NORMAL ||
                 open_channel(c, CH_CONS) < 0))
                drop_connection(c, "cannot close the mailbox consumer");
            return;
        }
        c->consuming[i] = true;
        started = true;
    }
    c->consumer_retry_ms = 0;
    c->refused_since_ms = 0;
    set_consumer(c, BR_CONS_OK, "");
    if (started)
        log_info("broker: consuming lead.%s.inbox and lead.%s.receipts (exclusive, prefetch %d)",
                 c->cfg.coord_id, c->cfg.coord_id, c->cfg.prefetch);
}

static int parse_uri(const char *uri, char **buf, struct amqp_connection_info *info)
{
    *buf = g_strdup(uri);
    amqp_default_connection_info(info);
    return amqp_parse_url(*buf, info) == AMQP_STATUS_OK ? 0 : -1;
}

/* Why amqp_socket_open failed, in words an operator can act on.  (rabbitmq-c
 * reports which TLS check failed, not the certificate's own error.) */
static void open_failure(const br_conn *c, const char *shown, const char *host, int port, int rc,
                         char *out, size_t n)
{
    switch (rc) {
    case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
        snprintf(out, n,
                 "%s: TLS: the broker's certificate is not trusted by the CA in %s; set "
                 "-o ca= to the CA file that signed the broker's certificate",
                 shown, c->cfg.ca);
        break;
    case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
        snprintf(out, n,
                 "%s: TLS: the broker's certificate does not name host '%s' (hostname "
                 "verification failed); connect with a DNS name from the certificate's "
                 "subjectAltName (an IP address never matches)",
                 shown, host);
        break;
    case AMQP_STATUS_SSL_CONNECTION_FAILED:
        snprintf(out, n,
                 "%s: TLS handshake failed; is port %d the broker's TLS listener "
                 "(usually 5671)?",
                 shown, port);
        break;
    default:
        snprintf(out, n, "%s: %s", shown, amqp_error_string2(rc));
    }
}

static void try_connect(br_conn *c)
{
    const char *uri;
    char *buf = NULL, *shown;
    struct amqp_connection_info info;
    amqp_socket_t *sock;
    struct timeval tv = {3, 0}, rpc = {RPC_TIMEOUT_MS / 1000, 0};
    amqp_rpc_reply_t rep;
    char reason[512];
    const char *vhost;
    amqp_table_entry_t prop[3], cap[1];
    amqp_table_t props = {3, prop};
    char name[256];
    int rc;

    unsigned n = g_strv_length(c->cfg.uris);
    uri = c->cfg.uris[c->uri_index % n];
    shown = uri_redact(uri);
    g_mutex_lock(&c->lock);
    g_strlcpy(c->st.uri, shown, sizeof c->st.uri);
    c->st.attempts++;
    g_mutex_unlock(&c->lock);

    if (parse_uri(uri, &buf, &info) < 0) {
        snprintf(reason, sizeof reason, "cannot parse broker URI %s", shown);
        goto fail;
    }
    vhost = c->cfg.vhost && *c->cfg.vhost ? c->cfg.vhost : info.vhost;
    g_mutex_lock(&c->lock);
    g_strlcpy(c->st.vhost, vhost, sizeof c->st.vhost);
    c->st.tls = info.ssl;
    g_mutex_unlock(&c->lock);

    c->amqp = amqp_new_connection();
    if (info.ssl && !c->cfg.ca) {
        /* rabbitmq-c has no system CA store: without a CA nothing verifies */
        snprintf(reason, sizeof reason,
                 "%s: amqps:// needs -o ca=FILE, the CA that signed the "
                 "broker's certificate",
                 shown);
        goto fail;
    }
    if (info.ssl) {
        sock = amqp_ssl_socket_new(c->amqp);
        if (sock && amqp_ssl_socket_set_cacert(sock, c->cfg.ca) != AMQP_STATUS_OK) {
            snprintf(reason, sizeof reason,
                     "cannot load CA file %s (-o ca=): not a readable "
                     "PEM certificate file",
                     c->cfg.ca);
            goto fail;
        }
        if (sock) {
            amqp_ssl_socket_set_verify_peer(sock, 1);
            amqp_ssl_socket_set_verify_hostname(sock, 1);
        }
    } else {
        sock = amqp_tcp_socket_new(c->amqp);
    }
    if (!sock) {
        snprintf(reason, sizeof reason, "cannot create a socket");
        goto fail;
    }
    rc = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        open_failure(c, shown, info.host, info.port, rc, reason, sizeof reason);
        goto fail;
    }
    amqp_set_handshake_timeout(c->amqp, &rpc);
    amqp_set_rpc_timeout(c->amqp, &rpc);
    snprintf(name, sizeof name, "fleetfs %s@%s", c->cfg.coord_id, c->cfg.host ? c->cfg.host : "?");
    prop[0].key = amqp_cstring_bytes("connection_name");
    prop[0].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[0].value.value.bytes = amqp_cstring_bytes(name);
    prop[1].key = amqp_cstring_bytes("product");
    prop[1].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[1].value.value.bytes = amqp_cstring_bytes("fleetfs");
    /* without it the broker drops a consumer silently (queue deleted,
     * quorum leader moved) instead of sending basic.cancel */
    cap[0].key = amqp_cstring_bytes("consumer_cancel_notify");
    cap[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    cap[0].value.value.boolean = 1;
    prop[2].key = amqp_cstring_bytes("capabilities");
    prop[2].value.kind = AMQP_FIELD_KIND_TABLE;
    prop[2].value.value.table = (amqp_table_t){1, cap};
    rep = amqp_login_with_properties(c->amqp, vhost, 0, 131072, HEARTBEAT_S, &props,
                                     AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            char t[256];
            bytes_to_str(((amqp_connection_close_t *)rep.reply.decoded)->reply_text, t, sizeof t);
            snprintf(reason, sizeof reason, "%s refused the login: %s", shown, t);
        } else {
            snprintf(reason, sizeof reason,
                     "%s: login failed (%s); check the user, password "
                     "and vhost '%s'",
                     shown,
                     rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                         ? amqp_error_string2(rep.library_error)
                         : "refused",
                     vhost);
        }
        goto fail;
    }
    if (open_channel(c, CH_PUB) < 0 || open_channel(c, CH_CONS) < 0 ||
        open_channel(c, CH_PROBE) < 0 || open_channel(c, CH_RCPT) < 0) {
        snprintf(reason, sizeof reason, "%s: cannot open channels", shown);
        goto fail;
    }
    c->connected = true;
    c->pub_seq = 0;
    c->backoff_ms = BACKOFF_MIN_MS;
    g_hash_table_remove_all(c->declared);
    g_mutex_lock(&c->lock);
    c->st.attempts = 0;
    g_mutex_unlock(&c->lock);
    log_info("broker: connected to %s vhost %s", shown, vhost);
    g_free(shown);
    g_free(buf); /* vhost pointed into it */
    set_link(c, BR_CONNECTED, "");
    setup_dead_letters(c);
    if (c->connected)
        setup_consumer(c);
    /* a takeover in progress ends the first attempt when it is decided */
    if (c->st.consumer != BR_CONS_WAITING)
        first_attempt_done(c);
    return;

fail:
    g_free(buf);
    if (c->amqp) {
        amqp_destroy_connection(c->amqp);
        c->amqp = NULL;
    }
    if (c->st.link != BR_UNREACHABLE || strcmp(c->st.reason, reason) != 0)
        log_warn("broker: unreachable: %s; retrying every %lld ms at most (sends fail with "
                 "ECOMM meanwhile)",
                 reason, (long long)BACKOFF_MAX_MS);
    set_link(c, BR_UNREACHABLE, reason);
    c->uri_index++;
    c->next_attempt_ms = now_ms() + c->backoff_ms;
    c->backoff_ms = MIN(c->backoff_ms * 2, BACKOFF_MAX_MS);
    g_free(shown);
    first_attempt_done(c);
}

/* The connection is gone: fail what waits on it, schedule a reconnect. */
static void drop_connection(br_conn *c, const char *why)
{
    br_req *r;
    if (!c->connected)
        return;
    c->connected = false;
    /* these left for the broker: their state is unknown (SPEC section 5) */
    while ((r = g_queue_pop_head(&c->inflight)))
        req_complete(c, r, FE_TIMEOUT,
                     "the connection was lost after the message left and before the broker "
                     "confirmed it; it may or may not be in the mailbox");
    amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    g_mutex_lock(&c->lock);
    g_hash_table_remove_all(c->probes);
    g_mutex_unlock(&c->lock);
    log_warn("broker: connection lost: %s; reconnecting", why ? why : "unknown reason");
    set_consumer(c, BR_CONS_NONE, "");
    set_link(c, BR_CONNECTING, why);
    c->next_attempt_ms = now_ms() + BACKOFF_MIN_MS;
    c->backoff_ms = BACKOFF_MIN_MS * 2;
}

/* ------------------------------------------------------------------ */
/* requests on the broker thread                                       */

static void do_publish(br_conn *c, br_req *r)
{
    amqp_basic_properties_t props;
    br_probe p;
    int rc;

    if (!g_hash_table_contains(c->declared, r->queue) || !br_probe_cached(c, r->queue, &p) ||
        now_ms() - p.at_ms > 1000 || !p.present) {
        if (declare_queue(c, r->queue, true, &p) < 0) {
            req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
            return;
        }
        if (p.valid && !p.present && r->may_create) {
            if (declare_queue(c, r->queue, false, &p) < 0) {
                req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
                return;
            }
            if (!p.present)
                snprintf(r->detail, sizeof r->detail, "cannot create mailbox %s: %s", r->queue,
                         p.detail);
            else
                log_info("broker: created mailbox %s for a peer that has not started yet",
                         r->queue);
        }
    }
    r->unread = p.present && p.consumers == 0;

    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes(r->msg_id);
    props.type = amqp_cstring_bytes(r->receipt ? "receipt" : "coord");
    rc = amqp_basic_publish(c->amqp, CH_PUB, amqp_empty_bytes, amqp_cstring_bytes(r->queue), 1, 0,
                            &props, (amqp_bytes_t){r->len, r->body});
    if (rc != AMQP_STATUS_OK) {
        req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        drop_connection(c, amqp_error_string2(rc));
        return;
    }
    r->pub_tag = ++c->pub_seq;
    g_queue_push_tail(&c->inflight, r);
}

static void do_ack(br_conn *c, br_req *r)
{
    int rc;
    if (r->epoch != c->st.epoch) {
        req_complete(c, r, FE_NOT_CONNECTED,
                     "the message was delivered on an earlier consumer channel; it will be "
                     "redelivered");
        return;
    }
    rc = amqp_basic_ack(c->amqp, CH_CONS, r->tag, r->multiple);
    if (rc != AMQP_STATUS_OK) {
        req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        drop_connection(c, amqp_error_string2(rc));
        return;
    }
    req_complete(c, r, FE_OK, NULL);
}

static void do_probe(br_conn *c, br_req *r)
{
    if (declare_queue(c, r->queue, true, &r->probe) < 0) {
        req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
        return;
    }
    req_complete(c, r, r->probe.valid ? FE_OK : r->probe.err, r->probe.detail);
}

static void handle_request(br_conn *c, br_req *r)
{
    if (r->kind == RQ_STOP) {
        c->stopping = true;
        req_complete(c, r, FE_OK, NULL);
        return;
    }
    if (!c->connected) {
        char why[600];
        g_mutex_lock(&c->lock);
        snprintf(why, sizeof why, "broker %s: %s", br_link_name(c->st.link), c->st.reason);
        g_mutex_unlock(&c->lock);
        req_complete(c, r, FE_NOT_CONNECTED, why);
        return;
    }
    switch (r->kind) {
    case RQ_PUBLISH:
        do_publish(c, r);
        break;
    case RQ_ACK:
        do_ack(c, r);
        break;
    case RQ_PROBE:
        do_probe(c, r);
        break;
    case RQ_STOP:
        break;
    }
}

static void drain_requests(br_conn *c)
{
    uint64_t v;
    br_req *r;
    if (read(c->wakefd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_err("broker: wake-up fd: %s", strerror(errno));
    while ((r = g_async_queue_try_pop(c->requests)))
        handle_request(c, r);
}

/* ------------------------------------------------------------------ */
/* frames from the broker                                              */

static void confirm(br_conn *c, uint64_t tag, bool multiple, bool nack)
{
    br_req *r;
    while ((r = g_queue_peek_head(&c->inflight)) && r->pub_tag <= tag) {
        if (!multiple && r->pub_tag != tag)
            break;
        g_queue_pop_head(&c->inflight);
        if (nack)
            req_complete(c, r, FE_FULL,
                         "the broker refused the message (nack): the peer's mailbox is full");
        else if (r->returned)
            req_complete(c, r, FE_NO_MAILBOX, NULL);
        else
            req_complete(c, r, FE_OK, NULL);
        if (!multiple)
            return;
    }
    if (!multiple) {
        /* not at the head: look it up (acks normally arrive in order) */
        for (GList *l = c->inflight.head; l; l = l->next) {
            r = l->data;
            if (r->pub_tag == tag) {
                g_queue_delete_link(&c->inflight, l);
                req_complete(c, r, nack ? FE_FULL : r->returned ? FE_NO_MAILBOX : FE_OK, NULL);
                return;
            }
        }
    }
}

static void on_return(br_conn *c, amqp_basic_return_t *ret)
{
    amqp_message_t msg;
    amqp_rpc_reply_t rep = amqp_read_message(c->amqp, CH_PUB, &msg, 0);
    char id[ENV_ID_LEN + 8], text[128];
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        drop_connection(c, "cannot read a returned message");
        return;
    }
    bytes_to_str(ret->reply_text, text, sizeof text);
    id[0] = '\0';
    if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        bytes_to_str(msg.properties.message_id, id, sizeof id);
    for (GList *l = c->inflight.head; l; l = l->next) {
        br_req *r = l->data;
        if (!r->returned && strcmp(r->msg_id, id) == 0) {
            r->returned = true;
            /* gone (deleted?): the next publish checks again, and may create it */
            g_hash_table_remove(c->declared, r->queue);
            snprintf(r->detail, sizeof r->detail,
                     "the broker returned the message (%d %s): mailbox %s does not exist",
                     ret->reply_code, text, r->queue);
            break;
        }
    }
    amqp_destroy_message(&msg);
}

static void on_deliver(br_conn *c, amqp_channel_t ch, amqp_basic_deliver_t *d)
{
    amqp_message_t msg;
    amqp_rpc_reply_t rep;
    br_action act = BR_KEEP;
    uint64_t tag = d->delivery_tag;
    bool redelivered = d->redelivered;
    int rc = AMQP_STATUS_OK;

    rep = amqp_read_message(c->amqp, ch, &msg, 0);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        drop_connection(c, "cannot read a delivered message");
        return;
    }
    if (ch == CH_RCPT)
        act = c->cb.receipt ? c->cb.receipt(c->cb.ud, msg.body.bytes, msg.body.len) : BR_ACK;
    else if (c->cb.deliver)
        act = c->cb.deliver(c->cb.ud, c->st.epoch, tag, redelivered, msg.body.bytes, msg.body.len);
    amqp_destroy_message(&msg);
    if (act == BR_ACK)
        rc = amqp_basic_ack(c->amqp, ch, tag, 0);
    else if (act == BR_REJECT)
        rc = amqp_basic_reject(c->amqp, ch, tag, 0);
    if (rc != AMQP_STATUS_OK)
        drop_connection(c, amqp_error_string2(rc));
}

static void on_async_channel_close(br_conn *c, amqp_channel_t ch, amqp_channel_close_t *m)
{
    amqp_channel_close_ok_t ok = {0};
    char text[256];
    br_req *r;
    bytes_to_str(m->reply_text, text, sizeof text);
    log_warn("broker: channel %u closed by the broker: %d %s", ch, m->reply_code, text);
    if (amqp_send_method(c->amqp, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK ||
        open_channel(c, ch) < 0) {
        drop_connection(c, text);
        return;
    }
    if (ch == CH_PUB) {
        char why[400];
        snprintf(why, sizeof why,
                 "the broker closed the publish channel (%d %s) before it confirmed; the "
                 "message may or may not be in the mailbox",
                 m->reply_code, text);
        c->pub_seq = 0;
        while ((r = g_queue_pop_head(&c->inflight)))
            req_complete(c, r, FE_TIMEOUT, why);
    } else if (consumer_index(ch) >= 0) {
        /* only this consumer: the other channels and the connection stay */
        set_consumer(c, BR_CONS_ERROR, text);
        c->consumer_retry_ms = now_ms() + CHANNEL_RETRY_MS;
    }
}

/* The broker ended one consumer (its queue was deleted, or a quorum queue
 * lost its leader): the channel stays open, its unacked deliveries stay
 * valid; consume again on the same channel, leaving the other alone. */
static void on_cancel(br_conn *c, amqp_channel_t ch, amqp_basic_cancel_t *m)
{
    int i = consumer_index(ch);
    char tag[128], why[256];
    if (i < 0)
        return;
    bytes_to_str(m->consumer_tag, tag, sizeof tag);
    if (!m->nowait) {
        amqp_basic_cancel_ok_t ok = {m->consumer_tag};
        if (amqp_send_method(c->amqp, ch, AMQP_BASIC_CANCEL_OK_METHOD, &ok) != AMQP_STATUS_OK) {
            drop_connection(c, "cannot answer a basic.cancel");
            return;
        }
    }
    c->consuming[i] = false;
    snprintf(why, sizeof why, "the broker cancelled consumer %s (queue deleted?); consuming again",
             tag);
    log_warn("broker: %s", why);
    set_consumer(c, BR_CONS_ERROR, why);
    c->consumer_retry_ms = now_ms() + CHANNEL_RETRY_MS;
}

static void handle_frame(br_conn *c, amqp_frame_t *f)
{
    if (f->frame_type != AMQP_FRAME_METHOD)
        return; /* stray content frames cannot happen: amqp_read_message takes them */
    switch (f->payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *a = f->payload.method.decoded;
        confirm(c, a->delivery_tag, a->multiple, false);
        break;
    }
    case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *a = f->payload.method.decoded;
        confirm(c, a->delivery_tag, a->multiple, true);
        break;
    }
    case AMQP_BASIC_RETURN_METHOD:
        on_return(c, f->payload.method.decoded);
        break;
    case AMQP_BASIC_DELIVER_METHOD:
        on_deliver(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_BASIC_CANCEL_METHOD:
        on_cancel(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_CHANNEL_CLOSE_METHOD:
        on_async_channel_close(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_connection_close_t *m = f->payload.method.decoded;
        amqp_connection_close_ok_t ok = {0};
        char text[256];
        bytes_to_str(m->reply_text, text, sizeof text);
        amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        drop_connection(c, text);
        break;
    }
    default:
        break;
    }
}

static void read_frames(br_conn *c)
{
    struct timeval zero = {0, 0};
    amqp_frame_t f;
    int rc;
    while (c->connected) {
        rc = amqp_simple_wait_frame_noblock(c->amqp, &f, &zero);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK) {
            drop_connection(c, amqp_error_string2(rc));
            return;
        }
        handle_frame(c, &f);
    }
    if (c->connected)
        amqp_maybe_release_buffers(c->amqp);
}

/* ------------------------------------------------------------------ */
/* the thread                                                          */

static void close_connection(br_conn *c)
{
    br_req *r;
    if (!c->connected)
        return;
    while ((r = g_queue_pop_head(&c->inflight)))
        req_complete(c, r, FE_TIMEOUT,
                     "fleetfs is shutting down before the broker confirmed; the message may or "
                     "may not be in the mailbox");
    /* a goodbye, not a conversation: a slow broker must not hold up exit */
    amqp_set_rpc_timeout(c->amqp, &(struct timeval){1, 0});
    amqp_channel_close(c->amqp, CH_CONS, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c->amqp, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    c->connected = false;
}

static gpointer broker_main(gpointer data)
{
    br_conn *c = data;
    br_req *r;

    while (!c->stopping) {
        struct pollfd pfd[2];
        int n = 1, timeout = 200;
        int64_t now = now_ms();

        if (!c->connected && now >= c->next_attempt_ms) {
            if (c->st.link != BR_UNREACHABLE)
                set_link(c, BR_CONNECTING, c->st.reason);
            try_connect(c);
        }
        if (c->connected && c->consumer_retry_ms && now >= c->consumer_retry_ms)
            setup_consumer(c);
        if (c->connected && (amqp_frames_enqueued(c->amqp) || amqp_data_in_buffer(c->amqp)))
            timeout = 0;
        if (!c->connected)
            timeout = (int)CLAMP(c->next_attempt_ms - now, 0, 200);

        pfd[0] = (struct pollfd){.fd = c->wakefd, .events = POLLIN};
        if (c->connected) {
            pfd[1] = (struct pollfd){.fd = amqp_get_sockfd(c->amqp), .events = POLLIN};
            n = 2;
        }
        if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
            log_err("broker: poll: %s", strerror(errno));
            g_usleep(100000);
        }
        drain_requests(c);
        if (c->connected)
            read_frames(c); /* also sends heartbeats and notices missed ones */
    }
    close_connection(c);
    while ((r = g_async_queue_try_pop(c->requests)))
        req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
    return NULL;
}

br_conn *br_new(const br_config *cfg, const br_callbacks *cb)
{
    br_conn *c = g_new0(br_conn, 1);
    c->cfg = *cfg;
    c->cfg.uris = g_strdupv(cfg->uris);
    c->cfg.vhost = g_strdup(cfg->vhost);
    c->cfg.coord_id = g_strdup(cfg->coord_id);
    c->cfg.queue_type = g_strdup(cfg->queue_type);
    c->cfg.ca = g_strdup(cfg->ca);
    c->cfg.host = g_strdup(cfg->host);
    c->cb = *cb;
    c->requests = g_async_queue_new();
    c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_mutex_init(&c->lock);
    g_cond_init(&c->first_cv);
    c->probes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->declared = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_queue_init(&c->inflight);
    c->st.link = BR_CONNECTING;
    c->st.since_ms = env_now_ms();
    c->backoff_ms = BACKOFF_MIN_MS;
    return c;
}

void br_run(br_conn *c)
{
    c->thread = g_thread_new("broker", broker_main, c);
}

br_conn *br_start(const br_config *cfg, const br_callbacks *cb)
{
    br_conn *c = br_new(cfg, cb);
    br_run(c);
    return c;
}

void br_stop(br_conn *c)
{
    br_req *r;
    if (!c || !c->thread)
        return;
    r = req_new(RQ_STOP);
    submit(c, r);
    g_thread_join(c->thread);
    c->thread = NULL;
    req_unref(r);
}

void br_free(br_conn *c)
{
    if (!c)
        return;
    br_stop(c);
    g_async_queue_unref(c->requests);
    close(c->wakefd);
    g_hash_table_destroy(c->probes);
    g_hash_table_destroy(c->declared);
    g_mutex_clear(&c->lock);
    g_cond_clear(&c->first_cv);
    g_strfreev(c->cfg.uris);
    g_free((char *)c->cfg.vhost);
    g_free((char *)c->cfg.coord_id);
    g_free((char *)c->cfg.queue_type);
    g_free((char *)c->cfg.ca);
    g_free((char *)c->cfg.host);
    g_free(c);
}

void br_get_status(br_conn *c, br_status *st)
{
    g_mutex_lock(&c->lock);
    *st = c->st;
    g_mutex_unlock(&c->lock);
}

bool br_wait_first_attempt(br_conn *c, int64_t timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    bool done;
    g_mutex_lock(&c->lock);
    while (!c->first_attempt_done)
        if (!g_cond_wait_until(&c->first_cv, &c->lock, deadline))
            break;
    done = c->first_attempt_done;
    g_mutex_unlock(&c->lock);
    return done;
}

static bool link_up(br_conn *c, char *detail, size_t dlen)
{
    bool up;
    g_mutex_lock(&c->lock);
    up = c->st.link == BR_CONNECTED;
    if (!up && detail)
        snprintf(detail, dlen, "broker %s%s%s", br_link_name(c->st.link),
                 c->st.reason[0] ? ": " : "", c->st.reason);
    g_mutex_unlock(&c->lock);
    return up;
}

fe_code br_publish(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                   const char *body, size_t len, int64_t timeout_ms, bool *unread, char *detail,
                   size_t dlen)
{
    br_req *r;
    fe_code res;
    bool gave_up;

    if (!link_up(c, detail, dlen))
        return FE_NOT_CONNECTED;
    r = req_new(RQ_PUBLISH);
    g_strlcpy(r->peer, peer, sizeof r->peer);
    br_inbox_queue(peer, r->queue, sizeof r->queue);
    g_strlcpy(r->msg_id, msg_id, sizeof r->msg_id);
    r->body = g_memdup2(body, len);
    r->len = len;
    r->may_create = may_create;
    submit(c, r);
    res = wait_req(r, timeout_ms, &gave_up);
    if (gave_up) {
        if (detail)
            snprintf(detail, dlen,
                     "no confirm from the broker within %lld ms; the message may "
                     "still arrive (sent records it if it does)",
                     (long long)timeout_ms);
        log_warn("publish %s to %s: no confirm within %lld ms; state unknown", msg_id, peer,
                 (long long)timeout_ms);
    } else {
        if (detail)
            g_strlcpy(detail, r->detail, dlen);
        if (unread)
            *unread = r->unread;
        if (res == FE_TIMEOUT)
            log_warn("publish %s to %s: state unknown: %s", msg_id, peer, r->detail);
    }
    req_unref(r);
    return res;
}

fe_code br_publish_receipt(br_conn *c, const char *peer, const char *msg_id, const char *body,
                           size_t len, int64_t timeout_ms, char *detail, size_t dlen)
{
    br_req *r;
    fe_code res;
    bool gave_up;
    if (!link_up(c, detail, dlen))
        return FE_NOT_CONNECTED;
    r = req_new(RQ_PUBLISH);
    g_strlcpy(r->peer, peer, sizeof r->peer);
    topo_receipts_queue(peer, r->queue, sizeof r->queue);
    g_strlcpy(r->msg_id, msg_id, sizeof r->msg_id);
    r->body = g_memdup2(body, len);
    r->len = len;
    r->may_create = true;
    r->receipt = true;
    submit(c, r);
    res = wait_req(r, timeout_ms, &gave_up);
    if (!gave_up && detail)
        g_strlcpy(detail, r->detail, dlen);
    req_unref(r);
    return res;
}

fe_code br_ack(br_conn *c, uint64_t epoch, uint64_t tag, bool multiple, int64_t timeout_ms)
{
    br_req *r;
    fe_code res;
    bool gave_up;
    if (!link_up(c, NULL, 0))
        return FE_NOT_CONNECTED;
    r = req_new(RQ_ACK);
    r->epoch = epoch;
    r->tag = tag;
    r->multiple = multiple;
    submit(c, r);
    res = wait_req(r, timeout_ms, &gave_up);
    if (gave_up)
        log_warn("ack of delivery %llu (epoch %llu): no answer from the broker thread within "
                 "%lld ms; late_ack will tell whether it was sent",
                 (unsigned long long)tag, (unsigned long long)epoch, (long long)timeout_ms);
    req_unref(r);
    return res;
}

bool br_probe_cached(br_conn *c, const char *queue, br_probe *out)
{
    br_probe *p;
    g_mutex_lock(&c->lock);
    p = g_hash_table_lookup(c->probes, queue);
    if (p)
        *out = *p;
    g_mutex_unlock(&c->lock);
    return p != NULL;
}

fe_code br_probe_queue(br_conn *c, const char *queue, int64_t max_age_ms, int64_t timeout_ms,
                       br_probe *out)
{
    br_req *r;
    fe_code res;
    bool gave_up;

    memset(out, 0, sizeof *out);
    if (!link_up(c, out->detail, sizeof out->detail))
        return FE_NOT_CONNECTED;
    if (br_probe_cached(c, queue, out) && now_ms() - out->at_ms <= max_age_ms)
        return FE_OK;
    r = req_new(RQ_PROBE);
    g_strlcpy(r->queue, queue, sizeof r->queue);
    submit(c, r);
    res = wait_req(r, timeout_ms, &gave_up);
    if (gave_up) {
        memset(out, 0, sizeof *out);
        snprintf(out->detail, sizeof out->detail, "probe timed out after %lld ms",
                 (long long)timeout_ms);
    } else {
        *out = r->probe;
    }
    req_unref(r);
    return res;
}
