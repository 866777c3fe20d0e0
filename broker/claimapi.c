/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claimapi.c — the claims thread as other threads reach it (any
 * thread; design in claims.h): made, started, watched (bc_watchdog and its
 * thread), stopped within a bound and freed, and the requests handed to it
 * (take, release, announce, expire) with their waits.  What the thread does
 * with them is claims.c's; claims_int.h says what the two share.
 */
#include "broker/claims_int.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "broker/sideconn.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

bc_conn *bc_new(const bc_config *cfg, const bc_callbacks *cb)
{
    bc_conn *c = g_new0(bc_conn, 1);
    c->cfg = *cfg;
    c->cfg.uris = g_strdupv(cfg->uris);
    c->cfg.vhost = g_strdup(cfg->vhost);
    c->cfg.ca = g_strdup(cfg->ca);
    c->cfg.coord_id = g_strdup(cfg->coord_id);
    c->cfg.host = g_strdup(cfg->host);
    c->cfg.uri_env = g_strdup(cfg->uri_env);
    c->cb = *cb;
    if (os_wake_open(&c->wake) < 0)
        log_warn("claims: no wake-up descriptor (%s): requests wait for the 200 ms poll",
                 strerror(errno));
    g_mutex_init(&c->lock);
    g_cond_init(&c->done_cv);
    g_queue_init(&c->reqs);
    c->sockfd = -1;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->ch_used = g_new0(bool, BC_MAX_HELD);
    return c;
}

/* The watchdog's thread: bc_watchdog every 500 ms until the claims
 * thread is told to stop (bc_watchdog does nothing then, and the leases'
 * tick is for a mount that goes on) or has ended.  Its own thread, so
 * that nothing the rest of the daemon waits on can delay it. */
static gpointer watch_main(gpointer data)
{
    bc_conn *c = data;
    g_mutex_lock(&c->lock);
    while (!c->finished && !c->stop) {
        gint64 until = g_get_monotonic_time() + 500 * G_TIME_SPAN_MILLISECOND;
        g_cond_wait_until(&c->done_cv, &c->lock, until);
        if (c->finished || c->stop)
            break;
        g_mutex_unlock(&c->lock);
        bc_watchdog(c);
        if (c->cb.tick)
            c->cb.tick(c->cb.ud);
        g_mutex_lock(&c->lock);
    }
    g_mutex_unlock(&c->lock);
    return NULL;
}

void bc_run(bc_conn *c)
{
    if (c && !c->thread) {
        c->thread = g_thread_new("claims", bc_thread_main, c);
        c->watch = g_thread_new("claims-watch", watch_main, c);
    }
}

static void wake(bc_conn *c)
{
    if (os_wake_fire(&c->wake) < 0 && errno != EAGAIN)
        log_warn("claims: wake-up write: %s", strerror(errno));
}

/* Shut the socket down (under c->lock): a send blocked on it fails. */
static bool kick_locked(bc_conn *c, const char *why)
{
    if (c->sockfd < 0 || c->kick_why[0])
        return false;
    g_strlcpy(c->kick_why, why, sizeof c->kick_why);
    return shutdown(c->sockfd, SHUT_RDWR) == 0;
}

void bc_watchdog(bc_conn *c)
{
    int64_t idle;
    bool kicked = false;
    char why[300];

    if (!c)
        return;
    g_mutex_lock(&c->lock);
    idle = g_get_monotonic_time() / 1000 - c->progress_ms;
    if (c->up && !c->stop && idle > BC_GRACE_MS) {
        snprintf(why, sizeof why,
                 "the claims thread made no progress for %lld ms: the broker does not take what "
                 "it sends (blocked in a send); given up before the broker can hand the claims "
                 "to another",
                 (long long)idle);
        kicked = kick_locked(c, why);
    }
    g_mutex_unlock(&c->lock);
    if (kicked)
        log_warn("claims: %s; its connection is shut down and reconnects", why);
}

void bc_stop_begin(bc_conn *c)
{
    if (!c || !c->thread)
        return;
    g_mutex_lock(&c->lock);
    if (!c->stop) {
        c->stop = true;
        c->stop_at = g_get_monotonic_time();
    }
    g_cond_broadcast(&c->done_cv); /* the watchdog's thread ends now */
    g_mutex_unlock(&c->lock);
    wake(c);
}

/* sc_stop_wait's kick: the thread is blocked on the broker (said once) */
static void kick_stopping_locked(void *ud)
{
    bc_conn *c = ud;
    if (kick_locked(c, "unmounting"))
        log_warn("claims: the claims thread did not end within %d ms of the unmount "
                 "(blocked on the broker); its connection is shut down",
                 BC_STOP_WAIT_MS);
}

void bc_stop(bc_conn *c)
{
    if (!c || !c->thread)
        return;
    bc_stop_begin(c);
    if (!sc_stop_wait(&c->lock, &c->done_cv, &c->finished, c->stop_at, BC_STOP_WAIT_MS,
                      kick_stopping_locked, c)) {
        log_err("claims: the claims thread did not end within %d s of the unmount (the "
                "broker does not answer); exiting without it",
                2 * BC_STOP_WAIT_MS / 1000);
        g_thread_unref(c->thread);
        c->thread = NULL;
        g_thread_join(c->watch); /* it ends on stop, not with the thread */
        c->watch = NULL;
        c->left_behind = true;
        return;
    }
    g_thread_join(c->thread);
    c->thread = NULL;
    g_thread_join(c->watch);
    c->watch = NULL;
}

bool bc_left_behind(bc_conn *c)
{
    return c && c->left_behind;
}

void bc_free(bc_conn *c)
{
    if (!c)
        return;
    bc_stop(c);
    if (c->left_behind) /* its thread may still use it: leaked on purpose */
        return;
    g_strfreev(c->cfg.uris);
    g_free((char *)c->cfg.vhost);
    g_free((char *)c->cfg.ca);
    g_free((char *)c->cfg.coord_id);
    g_free((char *)c->cfg.host);
    g_free((char *)c->cfg.uri_env);
    g_hash_table_destroy(c->held);
    g_free(c->ch_used);
    g_strfreev(c->probe_names);
    os_wake_close(&c->wake);
    g_mutex_clear(&c->lock);
    g_cond_clear(&c->done_cv);
    g_free(c);
}

bool bc_up(bc_conn *c)
{
    bool up;
    if (!c)
        return false;
    g_mutex_lock(&c->lock);
    up = c->up;
    g_mutex_unlock(&c->lock);
    return up;
}

/* Hand r to the thread and wait for its answer until timeout_ms; r is
 * freed here (or by the thread, when given up). */
static int submit_wait(bc_conn *c, bc_req *r, int timeout_ms, uint64_t *token, char *why, size_t n)
{
    gint64 until = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    int rc;

    g_mutex_lock(&c->lock);
    if (c->stop || !c->up) {
        if (why)
            snprintf(why, n, "no connection to the broker%s%s", c->down_why[0] ? ": " : "",
                     c->down_why);
        g_mutex_unlock(&c->lock);
        g_free(r->body);
        g_free(r);
        return ENOTCONN;
    }
    g_queue_push_tail(&c->reqs, r);
    g_mutex_unlock(&c->lock);
    wake(c);
    g_mutex_lock(&c->lock);
    while (!r->done)
        if (!g_cond_wait_until(&c->done_cv, &c->lock, until))
            break;
    if (!r->done) {
        r->abandoned = true; /* the thread frees it */
        if (why)
            snprintf(why, n, "no answer from the claims thread within %d ms", timeout_ms);
        g_mutex_unlock(&c->lock);
        return ETIMEDOUT;
    }
    rc = r->rc;
    if (token)
        *token = r->token;
    if (why)
        snprintf(why, n, "%s",
                 rc == ENOTCONN && !r->why[0] ? "the connection to the broker was lost" : r->why);
    g_mutex_unlock(&c->lock);
    g_free(r->body);
    g_free(r);
    return rc;
}

int bc_take(bc_conn *c, const char *name, const char *record, uint64_t *token, int timeout_ms,
            char *why, size_t n)
{
    bc_req *r = g_new0(bc_req, 1);
    r->kind = RQ_TAKE;
    g_strlcpy(r->name, name, sizeof r->name);
    r->body = g_strdup(record);
    return submit_wait(c, r, timeout_ms, token, why, n);
}

int bc_release(bc_conn *c, const char *name, int timeout_ms)
{
    bc_req *r = g_new0(bc_req, 1);
    r->kind = RQ_RELEASE;
    g_strlcpy(r->name, name, sizeof r->name);
    return submit_wait(c, r, timeout_ms, NULL, NULL, 0);
}

static bool enqueue(bc_conn *c, rq_kind kind, const char *name, const char *body)
{
    bc_req *r;
    if (!bc_up(c))
        return false;
    r = g_new0(bc_req, 1);
    r->kind = kind;
    g_strlcpy(r->name, name ? name : "", sizeof r->name);
    r->body = g_strdup(body);
    g_mutex_lock(&c->lock);
    g_queue_push_tail(&c->reqs, r);
    g_mutex_unlock(&c->lock);
    wake(c);
    return true;
}

bool bc_announce(bc_conn *c, const char *name, const char *body)
{
    return enqueue(c, RQ_ANNOUNCE, name, body);
}

bool bc_expire(bc_conn *c, const char *name, const char *why)
{
    return enqueue(c, RQ_EXPIRE, name, why);
}
