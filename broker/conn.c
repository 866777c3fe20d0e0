/* SPDX-License-Identifier: Apache-2.0 */
/* broker/conn.c — the broker thread: its loop, the requests it serves and
 * the public API (broker/conn.h); the top of the thread's parts (conn_int.h).
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
 * publish and of a probe; state.c the requests and the shared status.
 * See conn_int.h for the parts, their order and who owns what.
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

#include "broker/boxes.h"
#include "broker/boxops.h"
#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/frames.h"
#include "broker/probes.h"
#include "broker/pubchan.h"
#include "broker/session.h"
#include "broker/sideconn.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "broker/watchdog.h"
#include "fleetfs/base/log.h"

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

static void br_publish_probed(br_conn *c, br_req *r, const br_probe *probe);

/* A publish request (again, after its exchange was found: probes.c, through
 * the br_up hook) */
static void br_publish_go(br_conn *c, br_req *r)
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

/* A publish whose probe answered (or did not in time: p->valid false) goes
 * on (probes.c, through the br_up hook). */
static void br_publish_probed(br_conn *c, br_req *r, const br_probe *probe)
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
    c->up = (br_up){.drop = br_session_drop,
                    .answered = br_slots_answered,
                    .publish_go = br_publish_go,
                    .publish_probed = br_publish_probed};
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
    c->watchdog = g_thread_new("broker-watchdog", br_watchdog_main, c);
}

br_conn *br_start(const br_config *cfg, const br_callbacks *cb)
{
    br_conn *c = br_new(cfg, cb);
    br_run(c);
    return c;
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
    return sc_wait_finished(&c->lock, &c->state_cv, &c->finished, until);
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
        br_kick(a, "fleetfs is shutting down and the broker does not read what it sends");
    if (!stop_done_by(b, until))
        br_kick(b, "fleetfs is shutting down and the broker does not read what it sends");
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
    bool done = sc_wait_finished(&c->lock, &c->first_cv, &c->first_attempt_done, deadline);
    if (c->pub)
        done = sc_wait_finished(&c->pub->lock, &c->pub->first_cv, &c->pub->first_attempt_done,
                                deadline) &&
               done;
    return done;
}

fe_code br_ack(br_conn *c, uint64_t epoch, uint64_t tag, bool multiple, int64_t timeout_ms)
{
    return br_ack_box(c, BR_BOX_LEAD, epoch, tag, multiple, timeout_ms);
}
