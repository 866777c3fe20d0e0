/* SPDX-License-Identifier: Apache-2.0 */
/* broker/conn.c — the broker thread: requests, status and the loop.
 *
 * rabbitmq-c is not thread-safe, so one thread owns the AMQP connection
 * (OpenBSD smtpd's ownership by message passing).  Other threads hand it a
 * br_req through a GAsyncQueue and a wake-up fd (fleetfs/os/os.h) that wakes its poll(), and
 * wait on the request's own condition variable with their own deadline.  A
 * caller that gives up (FE_TIMEOUT) leaves the request to the thread, which
 * still carries it out and reports the real outcome through late_confirm
 * or late_ack.  A send (br_publish_start) is not waited for: the thread
 * keeps its deadline (`timed`, br_timed_tick) and tells its outcome to the
 * caller's callback itself, on the confirm or at the deadline; the
 * watchdog tells a deadline only when this thread is stuck in a send(2).
 * session.c connects, declares and consumes; frames.c reads
 * what the broker sends unasked; publish.c is the caller's side of a
 * publish and of a probe.  See conn_int.h for who owns what.
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
#include <sys/socket.h>
#include <unistd.h>

#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

int64_t br_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

int64_t br_wall_ms(void)
{
    return g_get_real_time() / 1000;
}

void br_heard(br_conn *c)
{
    c->last_recv_ms = br_now_ms();
    atomic_store(&c->progress_ms, c->last_recv_ms);
}

void br_set_sock(br_conn *c, int fd, char *kicked, size_t n)
{
    g_mutex_lock(&c->lock);
    c->sockfd = fd;
    if (kicked && n)
        g_strlcpy(kicked, c->kick_reason, n);
    c->kick_reason[0] = '\0';
    g_mutex_unlock(&c->lock);
}

/* Shut down c's socket (any thread): a send or poll blocked on it fails
 * at once.  Under c->lock, so the broker thread cannot have closed the
 * descriptor (and the number been reused) meanwhile. */
static bool kick(br_conn *c, const char *why)
{
    bool done = false;
    g_mutex_lock(&c->lock);
    if (c->sockfd >= 0 && !c->kick_reason[0]) {
        g_strlcpy(c->kick_reason, why, sizeof c->kick_reason);
        done = shutdown(c->sockfd, SHUT_RDWR) == 0;
    }
    g_mutex_unlock(&c->lock);
    return done;
}

/* c, the consuming connection, was lost: the publishing connection to the
 * same node most likely shares the fault (a silent link, a node gone) and
 * would otherwise hold a send for send_timeout before finding out.  Its
 * socket is shut down, so its own thread drops it and sends fail at once
 * (ECOMM: nothing published) while it reconnects. */
void br_kick_sibling(br_conn *c, const char *why)
{
    char mine[300], theirs[300], reason[400];
    if (c->pub == NULL)
        return;
    g_mutex_lock(&c->lock);
    g_strlcpy(mine, c->st.node, sizeof mine);
    g_mutex_unlock(&c->lock);
    g_mutex_lock(&c->pub->lock);
    g_strlcpy(theirs, c->pub->st.node, sizeof theirs);
    g_mutex_unlock(&c->pub->lock);
    if (!mine[0] || strcmp(mine, theirs) != 0)
        return;
    snprintf(reason, sizeof reason, "the consuming connection to the same node lost it: %s", why);
    kick(c->pub, reason);
}

/* See STUCK_MS. */
static void watch_one(br_conn *c)
{
    int64_t quiet = br_now_ms() - atomic_load(&c->progress_ms);
    char why[320], node[300];
    if (quiet < STUCK_MS)
        return;
    g_mutex_lock(&c->lock);
    g_strlcpy(node, c->st.node, sizeof node);
    g_mutex_unlock(&c->lock);
    snprintf(why, sizeof why,
             "the broker at %s has neither read what fleetfs sent nor answered for %lld s (a "
             "frozen broker or a stuck link); dropped the %sconnection",
             node, (long long)quiet / 1000, c->publisher ? "publishing " : "");
    if (kick(c, why))
        log_warn("broker: %s", why);
}

static gpointer watchdog_main(gpointer data)
{
    br_conn *c = data;
    g_mutex_lock(&c->lock);
    while (!c->wd_stop) {
        gint64 until = g_get_monotonic_time() + WATCHDOG_TICK_MS * 1000;
        if (g_cond_wait_until(&c->state_cv, &c->lock, until) || c->wd_stop)
            continue;
        g_mutex_unlock(&c->lock);
        watch_one(c);
        if (c->pub) {
            watch_one(c->pub);
            /* the backstop of send_timeout: a publishing thread that is
             * turning its loop tells each deadline itself, at once; one
             * that is not (stuck in a send(2) until watch_one's kick) is
             * told for here, a second late at most */
            br_timed_tick(c->pub, WATCHDOG_TICK_MS);
        }
        g_mutex_lock(&c->lock);
    }
    g_mutex_unlock(&c->lock);
    return NULL;
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

br_req *br_req_new(rq_kind kind)
{
    br_req *r = g_new0(br_req, 1);
    r->kind = kind;
    r->refs = 2; /* the caller and the broker thread */
    g_mutex_init(&r->m);
    g_cond_init(&r->cv);
    return r;
}

void br_req_unref(br_req *r)
{
    if (!g_atomic_int_dec_and_test(&r->refs))
        return;
    g_mutex_clear(&r->m);
    g_cond_clear(&r->cv);
    g_free(r->body);
    g_strfreev(r->keys);
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
        log_warn("ack of delivery %llu (box %u, epoch %llu): %s after the caller had given up",
                 (unsigned long long)r->tag, r->box, (unsigned long long)r->epoch,
                 r->result == FE_OK ? "sent to the broker" : "not sent");
        if (r->box == BR_BOX_CONTROL)
            ; /* its owner asks again: the delivery comes back after a reconnect */
        else if (c->cb.late_ack_box)
            c->cb.late_ack_box(c->cb.ud, r->box, r->epoch, r->tag, r->multiple, r->result);
        else if (c->cb.late_ack && r->box == BR_BOX_LEAD)
            c->cb.late_ack(c->cb.ud, r->epoch, r->tag, r->multiple, r->result);
    }
}

/* r leaves the timer list (if it is in it): its ref is dropped. */
static void timed_remove(br_conn *c, br_req *r)
{
    bool was;
    g_mutex_lock(&c->timed_lock);
    was = r->timed_link != NULL;
    if (was)
        g_queue_delete_link(&c->timed, r->timed_link);
    r->timed_link = NULL;
    g_mutex_unlock(&c->timed_lock);
    if (was)
        br_req_unref(r);
}

void br_timed_add(br_conn *c, br_req *r)
{
    GList *l;
    g_atomic_int_inc(&r->refs); /* the list's */
    g_mutex_lock(&c->timed_lock);
    /* by deadline: one mount's sends share one timeout, so this is the tail */
    for (l = c->timed.tail; l && ((br_req *)l->data)->deadline_ms > r->deadline_ms; l = l->prev)
        ;
    if (l) {
        g_queue_insert_after(&c->timed, l, r);
        r->timed_link = l->next;
    } else {
        g_queue_push_head(&c->timed, r);
        r->timed_link = c->timed.head;
    }
    g_mutex_unlock(&c->timed_lock);
}

int64_t br_timed_tick(br_conn *c, int64_t late_ms)
{
    int64_t now = br_now_ms(), next = -1;
    GQueue due = G_QUEUE_INIT;
    br_req *r;
    g_mutex_lock(&c->timed_lock);
    while ((r = g_queue_peek_head(&c->timed)) && r->deadline_ms + late_ms <= now) {
        g_queue_pop_head(&c->timed);
        r->timed_link = NULL;
        g_queue_push_tail(&due, r); /* with the list's ref */
    }
    if ((r = g_queue_peek_head(&c->timed)))
        next = MAX(r->deadline_ms - now, 0);
    g_mutex_unlock(&c->timed_lock);
    while ((r = g_queue_pop_head(&due))) {
        bool tell;
        char detail[300];
        g_mutex_lock(&r->m);
        tell = !r->told;
        if (tell) {
            r->told = true;
            r->abandoned = true; /* its real outcome goes to late_confirm */
        }
        g_mutex_unlock(&r->m);
        if (tell) {
            snprintf(detail, sizeof detail,
                     "no confirm from the broker within %lld ms; the message may still arrive "
                     "(sent records it if it does)",
                     (long long)r->timeout_ms);
            log_warn("publish %s to %s: no confirm within %lld ms; state unknown%s", r->msg_id,
                     r->peer, (long long)r->timeout_ms,
                     late_ms ? " (told by the watchdog: the publishing thread is stuck)" : "");
            r->done_cb(r->done_ud, FE_TIMEOUT, false, detail);
        }
        br_req_unref(r);
    }
    return next;
}

/* Broker thread: finish a request and drop the thread's reference. */
void br_req_complete(br_conn *c, br_req *r, fe_code result, const char *detail)
{
    bool abandoned, tell = false;
    g_mutex_lock(&r->m);
    r->result = result;
    if (detail && !r->detail[0])
        g_strlcpy(r->detail, detail, sizeof r->detail);
    r->done = true;
    if (r->done_cb && !r->told)
        tell = r->told = true;
    abandoned = r->abandoned;
    g_mutex_unlock(&r->m);
    if (r->done_cb) {
        /* answered here, on this thread: no waiting thread to wake */
        timed_remove(c, r);
        if (tell) {
            if (result == FE_TIMEOUT)
                log_warn("publish %s to %s: state unknown: %s", r->msg_id, r->peer, r->detail);
            r->done_cb(r->done_ud, result, r->unread, r->detail);
        }
    } else {
        /* after the unlock: a waiter woken under the lock would wake only
         * to wait for it (two more futex calls and a switch per request);
         * r lives until this thread's reference goes, below */
        g_cond_signal(&r->cv);
    }
    if (abandoned)
        late_answer(c, r);
    br_req_unref(r);
}

void br_req_submit(br_conn *c, br_req *r)
{
    /* its deadline is kept from the hand-over, not from when this thread
     * takes it: a thread stuck in a send(2) takes nothing, and the
     * watchdog tells only the deadlines in this list */
    if (r->done_cb)
        br_timed_add(c, r);
    g_async_queue_push(c->requests, r);
    if (os_wake_fire(&c->wake) < 0 && errno != EAGAIN)
        log_err("broker: cannot wake the broker thread: %s", strerror(errno));
}

/* Caller side: wait for the answer until the deadline; on timeout the
 * request is left to the broker thread (it frees it, and tells the owner the
 * real outcome through late_confirm or late_ack). *gave_up tells this
 * FE_TIMEOUT from a FE_TIMEOUT answer (a confirm lost with the link). */
fe_code br_req_wait(br_req *r, int64_t timeout_ms, bool *gave_up)
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

/* The publishing connection's probes (before each publish) also land in
 * its owner's cache, which status reads. */
void br_uncache_probe(br_conn *c, const char *queue)
{
    g_mutex_lock(&c->lock);
    g_hash_table_remove(c->probes, queue);
    g_mutex_unlock(&c->lock);
    if (c->owner)
        br_uncache_probe(c->owner, queue);
}

void br_cache_probe(br_conn *c, const char *queue, const br_probe *p)
{
    g_mutex_lock(&c->lock);
    g_hash_table_replace(c->probes, g_strdup(queue), g_memdup2(p, sizeof *p));
    g_mutex_unlock(&c->lock);
    if (c->owner)
        br_cache_probe(c->owner, queue, p);
}

void br_set_blocked(br_conn *c, bool blocked, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = c->st.blocked != blocked;
    c->st.blocked = blocked;
    g_strlcpy(c->st.blocked_reason, blocked && reason ? reason : "", sizeof c->st.blocked_reason);
    g_mutex_unlock(&c->lock);
    if (changed && blocked)
        log_warn("broker: blocked: %s: the broker raised a resource alarm and blocks publishing; "
                 "sends fail with ENOBUFS until it clears (consuming and acks go on); free "
                 "memory or disk on the broker",
                 reason && *reason ? reason : "no reason given");
    else if (changed)
        log_info("broker: unblocked: the broker's resource alarm cleared; sends go out again");
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
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
             "operator adds the host: fleetfs-broker host add %s)",
             r->receipt ? "receipt queue" : "mailbox", r->queue, r->peer);
    if (br_probe_cached(c, r->queue, &p) && !p.present) {
        p.create_refused = true;
        br_cache_probe(c, r->queue, &p);
    }
}

void br_publish_go(br_conn *c, br_req *r)
{
    br_probe p = {0};
    bool ask = false;

    if (c->st.blocked) { /* blocked since the request was queued */
        br_req_complete(c, r, FE_BLOCKED, "the broker blocks publishing (resource alarm)");
        return;
    }
    if (r->exchange[0]) {
        /* a routed publish's exchange exists (once per connection):
         * publishing to a missing one would close the publish channel
         * (404) with every publish in flight on it.  Asked without
         * waiting; the publish goes on with the answer (probes.c). */
        char key[BR_QUEUE_MAX + 16];
        snprintf(key, sizeof key, "exchange:%s", r->exchange);
        if (!g_hash_table_contains(c->declared, key)) {
            br_exchange_ask(c, r);
            return;
        }
    }
    /* the owner's cache holds this connection's probes and the status
     * files' fresh ones (on the consuming connection): the newer decides.
     * A receipt needs no `unread`, and is published without asking first
     * (mandatory: a missing queue returns it, FE_NO_MAILBOX, and the
     * outbox tries again): its queue is probed, and made, only after a
     * receipt to it came back on this connection (on_return).  A probe
     * never holds this thread (probes.c): the publish waits for its answer
     * at most PROBE_PUBLISH_WAIT_MS, and one to a mailbox whose probe is
     * out waits behind the publishes already waiting for it, in order. */
    if (r->queue[0])
        ask = br_probe_publish_waiting(c, r->queue) ||
              (r->receipt ? g_hash_table_contains(c->unrouted, r->queue)
                          : (!g_hash_table_contains(c->declared, r->queue) ||
                             !br_probe_cached(c->owner ? c->owner : c, r->queue, &p) ||
                             br_now_ms() - p.at_ms > 1000 || !p.present));
    if (ask) {
        br_probe_ask(c, r, PROBE_PUBLISH_WAIT_MS);
        return;
    }
    br_publish_probed(c, r, &p); /* a receipt's p stays empty: its cache is not read */
}

void br_publish_probed(br_conn *c, br_req *r, const br_probe *probe)
{
    br_probe p = *probe;

    if (c->st.blocked) { /* blocked while it waited for its probe */
        br_req_complete(c, r, FE_BLOCKED, "the broker blocks publishing (resource alarm)");
        return;
    }
    if (p.valid && !p.present && r->may_create && !r->create_asked) {
        /* made on a probe channel without waiting here: the publish goes
         * on with the declare's answer (br_probe_create) */
        r->create_asked = true;
        br_probe_create(c, r, PROBE_PUBLISH_WAIT_MS);
        return;
    }
    if (r->create_asked) {
        r->create_asked = false; /* said once */
        if (!p.present && p.err == FE_ACCESS)
            br_never_added(c, r);
        else if (!p.present)
            snprintf(r->detail, sizeof r->detail, "cannot create mailbox %s: %s", r->queue,
                     p.detail);
        else
            log_info("broker: created mailbox %s for a peer that has not started yet", r->queue);
    }
    if (r->receipt && p.present) /* probed after a return: there (again) */
        g_hash_table_remove(c->unrouted, r->queue);
    r->unread = p.present && p.consumers == 0;
    r->unprobed = !r->receipt && r->queue[0] && !p.valid;
    br_pub_send(c, r); /* now, or after CH_PUB's reopen (pubchan.c) */
}

void br_publish_now(br_conn *c, br_req *r)
{
    amqp_basic_properties_t props;
    amqp_table_entry_t host_hdr;
    char expiration[24];
    int rc;

    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes(r->msg_id);
    props.type = amqp_cstring_bytes(r->receipt ? "receipt" : "coord");
    /* the sender's host: kept by the broker when it dead-letters the
     * message, which fleet.dead routes home by it (broker/death.h) */
    host_hdr.key = amqp_cstring_bytes(BR_HEADER_HOST);
    host_hdr.value.kind = AMQP_FIELD_KIND_UTF8;
    host_hdr.value.value.bytes = amqp_cstring_bytes(c->cfg.coord_id ? c->cfg.coord_id : "");
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers.num_entries = 1;
    props.headers.entries = &host_hdr;
    if (r->ttl_ms > 0) {
        /* the broker drops it itself once it waited this long */
        snprintf(expiration, sizeof expiration, "%lld", (long long)r->ttl_ms);
        props._flags |= AMQP_BASIC_EXPIRATION_FLAG;
        props.expiration = amqp_cstring_bytes(expiration);
    }
    rc = amqp_basic_publish(c->amqp, CH_PUB, amqp_cstring_bytes(r->exchange),
                            amqp_cstring_bytes(r->exchange[0] ? r->key : r->queue), 1, 0, &props,
                            (amqp_bytes_t){r->len, r->body});
    if (rc != AMQP_STATUS_OK) {
        br_req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        br_drop_connection(c, amqp_error_string2(rc));
        return;
    }
    r->pub_tag = ++c->pub_seq;
    c->last_pub_ms = br_now_ms();
    g_queue_push_tail(&c->inflight, r);
}

/* See CANARY_MS: an empty message to the default exchange with an empty
 * routing key reaches no queue and is dropped by the broker.  While
 * LavinMQ refuses publishes for low disk (c->low_disk) the canary's
 * channel is in confirm mode: a refused canary closes it (406 again; it is
 * reopened without confirms, put back in confirm mode here), a taken one
 * is acked, which unblocks (frames.c).  LavinMQ drops the connection for
 * any frame sent on a channel it closed, so nothing follows the canary. */
static void send_canary(br_conn *c)
{
    int rc;
    if (!br_canary_ready(c)) /* reopening, or being put in confirm mode */
        return;
    c->last_pub_ms = br_now_ms();
    rc = amqp_basic_publish(c->amqp, CH_CANARY, amqp_empty_bytes, amqp_empty_bytes, 0, 0, NULL,
                            amqp_empty_bytes);
    if (rc != AMQP_STATUS_OK)
        br_drop_connection(c, amqp_error_string2(rc));
}

static void do_probe(br_conn *c, br_req *r)
{
    br_probe_ask(c, r, PROBE_WAIT_MS);
}

static void handle_request(br_conn *c, br_req *r)
{
    if (r->kind == RQ_STOP) {
        c->stopping = true;
        br_req_complete(c, r, FE_OK, NULL);
        return;
    }
    if (r->kind == RQ_BOX_ADD) { /* the set of boxes lives across connections */
        br_do_box_add(c, r);
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
        br_publish_go(c, r);
        break;
    case RQ_ACK:
        br_do_ack(c, r);
        break;
    case RQ_BOX_REMOVE:
        br_do_box_remove(c, r);
        break;
    case RQ_BOX_ADD: /* handled above */
    case RQ_PROBE:
        do_probe(c, r);
        break;
    case RQ_STOP:
        break;
    }
}

/* woken: poll() saw the wake-up fd readable (reading it otherwise would
 * only find EAGAIN; a request pushed since is popped all the same, and its
 * wake-up read on the next turn) */
static void drain_requests(br_conn *c, bool woken)
{
    br_req *r;
    if (woken && os_wake_drain(&c->wake) < 0 && errno != EAGAIN)
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

        atomic_store(&c->progress_ms, now);
        if (!c->connected && now >= c->next_attempt_ms) {
            if (c->st.link != BR_UNREACHABLE)
                br_set_link(c, BR_CONNECTING, c->st.reason);
            br_connect(c);
        }
        if (c->connected && c->consumer_retry_ms && now >= c->consumer_retry_ms)
            br_setup_consumer(c);
        if (c->connected && c->publisher && (!c->st.blocked || c->low_disk) &&
            now - c->last_pub_ms >= CANARY_MS)
            send_canary(c);
        if (c->connected && br_buffered(c))
            timeout = 0;
        if (!c->connected)
            timeout = (int)CLAMP(c->next_attempt_ms - now, 0, 200);
        /* the next asynchronous publish's deadline (send_timeout) */
        if (c->publisher) {
            int64_t next = br_timed_tick(c, 0);
            if (next >= 0 && next < timeout)
                timeout = (int)next;
        }

        pfd[0] = (struct pollfd){.fd = c->wake.rfd, .events = POLLIN};
        if (c->connected) {
            pfd[1] = (struct pollfd){.fd = amqp_get_sockfd(c->amqp), .events = POLLIN};
            n = 2;
        }
        if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
            log_err("broker: poll: %s", strerror(errno));
            g_usleep(100000);
        }
        if (n == 2 && pfd[1].revents)
            br_heard(c);
        drain_requests(c, pfd[0].revents != 0);
        if (c->connected)
            br_read_frames(c, n == 2 && pfd[1].revents); /* also sends our heartbeats */
        if (c->connected)
            br_probes_tick(c);
        if (c->connected)
            br_pubchan_tick(c);
        if (c->connected)
            br_check_silence(c);
        if (c->publisher)
            br_timed_tick(c, 0);
    }
    br_close_connection(c);
    while ((r = g_async_queue_try_pop(c->requests)))
        br_req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
    g_mutex_lock(&c->lock);
    c->finished = true;
    g_cond_broadcast(&c->state_cv);
    g_mutex_unlock(&c->lock);
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

static br_conn *conn_new(const br_config *cfg, const br_callbacks *cb)
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
    os_wake_open(&c->wake);
    g_mutex_init(&c->lock);
    g_mutex_init(&c->timed_lock);
    g_queue_init(&c->timed);
    g_cond_init(&c->first_cv);
    g_cond_init(&c->state_cv);
    c->sockfd = -1;
    c->probes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->declared = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    c->unrouted = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_queue_init(&c->inflight);
    br_probes_init(c);
    br_pubchan_init(c);
    c->cfg.lead_bind_keys =
        cfg->lead_bind_keys ? (const char *const *)g_strdupv((char **)cfg->lead_bind_keys) : NULL;
    c->st.link = BR_CONNECTING;
    c->st.since_ms = br_wall_ms();
    c->uri_index = first_uri(c->cfg.uris);
    c->backoff_ms = BACKOFF_MIN_MS;
    return c;
}

/* The consuming connection, and inside it the publishing one: it tells the
 * owner's callbacks of late confirms and changes, nothing else. */
br_conn *br_new(const br_config *cfg, const br_callbacks *cb)
{
    br_conn *c = conn_new(cfg, cb);
    br_callbacks pcb = {.changed = cb->changed, .late_confirm = cb->late_confirm, .ud = cb->ud};
    c->pub = conn_new(cfg, &pcb);
    c->pub->publisher = true;
    c->pub->owner = c;
    br_slots_init(c);
    br_slots_init(c->pub);
    c->pub->uri_index = c->uri_index; /* the same node first */
    return c;
}

void br_run(br_conn *c)
{
    atomic_store(&c->progress_ms, br_now_ms());
    c->thread = g_thread_new("broker", broker_main, c);
    if (c->pub) {
        atomic_store(&c->pub->progress_ms, br_now_ms());
        c->pub->thread = g_thread_new("broker-pub", broker_main, c->pub);
    }
    c->watchdog = g_thread_new("broker-watchdog", watchdog_main, c);
}

br_conn *br_start(const br_config *cfg, const br_callbacks *cb)
{
    br_conn *c = br_new(cfg, cb);
    br_run(c);
    return c;
}

/* Wait on cv until *flag (both under c->lock) or the monotonic time until. */
static bool wait_flag(br_conn *c, GCond *cv, const bool *flag, gint64 until)
{
    bool done;
    g_mutex_lock(&c->lock);
    while (!*flag)
        if (!g_cond_wait_until(cv, &c->lock, until))
            break;
    done = *flag;
    g_mutex_unlock(&c->lock);
    return done;
}

/* Stopping is asked of both threads (publishing and consuming) first and
 * waited for together, so a broker that does not answer holds the unmount
 * for STOP_WAIT_MS, a kick and STOP_WAIT_MS again in all, not twice that. */
static void stop_ask(br_conn *c)
{
    if (!c || !c->thread)
        return;
    c->stop_req = br_req_new(RQ_STOP);
    br_req_submit(c, c->stop_req);
}

/* until the deadline: true once c's thread has ended (or there is none) */
static bool stop_done_by(br_conn *c, gint64 until)
{
    if (!c || !c->thread)
        return true;
    return wait_flag(c, &c->state_cv, &c->finished, until);
}

/* After the waits: join the thread, or leave it behind. */
static void stop_finish(br_conn *c)
{
    br_req *r;
    bool done;
    if (!c || !c->thread)
        return;
    g_mutex_lock(&c->lock);
    done = c->finished;
    g_mutex_unlock(&c->lock);
    if (!done) {
        log_err("broker: the %sbroker thread did not end within %d s of the unmount (the "
                "broker does not answer); exiting without it",
                c->publisher ? "publishing " : "", 2 * STOP_WAIT_MS / 1000);
        g_thread_unref(c->thread);
        c->thread = NULL;
        c->left_behind = true;
        return; /* the stop request stays with the thread, and so does c */
    }
    g_thread_join(c->thread);
    c->thread = NULL;
    br_req_unref(c->stop_req);
    c->stop_req = NULL;
    /* from now on a request fails at once instead of waiting in a queue
     * nobody reads (the notifier may still ask for a probe) */
    g_mutex_lock(&c->lock);
    c->st.link = BR_UNREACHABLE;
    snprintf(c->st.reason, sizeof c->st.reason, "fleetfs is shutting down");
    g_mutex_unlock(&c->lock);
    while ((r = g_async_queue_try_pop(c->requests)))
        br_req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
}

/* Ask the threads to stop and wait for them, within a bound (STOP_WAIT_MS,
 * then a kick of each one still running, then STOP_WAIT_MS again). */
static void stop_pair(br_conn *a, br_conn *b)
{
    gint64 until;
    stop_ask(a);
    stop_ask(b);
    until = g_get_monotonic_time() + STOP_WAIT_MS * 1000;
    if (!stop_done_by(a, until))
        kick(a, "fleetfs is shutting down and the broker does not read what it sends");
    if (!stop_done_by(b, until))
        kick(b, "fleetfs is shutting down and the broker does not read what it sends");
    until = g_get_monotonic_time() + STOP_WAIT_MS * 1000;
    stop_done_by(a, until);
    stop_done_by(b, until);
    stop_finish(a);
    stop_finish(b);
}

static void stop_one(br_conn *c)
{
    stop_pair(c, NULL);
}

void br_stop(br_conn *c)
{
    if (!c)
        return;
    if (c->watchdog) {
        g_mutex_lock(&c->lock);
        c->wd_stop = true;
        g_cond_broadcast(&c->state_cv);
        g_mutex_unlock(&c->lock);
        g_thread_join(c->watchdog); /* it waits on nothing but state_cv */
        c->watchdog = NULL;
    }
    stop_pair(c->pub, c);
}

static void free_one(br_conn *c)
{
    br_req *r;
    if (!c || c->left_behind) /* its thread may still use it: leaked on purpose */
        return;
    stop_one(c);
    /* a request that slipped in after br_stop's drain: every thread that
     * could wait for it has ended, so only our reference is left */
    while ((r = g_async_queue_try_pop(c->requests))) {
        if (r->done_cb) /* its caller waits for no reference: it is told */
            br_req_complete(c, r, FE_NOT_CONNECTED, "fleetfs is shutting down");
        else
            br_req_unref(r);
    }
    while ((r = g_queue_pop_head(&c->timed))) /* told already, or never will be */
        br_req_unref(r);
    g_async_queue_unref(c->requests);
    os_wake_close(&c->wake);
    br_probes_free(c);
    g_hash_table_destroy(c->probes);
    g_hash_table_destroy(c->declared);
    g_hash_table_destroy(c->unrouted);
    br_slots_free(c);
    g_strfreev((char **)c->cfg.lead_bind_keys);
    g_mutex_clear(&c->lock);
    g_mutex_clear(&c->timed_lock);
    g_cond_clear(&c->first_cv);
    g_cond_clear(&c->state_cv);
    g_strfreev(c->cfg.uris);
    g_free((char *)c->cfg.vhost);
    g_free((char *)c->cfg.coord_id);
    g_free((char *)c->cfg.queue_type);
    g_free((char *)c->cfg.ca);
    g_free((char *)c->cfg.host);
    g_free((char *)c->cfg.uri_env);
    g_free(c);
}

void br_free(br_conn *c)
{
    if (!c)
        return;
    br_stop(c);
    if (c->pub && c->pub->left_behind)
        c->left_behind = true; /* the publishing thread calls the owner's cache */
    free_one(c->pub);
    free_one(c);
}

/* The consuming connection's status, with the publishing one's block; a
 * publishing connection that is down while the consuming one is up makes
 * the link its own (sends fail meanwhile), with its reason. */
void br_get_status(br_conn *c, br_status *st)
{
    g_mutex_lock(&c->lock);
    *st = c->st;
    g_mutex_unlock(&c->lock);
    if (c->pub) {
        g_mutex_lock(&c->pub->lock);
        st->blocked = c->pub->st.blocked;
        g_strlcpy(st->blocked_reason, c->pub->st.blocked_reason, sizeof st->blocked_reason);
        if (st->link == BR_CONNECTED && c->pub->st.link != BR_CONNECTED) {
            st->link = c->pub->st.link;
            snprintf(st->reason, sizeof st->reason, "publishing connection: %s",
                     c->pub->st.reason[0] ? c->pub->st.reason : "not up yet");
        }
        g_mutex_unlock(&c->pub->lock);
    }
}

/* Both connections: a send right after the mount must find the publishing
 * one up too. */
bool br_wait_first_attempt(br_conn *c, int64_t timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    bool done = wait_flag(c, &c->first_cv, &c->first_attempt_done, deadline);
    if (c->pub)
        done = wait_flag(c->pub, &c->pub->first_cv, &c->pub->first_attempt_done, deadline) && done;
    return done;
}

fe_code br_ack(br_conn *c, uint64_t epoch, uint64_t tag, bool multiple, int64_t timeout_ms)
{
    return br_ack_box(c, BR_BOX_LEAD, epoch, tag, multiple, timeout_ms);
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
