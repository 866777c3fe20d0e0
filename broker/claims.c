/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claims.c — the claims thread (design in claims.h, doc/claims.md).
 *
 * Ownership: the fields of struct bc_conn above the marker are guarded by
 * bc_conn.lock; the rest belong to the claims thread alone.  Other threads
 * hand it requests (bc_req) and wait on done_cv with a deadline; a request
 * given up by its waiter (abandoned) is still carried out, and a take that
 * succeeds for nobody is released at once.
 *
 * The connection's login and set-up are claimconn.c's; the thread as other
 * threads reach it (start, watchdog, stop, the requests) is claimapi.c's.
 */
#include "broker/claims_int.h"

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
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

static int64_t now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

/* A sign of life for the watchdog (bc_watchdog). */
static void progress(bc_conn *c)
{
    g_mutex_lock(&c->lock);
    c->progress_ms = now_ms();
    g_mutex_unlock(&c->lock);
}

static void set_up(bc_conn *c, bool up)
{
    g_mutex_lock(&c->lock);
    c->up = up;
    c->sockfd = up ? amqp_get_sockfd(c->amqp) : -1;
    c->progress_ms = now_ms();
    if (up)
        c->kick_why[0] = '\0';
    g_mutex_unlock(&c->lock);
    if (c->cb.changed)
        c->cb.changed(c->cb.ud, up);
}

/* Not connected, for why: said in the status (bc_take's ENOTCONN), and the
 * next attempt timed. */
static void went_down(bc_conn *c, const char *why)
{
    g_strlcpy(c->reason, why, sizeof c->reason);
    g_mutex_lock(&c->lock);
    g_strlcpy(c->down_why, why, sizeof c->down_why);
    g_mutex_unlock(&c->lock);
    sc_retry_later(now_ms(), &c->next_attempt_ms, &c->backoff_ms, BACKOFF_MAX_MS);
}

/* The connection is gone (or given up): every claim on it with it. */
static void drop(bc_conn *c, const char *cause)
{
    GHashTableIter it;
    gpointer k;
    char why[300];

    /* no shutdown of a descriptor number about to be closed (and reused) */
    g_mutex_lock(&c->lock);
    c->sockfd = -1;
    g_strlcpy(why, c->kick_why[0] ? c->kick_why : cause, sizeof why);
    g_mutex_unlock(&c->lock);
    if (c->amqp)
        amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    if (c->connected) {
        log_warn("claims: connection to %s lost (%s); every claim held here is lost with it "
                 "(%u), reconnecting; take them again with mkdir when it is back",
                 c->shown, why, g_hash_table_size(c->held));
        c->connected = false;
        set_up(c, false);
        g_hash_table_iter_init(&it, c->held);
        while (g_hash_table_iter_next(&it, &k, NULL))
            if (c->cb.lost)
                c->cb.lost(c->cb.ud, k, why);
    }
    g_hash_table_remove_all(c->held);
    memset(c->ch_used, 0, BC_MAX_HELD * sizeof *c->ch_used);
    g_strfreev(c->probe_names);
    c->probe_names = NULL;
    went_down(c, why);
}

static bool stopping(bc_conn *c)
{
    bool s;
    g_mutex_lock(&c->lock);
    s = c->stop;
    g_mutex_unlock(&c->lock);
    return s;
}

static void try_connect(bc_conn *c)
{
    unsigned n = g_strv_length(c->cfg.uris);
    char why[512] = "stopping";

    if (n == 0 || stopping(c))
        return;
    if (bc_open_login(c, c->cfg.uris[c->uri_index % n], why, sizeof why) == 0 &&
        bc_setup(c, why, sizeof why) == 0) {
        c->connected = true;
        c->backoff_ms = BACKOFF_MIN_MS;
        c->last_ok_ms = now_ms();
        c->reason[0] = '\0';
        log_info("claims: connected to %s (exchange %s)", c->shown, BC_EXCHANGE);
        set_up(c, true);
        return;
    }
    c->uri_index++;
    if (strcmp(c->reason, why) != 0)
        log_warn("claims: connection failed: %s; mkdir in claims/ fails ENOTCONN until it "
                 "works, retrying",
                 why);
    if (c->amqp)
        amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    went_down(c, why);
}

/* ---- frames that arrive outside a synchronous call ---- */

static void deliver_event(bc_conn *c, amqp_envelope_t *env)
{
    if (c->cb.event)
        c->cb.event(c->cb.ud, env->message.body.bytes, env->message.body.len);
}

/* One frame that is not a delivery: a close of a claim's channel or a
 * cancel of its consumer loses that claim; anything else on the
 * connection's own channels loses the connection. */
static void other_frame(bc_conn *c)
{
    struct timeval zero = {0, 0};
    amqp_frame_t f;
    int rc = amqp_simple_wait_frame_noblock(c->amqp, &f, &zero);
    char text[256] = "closed by the broker";
    GHashTableIter it;
    gpointer k, v;

    if (rc == AMQP_STATUS_TIMEOUT)
        return;
    if (rc != AMQP_STATUS_OK) {
        drop(c, amqp_error_string2(rc));
        return;
    }
    if (f.frame_type != AMQP_FRAME_METHOD)
        return;
    if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_ok_t ok = {0};
        bc_bytes_str(((amqp_connection_close_t *)f.payload.method.decoded)->reply_text, text,
                     sizeof text);
        amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        drop(c, text);
        return;
    }
    if (f.payload.method.id != AMQP_CHANNEL_CLOSE_METHOD &&
        f.payload.method.id != AMQP_BASIC_CANCEL_METHOD)
        return; /* a late confirm: nothing waits for it */
    if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_ok_t ok = {0};
        bc_bytes_str(((amqp_channel_close_t *)f.payload.method.decoded)->reply_text, text,
                     sizeof text);
        amqp_send_method(c->amqp, f.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    } else {
        g_strlcpy(text, "the broker cancelled our consumer (its queue deleted, or its node down)",
                  sizeof text);
    }
    g_hash_table_iter_init(&it, c->held);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        held *h = v;
        char tag[128];
        if (h->ch != (int)f.channel)
            continue;
        if (f.payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
            bc_bytes_str(((amqp_basic_cancel_t *)f.payload.method.decoded)->consumer_tag, tag,
                         sizeof tag);
            if (strcmp(tag, h->tag) != 0)
                break; /* an earlier consumer on this channel number: below */
            amqp_channel_close(c->amqp, f.channel, AMQP_REPLY_SUCCESS);
        }
        c->ch_used[h->ch - CH_FIRST] = false;
        log_warn("claims: claim %s lost: %s", (char *)k, text);
        if (c->cb.lost)
            c->cb.lost(c->cb.ud, k, text);
        g_hash_table_iter_remove(&it);
        return;
    }
    /* a claim's channel and no claim of ours on it: word of a consumer
     * given up already (a probe found its lock gone and let it go while
     * the broker's cancel was on its way, f1140), not of the connection */
    if (f.channel >= CH_FIRST)
        return;
    drop(c, text);
}

static void read_all(bc_conn *c)
{
    struct timeval zero = {0, 0};
    while (c->connected) {
        amqp_envelope_t env;
        amqp_rpc_reply_t rep;
        amqp_maybe_release_buffers(c->amqp);
        rep = amqp_consume_message(c->amqp, &env, &zero, 0);
        if (rep.reply_type == AMQP_RESPONSE_NORMAL) {
            deliver_event(c, &env);
            amqp_destroy_envelope(&env);
            continue;
        }
        if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            rep.library_error == AMQP_STATUS_TIMEOUT)
            return;
        if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            rep.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            other_frame(c);
            continue;
        }
        drop(c, rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                    ? amqp_error_string2(rep.library_error)
                    : "cannot read from the broker");
    }
}

/* ---- publishing with a confirm ---- */

/* Publish body to exchange ex under key; confirmed: wait for the broker's
 * ack of it (an event meanwhile is delivered).  0, or -1 (why). */
static int publish(bc_conn *c, const char *ex, const char *key, const char *body, bool confirmed,
                   char *why, size_t n)
{
    amqp_basic_properties_t p = {0};
    uint64_t tag = c->next_tag;
    int64_t until = now_ms() + RPC_TIMEOUT_MS;

    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
    p.delivery_mode = confirmed ? 2 : 1;
    p.content_type = amqp_cstring_bytes(confirmed ? "text/plain" : "application/json");
    if (amqp_basic_publish(c->amqp, confirmed ? CH_MAIN : CH_EVENTS, amqp_cstring_bytes(ex),
                           amqp_cstring_bytes(key), 0, 0, &p,
                           amqp_cstring_bytes(body)) != AMQP_STATUS_OK) {
        snprintf(why, n, "publish failed");
        return -1;
    }
    if (confirmed) /* CH_MAIN is in confirm mode; CH_EVENTS is not */
        c->next_tag++;
    while (confirmed) {
        struct timeval tv = {0, 100000};
        amqp_frame_t f;
        int rc = amqp_simple_wait_frame_noblock(c->amqp, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT) {
            if (now_ms() >= until) {
                snprintf(why, n, "no confirm from the broker within %d ms", RPC_TIMEOUT_MS);
                return -1;
            }
            continue;
        }
        if (rc != AMQP_STATUS_OK) {
            snprintf(why, n, "%s", amqp_error_string2(rc));
            return -1;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id == AMQP_BASIC_DELIVER_METHOD && f.channel == CH_EVENTS) {
            amqp_envelope_t env = {0};
            amqp_message_t m;
            if (amqp_read_message(c->amqp, CH_EVENTS, &m, 0).reply_type == AMQP_RESPONSE_NORMAL) {
                env.message = m;
                deliver_event(c, &env);
                amqp_destroy_message(&m);
            }
            continue;
        }
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD && f.channel == CH_MAIN) {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            if (a->delivery_tag >= tag || (a->multiple && a->delivery_tag >= tag))
                return 0;
            continue;
        }
        if (f.payload.method.id == AMQP_BASIC_NACK_METHOD && f.channel == CH_MAIN) {
            snprintf(why, n, "the broker refused the token message (nack)");
            return -1;
        }
        if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
            f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
            snprintf(why, n, "the broker closed the channel during a publish");
            return -1;
        }
    }
    return 0;
}

/* ---- take and release ---- */

static int free_channel(bc_conn *c)
{
    for (int i = 0; i < BC_MAX_HELD; i++)
        if (!c->ch_used[i])
            return CH_FIRST + i;
    return -1;
}

/* Declare both durable queues of name (no arguments: classic). */
static int declare_queues(bc_conn *c, const char *name, char *why, size_t n)
{
    char q[200];
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "%s%s", i ? BC_TOKEN_PREFIX : BC_LOCK_PREFIX, name);
        if (!amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(q), 0, 1, 0, 0,
                                amqp_empty_table)) {
            int code;
            bc_rpc_words(c, "cannot declare the claim's queue", why, n);
            code = bc_channel_refused(c, CH_PROBE);
            if (code == 403)
                snprintf(why + strlen(why), n - strlen(why),
                         " (this login may not declare fleet.claim.* or fleet.claimtok.*: an "
                         "operator must run `fleetfs-broker host update %s`)",
                         c->cfg.coord_id);
            if (code && amqp_channel_open(c->amqp, CH_PROBE))
                return EIO;
            return -1;
        }
    }
    return 0;
}

/* The token queue, emptied into our hands (unacked): the largest token in
 * it (0: none), and the last delivery tag to ack (0: none).  0 or -1. */
static int take_tokens(bc_conn *c, const char *name, uint64_t *max, uint64_t *last_tag)
{
    char q[200];
    snprintf(q, sizeof q, "%s%s", BC_TOKEN_PREFIX, name);
    *max = 0;
    *last_tag = 0;
    for (;;) {
        amqp_rpc_reply_t rep = amqp_basic_get(c->amqp, CH_MAIN, amqp_cstring_bytes(q), 0);
        amqp_message_t m;
        char digits[24];
        uint64_t t;
        if (rep.reply_type != AMQP_RESPONSE_NORMAL)
            return -1;
        if (rep.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            return 0;
        *last_tag = ((amqp_basic_get_ok_t *)rep.reply.decoded)->delivery_tag;
        if (amqp_read_message(c->amqp, CH_MAIN, &m, 0).reply_type != AMQP_RESPONSE_NORMAL)
            return -1;
        bc_bytes_str(m.body, digits, sizeof digits);
        t = g_ascii_strtoull(digits, NULL, 10);
        *max = MAX(*max, t);
        amqp_destroy_message(&m);
    }
}

/* Give up a claim's channel (its consumer with it). */
static void let_go(bc_conn *c, const char *name)
{
    held *h = g_hash_table_lookup(c->held, name);
    if (!h)
        return;
    amqp_channel_close(c->amqp, (amqp_channel_t)h->ch, AMQP_REPLY_SUCCESS);
    c->ch_used[h->ch - CH_FIRST] = false;
    g_hash_table_remove(c->held, name);
}

static int do_take(bc_conn *c, bc_req *r)
{
    char q[200], *body;
    uint64_t max, tag;
    int ch, e;
    held *h;
    amqp_basic_consume_ok_t *ok;

    if (g_hash_table_contains(c->held, r->name))
        return EALREADY;
    ch = free_channel(c);
    if (ch < 0) {
        snprintf(r->why, sizeof r->why, "this mount holds %d claims already", BC_MAX_HELD);
        return EMFILE;
    }
    e = declare_queues(c, r->name, r->why, sizeof r->why);
    if (e)
        return e;
    progress(c);
    if (!amqp_channel_open(c->amqp, (amqp_channel_t)ch)) {
        bc_rpc_words(c, "cannot open a channel", r->why, sizeof r->why);
        return -1;
    }
    snprintf(q, sizeof q, "%s%s", BC_LOCK_PREFIX, r->name);
    if (!(ok = amqp_basic_consume(c->amqp, (amqp_channel_t)ch, amqp_cstring_bytes(q),
                                  amqp_empty_bytes, 0, 0, 1, amqp_empty_table))) {
        int code = bc_channel_refused(c, ch);
        if (code == 403 || code == 405)
            return EEXIST;
        bc_rpc_words(c, "cannot consume the claim's lock", r->why, sizeof r->why);
        return code ? EIO : -1;
    }
    progress(c);
    /* ours now, as long as the consumer stands: the token */
    h = g_new0(held, 1);
    h->ch = ch;
    bc_bytes_str(ok->consumer_tag, h->tag, sizeof h->tag);
    c->ch_used[ch - CH_FIRST] = true;
    g_hash_table_insert(c->held, g_strdup(r->name), h);
    if (take_tokens(c, r->name, &max, &tag) < 0) {
        bc_rpc_words(c, "cannot read the claim's token", r->why, sizeof r->why);
        return -1;
    }
    snprintf(q, sizeof q, "%s%s", BC_TOKEN_PREFIX, r->name);
    body = g_strdup_printf("%llu\n%s", (unsigned long long)(max + 1), r->body ? r->body : "");
    e = publish(c, "", q, body, true, r->why, sizeof r->why);
    g_free(body);
    if (e < 0)
        return -1;
    if (tag && amqp_basic_ack(c->amqp, CH_MAIN, tag, 1) != AMQP_STATUS_OK) {
        snprintf(r->why, sizeof r->why, "cannot ack the old token");
        return -1;
    }
    h->token = max + 1;
    r->token = h->token;
    c->last_ok_ms = now_ms();
    return 0;
}

static int do_release(bc_conn *c, bc_req *r)
{
    if (!g_hash_table_contains(c->held, r->name))
        return ENOENT;
    let_go(c, r->name);
    return 0;
}

/* ---- the thread ---- */

static void answer(bc_conn *c, bc_req *r, int rc)
{
    bool abandoned;
    g_mutex_lock(&c->lock);
    r->rc = rc;
    r->done = true;
    abandoned = r->abandoned;
    g_cond_broadcast(&c->done_cv);
    g_mutex_unlock(&c->lock);
    if (abandoned) {
        g_free(r->body);
        g_free(r);
    }
}

static void run_one(bc_conn *c, bc_req *r)
{
    int rc;
    bool abandoned;

    if (!c->connected) {
        if (r->kind == RQ_ANNOUNCE || r->kind == RQ_EXPIRE) {
            g_free(r->body);
            g_free(r);
        } else {
            answer(c, r, ENOTCONN);
        }
        return;
    }
    if (r->kind == RQ_EXPIRE) {
        if (g_hash_table_contains(c->held, r->name)) {
            let_go(c, r->name);
            if (c->cb.lost)
                c->cb.lost(c->cb.ud, r->name, r->body);
        }
        g_free(r->body);
        g_free(r);
        return;
    }
    if (r->kind == RQ_ANNOUNCE) {
        char key[160], why[128];
        snprintf(key, sizeof key, "claims.%s", r->name[0] ? r->name : "_");
        if (publish(c, BC_EXCHANGE, key, r->body, false, why, sizeof why) < 0)
            drop(c, why);
        g_free(r->body);
        g_free(r);
        return;
    }
    rc = r->kind == RQ_TAKE ? do_take(c, r) : do_release(c, r);
    if (rc < 0) { /* the connection is not usable: claims lost with it */
        char why[256];
        g_strlcpy(why, r->why, sizeof why);
        drop(c, why);
        rc = ENOTCONN;
    } else if (rc == EIO && r->kind == RQ_TAKE) {
        log_warn("claims: take of %s refused by the broker: %s", r->name, r->why);
    }
    g_mutex_lock(&c->lock);
    abandoned = r->abandoned;
    g_mutex_unlock(&c->lock);
    if (abandoned && r->kind == RQ_TAKE && rc == 0) {
        log_warn("claims: %s was granted after its taker stopped waiting; released at once",
                 r->name);
        let_go(c, r->name);
    }
    answer(c, r, rc);
}

/* A probe's answer: to the owner; for a claim of ours that the broker shows
 * unheld (no consumer, or its queue unreachable: its node down), the claim
 * is lost, whatever our channel still says. */
static void probed(bc_conn *c, const char *name, int consumers, const char *why)
{
    if (consumers == 0 && g_hash_table_contains(c->held, name)) {
        char *n = g_strdup(name);
        let_go(c, n);
        if (c->cb.lost)
            c->cb.lost(c->cb.ud, n, why);
        g_free(n);
        return;
    }
    if (c->cb.probed)
        c->cb.probed(c->cb.ud, name, consumers);
}

/* The held names to check this round: up to max of them, rotating. */
static void add_held(bc_conn *c, GPtrArray *out, unsigned max)
{
    GHashTableIter it;
    gpointer k;
    unsigned i = 0, size = g_hash_table_size(c->held), added = 0;
    if (c->held_at >= size)
        c->held_at = 0;
    g_hash_table_iter_init(&it, c->held);
    while (added < max && g_hash_table_iter_next(&it, &k, NULL)) {
        if (i++ < c->held_at)
            continue;
        g_ptr_array_add(out, g_strdup(k));
        added++;
        c->held_at = i;
    }
    if (i >= size)
        c->held_at = 0;
}

/* Once a second: the owner's names probed, and some of ours (a round trip
 * for liveness, and a check that the broker still holds them for us). */
static void round_trip(bc_conn *c)
{
    char q[200], why[300];
    amqp_queue_declare_ok_t *ok;
    const char *name;

    if (!c->probe_names || !c->probe_names[c->probe_at]) {
        int64_t now = now_ms();
        if (now < c->next_round_ms)
            return;
        c->next_round_ms = now + 1000;
        {
            GPtrArray *names = g_ptr_array_new();
            char **theirs = c->cb.to_probe ? c->cb.to_probe(c->cb.ud, PROBES_PER_ROUND) : NULL;
            for (char **p = theirs; p && *p; p++)
                g_ptr_array_add(names, *p);
            g_free(theirs); /* its strings moved */
            add_held(c, names, HELD_PER_ROUND);
            g_ptr_array_add(names, NULL);
            g_strfreev(c->probe_names);
            c->probe_names = (char **)g_ptr_array_free(names, FALSE);
            c->probe_at = 0;
        }
        if (!c->probe_names[0])
            return;
    }
    name = c->probe_names[c->probe_at++];
    snprintf(q, sizeof q, "%s%s", BC_LOCK_PREFIX, name);
    ok = amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
    if (ok) {
        c->last_ok_ms = now_ms();
        progress(c);
        probed(c, name, (int)ok->consumer_count, "the broker shows no consumer on its lock");
        return;
    }
    bc_rpc_words(c, "the broker cannot find its lock", why, sizeof why);
    if (bc_channel_refused(c, CH_PROBE) && amqp_channel_open(c->amqp, CH_PROBE)) {
        c->last_ok_ms = now_ms(); /* 404 (e.g. its node is down): an answer all the same */
        probed(c, name, 0, why);
        return;
    }
    drop(c, "no answer to a probe");
}

static void check_grace(bc_conn *c)
{
    char why[200];
    if (!c->connected || !g_hash_table_size(c->held))
        return;
    if (now_ms() - c->last_ok_ms <= BC_GRACE_MS)
        return;
    snprintf(why, sizeof why,
             "no answer from the broker for %d ms: given up before the broker can hand the "
             "claims to another",
             BC_GRACE_MS);
    drop(c, why);
}

static bc_req *next_req(bc_conn *c)
{
    bc_req *r;
    g_mutex_lock(&c->lock);
    r = g_queue_pop_head(&c->reqs);
    g_mutex_unlock(&c->lock);
    return r;
}

gpointer bc_thread_main(gpointer data)
{
    bc_conn *c = data;
    bc_req *r;

    while (!stopping(c)) {
        struct pollfd pfd[2];
        int nfd = 1;

        progress(c);
        if (!c->connected && now_ms() >= c->next_attempt_ms)
            try_connect(c);
        while ((r = next_req(c))) {
            run_one(c, r);
            progress(c);
        }
        if (c->connected)
            read_all(c);
        if (c->connected)
            round_trip(c);
        check_grace(c);
        pfd[0] = (struct pollfd){.fd = c->wake.rfd, .events = POLLIN};
        if (c->connected) {
            pfd[1] = (struct pollfd){.fd = amqp_get_sockfd(c->amqp), .events = POLLIN};
            nfd = 2;
        }
        if (c->connected && (amqp_frames_enqueued(c->amqp) || amqp_data_in_buffer(c->amqp)))
            continue;
        if (c->connected && c->probe_names && c->probe_names[c->probe_at])
            continue;
        if (poll(pfd, (nfds_t)nfd, 200) < 0 && errno != EINTR)
            g_usleep(100000);
        if ((pfd[0].revents & POLLIN) && os_wake_drain(&c->wake) < 0 && errno != EAGAIN)
            log_warn("claims: wake-up read: %s", strerror(errno));
    }
    while ((r = next_req(c))) {
        if (r->kind == RQ_ANNOUNCE || r->kind == RQ_EXPIRE) {
            g_free(r->body);
            g_free(r);
        } else {
            answer(c, r, ENOTCONN);
        }
    }
    if (c->connected) {
        /* a goodbye, not a conversation (the broker threads' and the
         * roster's too): a broker that does not answer holds it 1 s */
        amqp_set_rpc_timeout(c->amqp, &(struct timeval){1, 0});
        amqp_connection_close(c->amqp, AMQP_REPLY_SUCCESS);
        amqp_destroy_connection(c->amqp);
        c->amqp = NULL;
        c->connected = false;
    }
    g_mutex_lock(&c->lock);
    c->sockfd = -1;
    c->finished = true;
    g_cond_broadcast(&c->done_cv);
    g_mutex_unlock(&c->lock);
    return NULL;
}
