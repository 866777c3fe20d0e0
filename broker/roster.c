/* SPDX-License-Identifier: Apache-2.0 */
/* broker/roster.c — the roster thread (design in roster.h): its
 * connection, its heartbeats out and in, its asks, its stop.  Whom its
 * queue binds, and what other threads say of whom to hear, are
 * rosterbind.c's; the state both share is roster_int.h's.
 *
 * Ownership: the fields of struct ro_conn above the marker are guarded by
 * ro_conn.lock; the rest belong to the roster thread alone.  Other threads
 * reach the thread only through the wake-up fd (kick, stop).
 *
 * Stopping is bounded like the broker threads' (conn_int.h, STOP_WAIT_MS):
 * a thread stuck in a send the broker does not read gets its socket shut
 * down, and one still stuck after that is left behind, never freed, so
 * that the unmount ends.
 *
 * The connect sequence (TCP or TLS with verification, login), the words
 * for a refused call, the retry timing and the wait for the thread's end
 * are the side connections' (broker/sideconn.h, the claims' too): the
 * roster must not wait for, or share, the mailbox connection.
 */
#include "broker/roster.h"
#include "broker/roster_int.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <amqp.h>

#include "broker/sideconn.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

#define RO_BACKOFF_MIN_MS 250
#define RO_BACKOFF_MAX_MS 5000
/* A connection that is lost within RO_STABLE_MS of connecting does not
 * reset the backoff, and a run of such losses for the same reason is
 * "flapping": said once, then quiet until a connection stays up (LavinMQ
 * low on disk refuses every heartbeat with 406 and closes the connection
 * right after each connect: without this, two log lines every 250 ms). */
#define RO_STABLE_MS 10000
#define RO_RPC_TIMEOUT_MS 2000 /* short: a stop may wait on one call */
#define RO_AMQP_HEARTBEAT_S 10
#define RO_KICK_MIN_MS 1000
#define RO_STOP_WAIT_MS 3000

static int64_t now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static void set_link(ro_conn *r, bool up, const char *reason)
{
    bool changed;
    g_mutex_lock(&r->lock);
    changed = r->st.up != up || strcmp(r->st.reason, reason) != 0;
    if (r->st.up != up)
        r->st.since_ms = now_ms();
    r->st.up = up;
    g_strlcpy(r->st.reason, reason, sizeof r->st.reason);
    g_mutex_unlock(&r->lock);
    if (changed && r->cb.changed)
        r->cb.changed(r->cb.ud, up);
}

static bool stopping(ro_conn *r)
{
    bool stop;
    g_mutex_lock(&r->lock);
    stop = r->stop;
    g_mutex_unlock(&r->lock);
    return stop;
}

static void set_sock(ro_conn *r, int fd)
{
    g_mutex_lock(&r->lock);
    r->sockfd = fd;
    g_mutex_unlock(&r->lock);
}

static void drop(ro_conn *r, const char *why)
{
    set_sock(r, -1);
    if (r->amqp)
        amqp_destroy_connection(r->amqp);
    r->amqp = NULL;
    if (r->connected) {
        bool brief = now_ms() - r->up_since_ms < RO_STABLE_MS;
        if (brief && !r->flapping && strcmp(r->last_loss, why) == 0) {
            r->flapping = true;
            log_warn("presence: the roster connection is lost again and again right after "
                     "connecting (%s); no heartbeat goes out meanwhile and peers will call us "
                     "stale. Retrying every %d s, quietly until it stays up; what to do: see "
                     "the broker's own log for why it closes the connection",
                     why, RO_BACKOFF_MAX_MS / 1000);
        } else if (!r->flapping) {
            log_warn("presence: roster connection lost (%s); peers look stale to us until it "
                     "is back, reconnecting",
                     why);
        }
        if (!brief)
            r->backoff_ms = RO_BACKOFF_MIN_MS;
        g_strlcpy(r->last_loss, why, sizeof r->last_loss);
    }
    r->connected = false;
    set_link(r, false, why);
    sc_retry_later(now_ms(), &r->next_attempt_ms, &r->backoff_ms, RO_BACKOFF_MAX_MS);
}

/* TCP or TLS, login (the side connections' sequence, sideconn.h). */
static int open_login(ro_conn *r, const char *uri, char *why, size_t n)
{
    char name[200];
    sc_params p = {.vhost = r->cfg.vhost,
                   .ca = r->cfg.ca,
                   .uri_env = r->cfg.uri_env,
                   .name = name,
                   .heartbeat_s = RO_AMQP_HEARTBEAT_S,
                   .rpc_timeout_ms = RO_RPC_TIMEOUT_MS,
                   .who = "presence"};
    snprintf(name, sizeof name, "fleetfs %s@%s roster", r->cfg.coord_id, r->cfg.host);
    return sc_open_login(&p, uri, &r->amqp, r->shown, sizeof r->shown, why, n);
}

/* The exchange: declared as fleetfs always has (topic, not durable); a
 * per-host login may not (403), and an operator's `scripts/broker host add`
 * makes it durable (406 against ours): then the one there is used, checked
 * with a passive declare, which needs no permission. */
static int declare_exchange(ro_conn *r, char *why, size_t n)
{
    char first[300];
    int code;

    if (amqp_exchange_declare(r->amqp, RO_CH, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                              amqp_cstring_bytes("topic"), 0, 0, 0, 0, amqp_empty_table))
        return 0;
    sc_rpc_words(r->amqp, "cannot declare exchange " TOPO_ROSTER_EXCHANGE, first, sizeof first);
    code = rob_channel_refused(r);
    if (code != 403 && code != 406) {
        g_strlcpy(why, first, n);
        return -1;
    }
    if (amqp_exchange_declare(r->amqp, RO_CH, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                              amqp_cstring_bytes("topic"), 1, 0, 0, 0, amqp_empty_table))
        return 0;
    sc_rpc_words(r->amqp,
                 "exchange " TOPO_ROSTER_EXCHANGE " is missing and this broker login may not "
                 "create it (an operator makes it: fleetfs-broker host add)",
                 why, n);
    return -1;
}

/* Exchange, our queue (roster.<coord_id>.<random>, so that a per-host
 * login can be allowed exactly its own), its binding, the consumer. */
static int setup(ro_conn *r, char *why, size_t n)
{
    amqp_queue_declare_ok_t *q;
    amqp_table_entry_t e[TOPO_ROSTER_ARGS];
    amqp_table_t args = topo_roster_args(e);
    amqp_bytes_t qname;
    char name[128];

    if (!amqp_channel_open(r->amqp, RO_CH)) {
        sc_rpc_words(r->amqp, "cannot open a channel", why, n);
        return -1;
    }
    if (declare_exchange(r, why, n) < 0)
        return -1;
    if (stopping(r)) {
        snprintf(why, n, "stopping");
        return -1;
    }
    topo_roster_queue(r->cfg.coord_id, name, sizeof name);
    q = amqp_queue_declare(r->amqp, RO_CH, amqp_cstring_bytes(name), 0, 0, 1, 1, args);
    if (!q) {
        sc_rpc_words(r->amqp, "cannot declare the roster queue", why, n);
        return -1;
    }
    qname = amqp_bytes_malloc_dup(q->queue);
    sc_bytes_str(qname, r->qname, sizeof r->qname);
    g_hash_table_remove_all(r->bound);
    if (rob_sync(r, why, n) < 0) {
        amqp_bytes_free(qname);
        return -1;
    }
    if (!amqp_basic_consume(r->amqp, RO_CH, qname, amqp_empty_bytes, 0, 1, 1, amqp_empty_table)) {
        amqp_bytes_free(qname);
        sc_rpc_words(r->amqp, "cannot bind or consume the roster queue", why, n);
        return -1;
    }
    amqp_bytes_free(qname);
    return 0;
}

static void try_connect(ro_conn *r)
{
    unsigned n = g_strv_length(r->cfg.uris);
    char why[512] = "stopping";

    if (n == 0 || stopping(r))
        return;
    if (open_login(r, r->cfg.uris[r->uri_index % n], why, sizeof why) == 0 && !stopping(r) &&
        setup(r, why, sizeof why) == 0) {
        r->connected = true;
        set_sock(r, amqp_get_sockfd(r->amqp));
        r->up_since_ms = now_ms();  /* the backoff is reset once it has stayed up (drop) */
        r->next_beat_ms = now_ms(); /* say hello at once, to our groups too */
        r->gb.force = true;
        r->self_n = 0; /* and back to ourselves */
        if (!r->flapping)
            log_info("presence: roster connected to %s (exchange %s, heartbeat every %lld ms)",
                     r->shown, TOPO_ROSTER_EXCHANGE, (long long)r->cfg.interval_ms);
        set_link(r, true, "");
        return;
    }
    r->uri_index++;
    if (stopping(r)) {
        /* unmounting: nothing failed, and nothing will be retried */
        if (r->amqp)
            amqp_destroy_connection(r->amqp);
        r->amqp = NULL;
        return;
    }
    bool fresh = strcmp(r->st.reason, why) != 0;
    drop(r, why); /* the status says down before the log says why */
    if (fresh)
        log_warn("presence: roster connection failed: %s; retrying (backoff up to %d ms)", why,
                 RO_BACKOFF_MAX_MS);
}

/* Our heartbeat's keys (scoped): our groups, and those left less than
 * three intervals ago, so that their members hear that we left. */
static GPtrArray *heartbeat_keys(ro_conn *r)
{
    GPtrArray *g = g_ptr_array_new_with_free_func(g_free), *keys;
    GHashTableIter it;
    gpointer k, v;
    int64_t now = now_ms();

    for (char **p = r->groups; p && *p; p++)
        g_ptr_array_add(g, g_strdup(*p));
    g_hash_table_iter_init(&it, r->gone);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        if (now >= *(int64_t *)v)
            g_hash_table_iter_remove(&it);
        else if (!r->groups || !g_strv_contains((const char *const *)r->groups, k))
            g_ptr_array_add(g, g_strdup(k));
    }
    g_ptr_array_sort(g, (GCompareFunc)rob_cmp_str);
    g_ptr_array_add(g, NULL);
    keys = topo_roster_keys(r->host, (const char *const *)g->pdata, r->cfg.coord_id);
    g_ptr_array_unref(g);
    return keys;
}

/* A heartbeat request: bound first (sync_bindings ran), so the answer
 * reaches us. */
static void publish_ask(ro_conn *r, const char *lead)
{
    amqp_basic_properties_t p;
    char exp[32], key[128];
    char *body = g_strdup_printf("{\"v\":1,\"type\":\"heartbeat-request\",\"from\":\"%s\"}",
                                 r->cfg.coord_id);
    int rc;

    memset(&p, 0, sizeof p);
    snprintf(exp, sizeof exp, "%lld",
             (long long)(r->last_iv_ms > 0 ? r->last_iv_ms : r->cfg.interval_ms));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_TYPE_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 1;
    p.expiration = amqp_cstring_bytes(exp);
    p.type = amqp_cstring_bytes("heartbeat-request");
    topo_roster_ask_key(lead, key, sizeof key);
    rc = amqp_basic_publish(r->amqp, RO_CH, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                            amqp_cstring_bytes(key), 0, 0, &p, amqp_cstring_bytes(body));
    g_free(body);
    if (rc != AMQP_STATUS_OK) {
        drop(r, amqp_error_string2(rc));
        return;
    }
    g_mutex_lock(&r->lock);
    r->st.asks_out++;
    g_mutex_unlock(&r->lock);
}

/* ro_hear's lists changed: new groups for our key (the ones left stay
 * three intervals), new bindings; then the asks. */
static void apply_wants(ro_conn *r)
{
    bool dirty;
    char **groups = NULL;
    GPtrArray *asks;
    char why[512];

    g_mutex_lock(&r->lock);
    dirty = r->want_dirty;
    r->want_dirty = false;
    if (dirty)
        groups = g_strdupv(r->want_groups);
    asks = r->asks;
    r->asks = g_ptr_array_new_with_free_func(g_free);
    g_mutex_unlock(&r->lock);
    if (dirty) {
        int64_t until = now_ms() + 3 * (r->last_iv_ms > 0 ? r->last_iv_ms : r->cfg.interval_ms);
        for (char **p = r->groups; p && *p; p++)
            if (!groups || !g_strv_contains((const char *const *)groups, *p)) {
                int64_t *u = g_new(int64_t, 1);
                *u = until;
                g_hash_table_replace(r->gone, g_strdup(*p), u);
            }
        for (char **p = groups; p && *p; p++)
            g_hash_table_remove(r->gone, *p);
        /* our groups changed: beats go to them for three intervals */
        if (!g_strv_equal((const char *const *)r->groups, (const char *const *)groups))
            r->gb = (topo_group_beats){r->gb.last, r->gb.last_iv, until, true};
        g_strfreev(r->groups);
        r->groups = groups;
        if (r->connected && rob_sync(r, why, sizeof why) < 0) {
            log_warn("presence: %s; reconnecting the roster", why);
            drop(r, why);
        }
    }
    for (guint i = 0; r->connected && rob_scoped(r) && i < asks->len; i++)
        publish_ask(r, asks->pdata[i]);
    g_ptr_array_unref(asks);
}

static void publish(ro_conn *r, bool leaving)
{
    amqp_basic_properties_t p;
    char exp[32];
    size_t len = 0;
    int64_t iv = r->cfg.interval_ms, giv = 0;
    char *body = r->cb.heartbeat(r->cb.ud, leaving, &len, &iv, &giv);
    bool group;
    int rc;

    if (iv <= 0)
        iv = r->cfg.interval_ms;
    r->last_beat_ms = now_ms();
    r->next_beat_ms = r->last_beat_ms + iv;
    if (!body)
        return;
    memset(&p, 0, sizeof p);
    /* ttl_ms is for interval_ms: a longer interval keeps the ratio */
    snprintf(exp, sizeof exp, "%lld",
             (long long)(r->cfg.interval_ms > 0 ? r->cfg.ttl_ms * iv / r->cfg.interval_ms
                                                : r->cfg.ttl_ms));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_TYPE_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 1; /* non-persistent: presence is soft state */
    p.expiration = amqp_cstring_bytes(exp);
    p.type = amqp_cstring_bytes("heartbeat");
    r->last_iv_ms = iv;
    group = rob_scoped(r) && topo_group_beat(&r->gb, now_ms(), g_get_real_time() / 1000, iv, giv,
                                             topo_group_phase(r->groups ? r->groups[0] : NULL),
                                             leaving || g_hash_table_size(r->gone));
    /* in no group (a group just left aside) a group beat is a plain one:
     * it carries our self word one time in self_every */
    if (group && (!r->self_mode || g_hash_table_size(r->gone) > 0)) {
        GPtrArray *keys = heartbeat_keys(r);
        rc = AMQP_STATUS_OK;
        for (guint i = 0; rc == AMQP_STATUS_OK && i < keys->len; i++)
            rc = amqp_basic_publish(r->amqp, RO_CH, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                                    amqp_cstring_bytes(keys->pdata[i]), 0, 0, &p,
                                    (amqp_bytes_t){.len = len, .bytes = body});
        g_ptr_array_unref(keys);
    } else {
        char skey[TOPO_ROSTER_KEY_MAX + 1];
        bool self = rob_scoped(r) && r->self_mode && r->self_n++ % MAX(r->cfg.self_every, 1) == 0;
        if (self)
            topo_roster_self_key(r->host, r->cfg.coord_id, skey, sizeof skey);
        rc = amqp_basic_publish(r->amqp, RO_CH, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                                amqp_cstring_bytes(self ? skey : r->rkey), 0, 0, &p,
                                (amqp_bytes_t){.len = len, .bytes = body});
    }
    free(body);
    if (rc != AMQP_STATUS_OK) {
        drop(r, amqp_error_string2(rc));
        return;
    }
    g_mutex_lock(&r->lock);
    r->st.published++;
    g_mutex_unlock(&r->lock);
}

/* A non-delivery frame: only a close matters. */
static void other_frame(ro_conn *r)
{
    struct timeval zero = {0, 0};
    amqp_frame_t f;
    int rc = amqp_simple_wait_frame_noblock(r->amqp, &f, &zero);
    char text[256] = "closed by the broker";

    if (rc == AMQP_STATUS_TIMEOUT)
        return;
    if (rc != AMQP_STATUS_OK) {
        drop(r, amqp_error_string2(rc));
        return;
    }
    if (f.frame_type != AMQP_FRAME_METHOD)
        return;
    if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_ok_t ok = {0};
        sc_bytes_str(((amqp_connection_close_t *)f.payload.method.decoded)->reply_text, text,
                     sizeof text);
        amqp_send_method(r->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        drop(r, text);
    } else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
               f.payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
        /* our queue or channel is gone: start over on a new connection */
        if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD)
            sc_bytes_str(((amqp_channel_close_t *)f.payload.method.decoded)->reply_text, text,
                         sizeof text);
        drop(r, text);
    }
}

static void read_all(ro_conn *r)
{
    struct timeval zero = {0, 0};
    while (r->connected) {
        amqp_envelope_t env;
        amqp_rpc_reply_t rep;
        amqp_maybe_release_buffers(r->amqp);
        rep = amqp_consume_message(r->amqp, &env, &zero, 0);
        if (rep.reply_type == AMQP_RESPONSE_NORMAL) {
            char rk[256];
            bool ask;
            sc_bytes_str(env.routing_key, rk, sizeof rk);
            ask = g_str_has_prefix(rk, TOPO_ROSTER_ASK_PREFIX);
            g_mutex_lock(&r->lock);
            if (ask)
                r->st.asks_in++;
            else
                r->st.received++;
            g_mutex_unlock(&r->lock);
            if (ask) {
                /* a lead started listening to us: our next heartbeat now,
                 * at most one a second however many ask */
                if (r->next_beat_ms > r->last_beat_ms + RO_KICK_MIN_MS)
                    r->next_beat_ms = MAX(now_ms(), r->last_beat_ms + RO_KICK_MIN_MS);
                r->gb.force = true; /* fresh for our groups too */
            } else {
                r->cb.received(r->cb.ud, rk, env.message.body.bytes, env.message.body.len);
            }
            amqp_destroy_envelope(&env);
            continue;
        }
        if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            rep.library_error == AMQP_STATUS_TIMEOUT)
            return;
        if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            rep.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            other_frame(r);
            continue;
        }
        drop(r, rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                    ? amqp_error_string2(rep.library_error)
                    : "cannot read from the broker");
    }
}

static void goodbye(ro_conn *r, bool leaving)
{
    if (!r->connected)
        return;
    if (leaving)
        publish(r, true);
    if (!r->connected)
        return;
    amqp_set_rpc_timeout(r->amqp, &(struct timeval){1, 0});
    /* channel.close-ok comes after the broker handled what we sent on it:
     * the leaving heartbeat is routed before we hang up */
    amqp_channel_close(r->amqp, RO_CH, AMQP_REPLY_SUCCESS);
    amqp_connection_close(r->amqp, AMQP_REPLY_SUCCESS);
    set_sock(r, -1);
    amqp_destroy_connection(r->amqp);
    r->amqp = NULL;
    r->connected = false;
}

static gpointer roster_main(gpointer data)
{
    ro_conn *r = data;
    bool stop = false, leaving = false;

    while (!stop) {
        struct pollfd pfd[2];
        int nfd = 1;
        int64_t now = now_ms(), until;
        bool kicked;

        if (!r->connected && now >= r->next_attempt_ms)
            try_connect(r);
        g_mutex_lock(&r->lock);
        kicked = r->kicked;
        r->kicked = false;
        g_mutex_unlock(&r->lock);
        if (kicked && r->next_beat_ms > r->last_beat_ms + RO_KICK_MIN_MS)
            r->next_beat_ms = MAX(now, r->last_beat_ms + RO_KICK_MIN_MS);
        if (r->connected && r->flapping && now - r->up_since_ms >= RO_STABLE_MS) {
            r->flapping = false;
            r->backoff_ms = RO_BACKOFF_MIN_MS;
            log_info("presence: the roster connection to %s has stayed up %d s: steady again",
                     r->shown, RO_STABLE_MS / 1000);
        }
        if (r->connected)
            apply_wants(r);
        if (r->connected && now_ms() >= r->next_beat_ms)
            publish(r, false);
        until = r->connected ? r->next_beat_ms : r->next_attempt_ms;
        pfd[0] = (struct pollfd){.fd = r->wake.rfd, .events = POLLIN};
        if (r->connected) {
            pfd[1] = (struct pollfd){.fd = amqp_get_sockfd(r->amqp), .events = POLLIN};
            nfd = 2;
        }
        if (r->connected && (amqp_frames_enqueued(r->amqp) || amqp_data_in_buffer(r->amqp)))
            until = now_ms();
        if (poll(pfd, (nfds_t)nfd, (int)CLAMP(until - now_ms(), 0, 1000)) < 0 && errno != EINTR)
            g_usleep(100000);
        if (pfd[0].revents & POLLIN) {
            if (os_wake_drain(&r->wake) < 0 && errno != EAGAIN)
                log_warn("presence: wake-up read: %s", strerror(errno));
        }
        if (r->connected)
            read_all(r); /* also keeps the AMQP heartbeat going */
        g_mutex_lock(&r->lock);
        stop = r->stop;
        leaving = r->leaving;
        g_mutex_unlock(&r->lock);
    }
    goodbye(r, leaving);
    g_mutex_lock(&r->lock);
    r->finished = true;
    g_cond_broadcast(&r->done_cv);
    g_mutex_unlock(&r->lock);
    return NULL;
}

static void sanitize_host(const char *in, char *out, size_t n)
{
    size_t i;
    for (i = 0; in[i] && i + 1 < n; i++)
        out[i] = g_ascii_isalnum(in[i]) || in[i] == '-' || in[i] == '_' ? in[i] : '_';
    out[i] = '\0';
}

ro_conn *ro_new(const ro_config *cfg, const ro_callbacks *cb)
{
    ro_conn *r = g_new0(ro_conn, 1);
    char host[128];
    r->cfg = *cfg;
    r->cfg.uris = g_strdupv(cfg->uris);
    r->cfg.vhost = g_strdup(cfg->vhost);
    r->cfg.ca = g_strdup(cfg->ca);
    r->cfg.coord_id = g_strdup(cfg->coord_id);
    r->cfg.host = g_strdup(cfg->host ? cfg->host : "unknown");
    r->cfg.uri_env = g_strdup(cfg->uri_env);
    r->cb = *cb;
    sanitize_host(r->cfg.host, host, sizeof host);
    g_strlcpy(r->host, host, sizeof r->host);
    topo_roster_key(host, r->cfg.coord_id, r->rkey, sizeof r->rkey);
    r->bound = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    r->gone = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    r->asks = g_ptr_array_new_with_free_func(g_free);
    r->want_groups = g_new0(char *, 1);
    r->want_leads = g_new0(char *, 1);
    os_wake_open(&r->wake);
    g_mutex_init(&r->lock);
    g_cond_init(&r->done_cv);
    r->sockfd = -1;
    g_strlcpy(r->st.reason, "not connected yet", sizeof r->st.reason);
    r->st.since_ms = now_ms();
    r->backoff_ms = RO_BACKOFF_MIN_MS;
    r->gb.last = -1;
    r->groups = g_new0(char *, 1);
    return r;
}

void ro_run(ro_conn *r)
{
    r->thread = g_thread_new("roster", roster_main, r);
}

void ro_kick(ro_conn *r)
{
    if (!r)
        return;
    g_mutex_lock(&r->lock);
    r->kicked = true;
    g_mutex_unlock(&r->lock);
    rob_wake(r);
}

void ro_stop_begin(ro_conn *r, bool leaving)
{
    if (!r || !r->thread)
        return;
    g_mutex_lock(&r->lock);
    if (!r->stop) {
        r->stop = true;
        r->leaving = leaving;
        r->stop_at = g_get_monotonic_time();
    }
    g_mutex_unlock(&r->lock);
    rob_wake(r);
}

static void kick_locked(void *ud)
{
    ro_conn *r = ud;
    if (r->sockfd >= 0)
        shutdown(r->sockfd, SHUT_RDWR);
}

void ro_stop(ro_conn *r, bool leaving)
{
    if (!r || !r->thread)
        return;
    ro_stop_begin(r, leaving);
    if (!sc_stop_wait(&r->lock, &r->done_cv, &r->finished, r->stop_at, RO_STOP_WAIT_MS, kick_locked,
                      r)) {
        log_err("presence: the roster thread did not end within %d s of the unmount (the "
                "broker does not answer); exiting without it",
                2 * RO_STOP_WAIT_MS / 1000);
        g_thread_unref(r->thread);
        r->thread = NULL;
        r->left_behind = true;
        return;
    }
    g_thread_join(r->thread);
    r->thread = NULL;
}

void ro_free(ro_conn *r)
{
    if (!r)
        return;
    ro_stop(r, false);
    if (r->left_behind) /* its thread may still use it: leaked on purpose */
        return;
    if (r->amqp)
        amqp_destroy_connection(r->amqp);
    os_wake_close(&r->wake);
    g_mutex_clear(&r->lock);
    g_cond_clear(&r->done_cv);
    g_strfreev(r->cfg.uris);
    g_free((char *)r->cfg.vhost);
    g_free((char *)r->cfg.ca);
    g_free((char *)r->cfg.coord_id);
    g_free((char *)r->cfg.host);
    g_free((char *)r->cfg.uri_env);
    g_hash_table_destroy(r->bound);
    g_hash_table_destroy(r->gone);
    g_ptr_array_unref(r->asks);
    g_strfreev(r->want_groups);
    g_strfreev(r->want_leads);
    g_strfreev(r->groups);
    g_free(r);
}

void ro_ask(ro_conn *r, const char *lead)
{
    if (!r || !r->cfg.scoped || !lead || strcmp(lead, r->cfg.coord_id) == 0)
        return;
    g_mutex_lock(&r->lock);
    g_ptr_array_add(r->asks, g_strdup(lead));
    g_mutex_unlock(&r->lock);
    rob_wake(r);
}

void ro_get_status(ro_conn *r, ro_status *st)
{
    g_mutex_lock(&r->lock);
    *st = r->st;
    g_mutex_unlock(&r->lock);
}
