/* SPDX-License-Identifier: Apache-2.0 */
/* broker/state.c — what every part of the broker thread shares, and calls
 * nothing else of broker/ for: the clocks, the requests (br_req) and their
 * completion, the timers of asynchronous publishes, and the status other
 * threads read (the link, the lead's consumer, blocked, the probe cache).
 * The lowest part of the thread (conn.c describes the whole; conn_int.h
 * who owns what): the files above it use it through broker/state.h.
 */
#include "broker/state.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

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
