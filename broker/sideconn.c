/* SPDX-License-Identifier: Apache-2.0 */
/* broker/sideconn.c — the broker's side connections' shared part (design
 * in sideconn.h): the connect sequence of the roster's and the claims'
 * connections, the login's properties (the mailbox connection's too), the
 * words for a refused call, the retry timing and the wait for a thread's
 * end.  Calls nothing of broker/ but explain.h.
 */
#include "broker/sideconn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "broker/explain.h"
#include "fleetfs/base/log.h"

amqp_rpc_reply_t sc_login(amqp_connection_state_t amqp, const char *vhost, int heartbeat_s,
                          const char *name, int caps, const char *user, const char *password)
{
    amqp_table_entry_t prop[3], cap[2];
    amqp_table_t props = {2, prop};
    int ncap = 0;

    prop[0].key = amqp_cstring_bytes("connection_name");
    prop[0].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[0].value.value.bytes = amqp_cstring_bytes(name);
    prop[1].key = amqp_cstring_bytes("product");
    prop[1].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[1].value.value.bytes = amqp_cstring_bytes("fleetfs");
    if (caps & SC_CAP_CANCEL_NOTIFY) {
        cap[ncap].key = amqp_cstring_bytes("consumer_cancel_notify");
        cap[ncap].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        cap[ncap++].value.value.boolean = 1;
    }
    if (caps & SC_CAP_BLOCKED) {
        cap[ncap].key = amqp_cstring_bytes("connection.blocked");
        cap[ncap].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        cap[ncap++].value.value.boolean = 1;
    }
    if (ncap) {
        prop[2].key = amqp_cstring_bytes("capabilities");
        prop[2].value.kind = AMQP_FIELD_KIND_TABLE;
        prop[2].value.value.table = (amqp_table_t){ncap, cap};
        props.num_entries = 3;
    }
    return amqp_login_with_properties(amqp, vhost, 0, 131072, heartbeat_s, &props,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}

/* See sc_params.test_sndbuf. */
static void test_sndbuf(const sc_params *p, int fd)
{
    const char *env = getenv("FLEETFS_TEST_SNDBUF");
    int v = env ? atoi(env) : 0;
    if (v > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) < 0)
        log_warn("%s: FLEETFS_TEST_SNDBUF: %s", p->who, strerror(errno));
}

int sc_open_login(const sc_params *p, const char *uri, amqp_connection_state_t *amqp, char *shown,
                  size_t shown_n, char *why, size_t n)
{
    char *buf = g_strdup(uri);
    struct amqp_connection_info info;
    struct timeval tv = {2, 0};
    struct timeval rpc = {p->rpc_timeout_ms / 1000, (p->rpc_timeout_ms % 1000) * 1000};
    amqp_socket_t *sock;
    amqp_rpc_reply_t rep;
    const char *vhost;
    br_where w;
    int rc = -1, s;

    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        snprintf(why, n, "cannot parse a broker URI");
        goto out;
    }
    snprintf(shown, shown_n, "%s:%d", info.host, info.port);
    vhost = p->vhost && *p->vhost ? p->vhost : info.vhost;
    *amqp = amqp_new_connection();
    if (info.ssl && !p->ca) {
        snprintf(why, n, "%s: amqps:// needs -o ca=FILE", shown);
        goto out;
    }
    sock = info.ssl ? amqp_ssl_socket_new(*amqp) : amqp_tcp_socket_new(*amqp);
    if (sock && info.ssl) {
        if (amqp_ssl_socket_set_cacert(sock, p->ca) != AMQP_STATUS_OK) {
            snprintf(why, n, "cannot load CA file %s", p->ca);
            goto out;
        }
        amqp_ssl_socket_set_verify_peer(sock, 1);
        amqp_ssl_socket_set_verify_hostname(sock, 1);
    }
    if (!sock) {
        snprintf(why, n, "cannot create a socket");
        goto out;
    }
    w = (br_where){.shown = shown,
                   .host = info.host,
                   .port = info.port,
                   .user = info.user,
                   .vhost = vhost,
                   .ca = p->ca,
                   .uri_env = p->uri_env};
    s = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (s != AMQP_STATUS_OK) {
        br_explain_open(&w, s, why, n);
        goto out;
    }
    if (p->test_sndbuf)
        test_sndbuf(p, amqp_socket_get_sockfd(sock));
    amqp_set_handshake_timeout(*amqp, &rpc);
    amqp_set_rpc_timeout(*amqp, &rpc);
    rep = sc_login(*amqp, vhost, p->heartbeat_s, p->name, p->caps, info.user, info.password);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        br_explain_login_reply(&w, rep, why, n);
        goto out;
    }
    rc = 0;
out:
    g_free(buf); /* info points into it */
    return rc;
}

void sc_bytes_str(amqp_bytes_t b, char *out, size_t n)
{
    size_t len = MIN(b.len, n - 1);
    if (len)
        memcpy(out, b.bytes, len);
    out[len] = '\0';
    log_clean(out);
}

void sc_rpc_words(amqp_connection_state_t amqp, const char *what, char *out, size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(amqp);
    char t[200] = "";
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        (rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD ||
         rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        amqp_bytes_t text = rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD
                                ? ((amqp_channel_close_t *)rep.reply.decoded)->reply_text
                                : ((amqp_connection_close_t *)rep.reply.decoded)->reply_text;
        sc_bytes_str(text, t, sizeof t);
    } else if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        g_strlcpy(t, amqp_error_string2(rep.library_error), sizeof t);
    } else {
        g_strlcpy(t, "unexpected reply", sizeof t);
    }
    snprintf(out, n, "%s: %s", what, t);
}

int sc_channel_refused(amqp_connection_state_t amqp, int ch)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(amqp);
    amqp_channel_close_ok_t ok = {0};
    int code;

    if (rep.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
        rep.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
        return 0;
    code = ((amqp_channel_close_t *)rep.reply.decoded)->reply_code;
    if (amqp_send_method(amqp, (amqp_channel_t)ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
        AMQP_STATUS_OK)
        return 0;
    return code;
}

void sc_retry_later(int64_t now_ms, int64_t *next_attempt_ms, int64_t *backoff_ms, int64_t max_ms)
{
    *next_attempt_ms = now_ms + *backoff_ms;
    *backoff_ms = MIN(*backoff_ms * 2, max_ms);
}

bool sc_wait_finished(GMutex *lock, GCond *cv, const bool *finished, gint64 until)
{
    bool done;
    g_mutex_lock(lock);
    while (!*finished)
        if (!g_cond_wait_until(cv, lock, until))
            break;
    done = *finished;
    g_mutex_unlock(lock);
    return done;
}

bool sc_stop_wait(GMutex *lock, GCond *cv, const bool *finished, gint64 stop_at, int wait_ms,
                  void (*kick_locked)(void *ud), void *ud)
{
    gint64 until = stop_at + (gint64)wait_ms * G_TIME_SPAN_MILLISECOND;
    if (sc_wait_finished(lock, cv, finished, until))
        return true;
    g_mutex_lock(lock); /* the thread cannot close its socket meanwhile */
    kick_locked(ud);
    g_mutex_unlock(lock);
    until = MAX(until, g_get_monotonic_time()) + (gint64)wait_ms * G_TIME_SPAN_MILLISECOND;
    return sc_wait_finished(lock, cv, finished, until);
}
