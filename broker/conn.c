/* broker/conn.c — the broker thread: requests, status and the loop.
 *
 * rabbitmq-c is not thread-safe, so one thread owns the AMQP connection
 * (OpenBSD smtpd's ownership by message passing).  Other threads hand it a
 * br_req through a GAsyncQueue and an eventfd that wakes its poll(), and
 * wait on the request's own condition variable with their own deadline.  A
 * caller that gives up (FE_TIMEOUT) leaves the request to the thread, which
 * still carries it out and reports the real outcome through late_confirm
 * or late_ack.  session.c connects, declares and consumes; frames.c reads
 * what the broker sends unasked.  See conn_int.h for who owns what.
 *
 * Confirms: the publish channel is in confirm mode and publishes are
 * pipelined; each publish gets the next delivery tag and waits in
 * `inflight` (ordered by tag) until its basic.ack / basic.nack (frames.c).
 * A publish whose connection or channel is lost before its answer has an
 * unknown outcome: FE_TIMEOUT, never FE_NOT_CONNECTED (SPEC section 5).
 */
#include "broker/conn.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "broker/conn_int.h"
#include "broker/topology.h"
#include "fleetfs/log.h"

int64_t br_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

int64_t br_wall_ms(void)
{
    return g_get_real_time() / 1000;
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
void br_req_complete(br_conn *c, br_req *r, fe_code result, const char *detail)
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

void br_set_link(br_conn *c, br_link link, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = c->st.link != link || strcmp(c->st.reason, reason ? reason : "") != 0;
    c->st.link = link;
    g_strlcpy(c->st.reason, reason ? reason : "", sizeof c->st.reason);
    if (changed)
        c->st.since_ms = br_wall_ms();
    g_mutex_unlock(&c->lock);
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
}

void br_first_attempt_done(br_conn *c)
{
    g_mutex_lock(&c->lock);
    c->first_attempt_done = true;
    g_cond_broadcast(&c->first_cv);
    g_mutex_unlock(&c->lock);
}

/* Returns whether anything changed.  Leaving BR_CONS_WAITING also ends the
 * first attempt (br_wait_first_attempt waits through a takeover). */
bool br_set_consumer(br_conn *c, br_cons cons, const char *reason)
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
        br_first_attempt_done(c);
    return changed;
}

void br_cache_probe(br_conn *c, const char *queue, const br_probe *p)
{
    g_mutex_lock(&c->lock);
    g_hash_table_replace(c->probes, g_strdup(queue), g_memdup2(p, sizeof *p));
    g_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* requests on the broker thread                                       */

/* The login may not create the peer's queue (403 on its declare): with
 * per-host logins only the operator makes a host's queues, so the host
 * was never added.  The send fails ENXIO (the publish is returned), and
 * the peer's status says why until the queue exists. */
static void br_never_added(br_conn *c, br_req *r)
{
    br_probe p;
    snprintf(r->detail, sizeof r->detail,
             "no %s: that host was never added (this broker login may not create %s; an "
             "operator adds the host: scripts/broker host add %s)",
             r->receipt ? "receipt queue" : "mailbox", r->queue, r->peer);
    if (br_probe_cached(c, r->queue, &p) && !p.present) {
        p.create_refused = true;
        br_cache_probe(c, r->queue, &p);
    }
}

static void do_publish(br_conn *c, br_req *r)
{
    amqp_basic_properties_t props;
    br_probe p;
    int rc;

    if (!g_hash_table_contains(c->declared, r->queue) || !br_probe_cached(c, r->queue, &p) ||
        br_now_ms() - p.at_ms > 1000 || !p.present) {
        if (br_declare_queue(c, r->queue, true, &p) < 0) {
            br_req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
            return;
        }
        if (p.valid && !p.present && r->may_create) {
            if (br_declare_queue(c, r->queue, false, &p) < 0) {
                br_req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
                return;
            }
            if (!p.present && p.err == FE_ACCESS)
                br_never_added(c, r);
            else if (!p.present)
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
        br_req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        br_drop_connection(c, amqp_error_string2(rc));
        return;
    }
    r->pub_tag = ++c->pub_seq;
    g_queue_push_tail(&c->inflight, r);
}

static void do_ack(br_conn *c, br_req *r)
{
    int rc;
    if (r->epoch != c->st.epoch) {
        br_req_complete(c, r, FE_NOT_CONNECTED,
                        "the message was delivered on an earlier consumer channel; it will be "
                        "redelivered");
        return;
    }
    rc = amqp_basic_ack(c->amqp, CH_CONS, r->tag, r->multiple);
    if (rc != AMQP_STATUS_OK) {
        br_req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        br_drop_connection(c, amqp_error_string2(rc));
        return;
    }
    br_req_complete(c, r, FE_OK, NULL);
}

static void do_probe(br_conn *c, br_req *r)
{
    if (br_declare_queue(c, r->queue, true, &r->probe) < 0) {
        br_req_complete(c, r, FE_NOT_CONNECTED, "connection lost");
        return;
    }
    br_req_complete(c, r, r->probe.valid ? FE_OK : r->probe.err, r->probe.detail);
}

static void handle_request(br_conn *c, br_req *r)
{
    if (r->kind == RQ_STOP) {
        c->stopping = true;
        br_req_complete(c, r, FE_OK, NULL);
        return;
    }
    if (!c->connected) {
        char why[600];
        g_mutex_lock(&c->lock);
        snprintf(why, sizeof why, "broker %s: %s", br_link_name(c->st.link), c->st.reason);
        g_mutex_unlock(&c->lock);
        br_req_complete(c, r, FE_NOT_CONNECTED, why);
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

static gpointer broker_main(gpointer data)
{
    br_conn *c = data;
    br_req *r;

    while (!c->stopping) {
        struct pollfd pfd[2];
        int n = 1, timeout = 200;
        int64_t now = br_now_ms();

        if (!c->connected && now >= c->next_attempt_ms) {
            if (c->st.link != BR_UNREACHABLE)
                br_set_link(c, BR_CONNECTING, c->st.reason);
            br_connect(c);
        }
        if (c->connected && c->consumer_retry_ms && now >= c->consumer_retry_ms)
            br_setup_consumer(c);
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
        if (n == 2 && pfd[1].revents)
            c->last_recv_ms = br_now_ms();
        drain_requests(c);
        if (c->connected)
            br_read_frames(c); /* also sends our heartbeats */
        if (c->connected)
            br_check_silence(c);
    }
    br_close_connection(c);
    while ((r = g_async_queue_try_pop(c->requests)))
        br_req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
    return NULL;
}

/* Several URIs (cluster nodes): start at a random one, so that a fleet
 * spreads over the nodes; FLEETFS_URI_START=N (0-based) picks one, for
 * tests that need to know. */
static unsigned first_uri(char **uris)
{
    unsigned n = g_strv_length(uris);
    const char *env = getenv("FLEETFS_URI_START");
    if (n < 2)
        return 0;
    if (env && *env)
        return (unsigned)strtoul(env, NULL, 10) % n;
    return (unsigned)g_random_int_range(0, (gint32)n);
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
    c->cfg.uri_env = g_strdup(cfg->uri_env);
    c->cb = *cb;
    c->requests = g_async_queue_new();
    c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_mutex_init(&c->lock);
    g_cond_init(&c->first_cv);
    c->probes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->declared = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_queue_init(&c->inflight);
    c->st.link = BR_CONNECTING;
    c->st.since_ms = br_wall_ms();
    c->uri_index = first_uri(c->cfg.uris);
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
    /* from now on a request fails at once instead of waiting in a queue
     * nobody reads (the notifier may still ask for a probe) */
    g_mutex_lock(&c->lock);
    c->st.link = BR_UNREACHABLE;
    snprintf(c->st.reason, sizeof c->st.reason, "fleetfs is shutting down");
    g_mutex_unlock(&c->lock);
    while ((r = g_async_queue_try_pop(c->requests)))
        br_req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
}

void br_free(br_conn *c)
{
    br_req *r;
    if (!c)
        return;
    br_stop(c);
    /* a request that slipped in after br_stop's drain: every thread that
     * could wait for it has ended, so only our reference is left */
    while ((r = g_async_queue_try_pop(c->requests)))
        req_unref(r);
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
    g_free((char *)c->cfg.uri_env);
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
    if (br_probe_cached(c, queue, out) && br_now_ms() - out->at_ms <= max_age_ms)
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
