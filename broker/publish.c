/* SPDX-License-Identifier: Apache-2.0 */
/* broker/publish.c — the caller's side of a publish and of a probe (any
 * thread); conn.c's broker thread carries both out.
 *
 * A publish is refused at once, nothing sent, while the link is down
 * (FE_NOT_CONNECTED) or the broker blocks publishing (FE_BLOCKED); else
 * it is handed to the broker thread (on the publishing connection, when
 * there is one) and waited for until its confirm or the caller's
 * deadline.  A caller that gives up is told the outcome is unknown
 * (FE_TIMEOUT, "the message may still arrive"), never that it failed: the
 * thread still carries the publish out and reports the real outcome
 * through late_confirm (SPEC section 5).  A probe (a passive declare:
 * does the queue exist, how much waits in it) is answered from the cache
 * when it is fresh enough, else asked of the broker thread likewise.
 */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "broker/conn.h"
#include "broker/conn_int.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

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

/* Where publishes go, and whether they may: FE_OK, FE_NOT_CONNECTED or
 * FE_BLOCKED (at once, nothing sent), with detail. */
static fe_code pub_ready(br_conn *c, br_conn **p, char *detail, size_t dlen)
{
    bool blocked;
    *p = c->pub ? c->pub : c;
    if (!link_up(*p, detail, dlen))
        return FE_NOT_CONNECTED;
    g_mutex_lock(&(*p)->lock);
    blocked = (*p)->st.blocked;
    if (blocked && detail)
        snprintf(detail, dlen,
                 "the broker blocks publishing (resource alarm: %s); nothing was sent",
                 (*p)->st.blocked_reason[0] ? (*p)->st.blocked_reason : "no reason given");
    g_mutex_unlock(&(*p)->lock);
    return blocked ? FE_BLOCKED : FE_OK;
}

/* Hand a publish to the broker thread and wait for its confirm: the
 * caller's side of br_publish and br_publish_route (where: the peer, or
 * "EXCHANGE key KEY", for the log). */
static fe_code publish_wait(br_conn *c, br_req *r, const char *where, const char *body, size_t len,
                            int64_t timeout_ms, bool *unread, char *detail, size_t dlen)
{
    fe_code res;
    bool gave_up;

    r->body = g_memdup2(body, len);
    r->len = len;
    br_req_submit(c, r);
    res = br_req_wait(r, timeout_ms, &gave_up);
    if (gave_up) {
        if (detail)
            snprintf(detail, dlen,
                     "no confirm from the broker within %lld ms; the message may "
                     "still arrive (sent records it if it does)",
                     (long long)timeout_ms);
        log_warn("publish %s to %s: no confirm within %lld ms; state unknown", r->msg_id, where,
                 (long long)timeout_ms);
    } else {
        if (detail)
            g_strlcpy(detail, r->detail, dlen);
        if (unread)
            *unread = r->unread;
        if (res == FE_TIMEOUT)
            log_warn("publish %s to %s: state unknown: %s", r->msg_id, where, r->detail);
    }
    br_req_unref(r);
    return res;
}

/* Hand a publish to the broker thread without waiting (br_publish_start):
 * the thread keeps its deadline and tells done. */
static fe_code publish_hand(br_conn *c, br_req *r, const char *body, size_t len, int64_t timeout_ms,
                            br_publish_done done, void *ud)
{
    r->body = g_memdup2(body, len);
    r->len = len;
    r->done_cb = done;
    r->done_ud = ud;
    r->timeout_ms = timeout_ms;
    r->deadline_ms = br_now_ms() + timeout_ms;
    r->refs = 1; /* the broker thread's alone: nobody here waits on it */
    br_req_submit(c, r);
    return FE_OK;
}

/* A publish to peer's mailbox, or NULL and *res (nothing sent). */
static br_req *inbox_req(br_conn **c, const char *peer, bool may_create, const char *msg_id,
                         int64_t ttl_ms, fe_code *res, char *detail, size_t dlen)
{
    br_req *r;
    if ((*res = pub_ready(*c, c, detail, dlen)) != FE_OK)
        return NULL;
    r = br_req_new(RQ_PUBLISH);
    g_strlcpy(r->peer, peer, sizeof r->peer);
    br_inbox_queue(peer, r->queue, sizeof r->queue);
    g_strlcpy(r->msg_id, msg_id, sizeof r->msg_id);
    r->may_create = may_create;
    r->ttl_ms = ttl_ms;
    return r;
}

fe_code br_publish(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                   const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms, bool *unread,
                   char *detail, size_t dlen)
{
    fe_code res;
    br_req *r = inbox_req(&c, peer, may_create, msg_id, ttl_ms, &res, detail, dlen);
    if (!r)
        return res;
    return publish_wait(c, r, peer, body, len, timeout_ms, unread, detail, dlen);
}

fe_code br_publish_start(br_conn *c, const char *peer, bool may_create, const char *msg_id,
                         const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                         br_publish_done done, void *ud, char *detail, size_t dlen)
{
    fe_code res;
    br_req *r = inbox_req(&c, peer, may_create, msg_id, ttl_ms, &res, detail, dlen);
    if (!r)
        return res;
    return publish_hand(c, r, body, len, timeout_ms, done, ud);
}

/* A publish to exchange with key, or NULL and *res (nothing sent). */
static br_req *route_req(br_conn **c, const char *exchange, const char *key,
                         const char *probe_queue, const char *msg_id, int64_t ttl_ms, fe_code *res,
                         char *detail, size_t dlen)
{
    br_req *r;
    if (!exchange || !exchange[0] || strlen(exchange) >= BR_QUEUE_MAX || !key ||
        strlen(key) >= BR_QUEUE_MAX || (probe_queue && strlen(probe_queue) >= BR_QUEUE_MAX)) {
        if (detail)
            snprintf(detail, dlen, "bad exchange, routing key or queue name");
        *res = FE_BAD_INPUT;
        return NULL;
    }
    if ((*res = pub_ready(*c, c, detail, dlen)) != FE_OK)
        return NULL;
    r = br_req_new(RQ_PUBLISH);
    g_strlcpy(r->peer, key, sizeof r->peer);
    g_strlcpy(r->exchange, exchange, sizeof r->exchange);
    g_strlcpy(r->key, key, sizeof r->key);
    g_strlcpy(r->queue, probe_queue ? probe_queue : "", sizeof r->queue);
    g_strlcpy(r->msg_id, msg_id, sizeof r->msg_id);
    r->ttl_ms = ttl_ms;
    return r;
}

fe_code br_publish_route(br_conn *c, const char *exchange, const char *key, const char *probe_queue,
                         const char *msg_id, const char *body, size_t len, int64_t ttl_ms,
                         int64_t timeout_ms, bool *unread, char *detail, size_t dlen)
{
    char where[2 * BR_QUEUE_MAX + 8];
    fe_code res;
    br_req *r;

    if (unread)
        *unread = false;
    r = route_req(&c, exchange, key, probe_queue, msg_id, ttl_ms, &res, detail, dlen);
    if (!r)
        return res;
    snprintf(where, sizeof where, "%s key %s", exchange, key);
    return publish_wait(c, r, where, body, len, timeout_ms, unread, detail, dlen);
}

fe_code br_publish_route_start(br_conn *c, const char *exchange, const char *key,
                               const char *probe_queue, const char *msg_id, const char *body,
                               size_t len, int64_t ttl_ms, int64_t timeout_ms, br_publish_done done,
                               void *ud, char *detail, size_t dlen)
{
    fe_code res;
    br_req *r = route_req(&c, exchange, key, probe_queue, msg_id, ttl_ms, &res, detail, dlen);
    if (!r)
        return res;
    return publish_hand(c, r, body, len, timeout_ms, done, ud);
}

fe_code br_publish_receipt(br_conn *c, const char *peer, const char *msg_id, const char *body,
                           size_t len, int64_t timeout_ms, char *detail, size_t dlen)
{
    br_req *r;
    fe_code res;
    bool gave_up;
    if ((res = pub_ready(c, &c, detail, dlen)) != FE_OK)
        return res;
    r = br_req_new(RQ_PUBLISH);
    g_strlcpy(r->peer, peer, sizeof r->peer);
    topo_receipts_queue(peer, r->queue, sizeof r->queue);
    g_strlcpy(r->msg_id, msg_id, sizeof r->msg_id);
    r->body = g_memdup2(body, len);
    r->len = len;
    r->may_create = true;
    r->receipt = true;
    br_req_submit(c, r);
    res = br_req_wait(r, timeout_ms, &gave_up);
    if (!gave_up && detail)
        g_strlcpy(detail, r->detail, dlen);
    br_req_unref(r);
    return res;
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
    r = br_req_new(RQ_PROBE);
    g_strlcpy(r->queue, queue, sizeof r->queue);
    br_req_submit(c, r);
    res = br_req_wait(r, timeout_ms, &gave_up);
    if (gave_up) {
        memset(out, 0, sizeof *out);
        snprintf(out->detail, sizeof out->detail,
                 "probe timed out after %lld ms: the broker has not answered a passive declare "
                 "of %s (the queue does not answer: stuck, or a quorum queue without a leader; "
                 "or the broker is slow)",
                 (long long)timeout_ms, queue);
    } else {
        *out = r->probe;
    }
    br_req_unref(r);
    return res;
}
