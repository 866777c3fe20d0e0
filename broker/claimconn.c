/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claimconn.c — the claims connection's connect sequence (a third
 * private copy of conn.c's, as the roster's note says: fold them when
 * broker/ grows one helper) and the helpers for a refused synchronous
 * call; claims_int.h says what is shared.  Claims thread only.
 */
#include "broker/claims_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "broker/explain.h"
#include "fleetfs/base/log.h"

void bc_bytes_str(amqp_bytes_t b, char *out, size_t n)
{
    size_t len = MIN(b.len, n - 1);
    if (len)
        memcpy(out, b.bytes, len);
    out[len] = '\0';
    log_clean(out);
}

void bc_rpc_words(bc_conn *c, const char *what, char *out, size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(c->amqp);
    char t[200] = "";
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        (rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD ||
         rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        amqp_bytes_t text = rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD
                                ? ((amqp_channel_close_t *)rep.reply.decoded)->reply_text
                                : ((amqp_connection_close_t *)rep.reply.decoded)->reply_text;
        bc_bytes_str(text, t, sizeof t);
    } else if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        g_strlcpy(t, amqp_error_string2(rep.library_error), sizeof t);
    } else {
        g_strlcpy(t, "unexpected reply", sizeof t);
    }
    snprintf(out, n, "%s: %s", what, t);
}

/* After a failed synchronous call on channel ch: the broker's channel.close
 * code (answered close-ok; the channel is closed now), or 0 when it was not
 * a channel close (the connection is not usable then). */
int bc_channel_refused(bc_conn *c, int ch)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(c->amqp);
    amqp_channel_close_ok_t ok = {0};

    if (rep.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
        rep.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
        return 0;
    if (amqp_send_method(c->amqp, (amqp_channel_t)ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
        AMQP_STATUS_OK)
        return 0;
    return ((amqp_channel_close_t *)rep.reply.decoded)->reply_code;
}

/* Tests only (as the mailbox connection's, broker/session.c):
 * FLEETFS_TEST_SNDBUF=BYTES fixes the socket's send buffer, so that a test
 * can fill it with a few announcements (t1107). */
static void test_sndbuf(int fd)
{
    const char *env = getenv("FLEETFS_TEST_SNDBUF");
    int v = env ? atoi(env) : 0;
    if (v > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) < 0)
        log_warn("claims: FLEETFS_TEST_SNDBUF: %s", strerror(errno));
}

int bc_open_login(bc_conn *c, const char *uri, char *why, size_t n)
{
    char *buf = g_strdup(uri);
    struct amqp_connection_info info;
    struct timeval tv = {2, 0}, rpc = {RPC_TIMEOUT_MS / 1000, 0};
    amqp_socket_t *sock;
    amqp_rpc_reply_t rep;
    const char *vhost;
    br_where w;
    int rc = -1, s;
    char name[200];
    amqp_table_entry_t prop[3], cap[1];
    amqp_table_t props = {3, prop};

    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        snprintf(why, n, "cannot parse a broker URI");
        goto out;
    }
    snprintf(c->shown, sizeof c->shown, "%s:%d", info.host, info.port);
    vhost = c->cfg.vhost && *c->cfg.vhost ? c->cfg.vhost : info.vhost;
    c->amqp = amqp_new_connection();
    if (info.ssl && !c->cfg.ca) {
        snprintf(why, n, "%s: amqps:// needs -o ca=FILE", c->shown);
        goto out;
    }
    sock = info.ssl ? amqp_ssl_socket_new(c->amqp) : amqp_tcp_socket_new(c->amqp);
    if (sock && info.ssl) {
        if (amqp_ssl_socket_set_cacert(sock, c->cfg.ca) != AMQP_STATUS_OK) {
            snprintf(why, n, "cannot load CA file %s", c->cfg.ca);
            goto out;
        }
        amqp_ssl_socket_set_verify_peer(sock, 1);
        amqp_ssl_socket_set_verify_hostname(sock, 1);
    }
    if (!sock) {
        snprintf(why, n, "cannot create a socket");
        goto out;
    }
    w = (br_where){.shown = c->shown,
                   .host = info.host,
                   .port = info.port,
                   .user = info.user,
                   .vhost = vhost,
                   .ca = c->cfg.ca,
                   .uri_env = c->cfg.uri_env};
    s = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (s != AMQP_STATUS_OK) {
        br_explain_open(&w, s, why, n);
        goto out;
    }
    test_sndbuf(amqp_socket_get_sockfd(sock));
    amqp_set_handshake_timeout(c->amqp, &rpc);
    amqp_set_rpc_timeout(c->amqp, &rpc);
    snprintf(name, sizeof name, "fleetfs %s@%s claims", c->cfg.coord_id, c->cfg.host);
    prop[0].key = amqp_cstring_bytes("connection_name");
    prop[0].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[0].value.value.bytes = amqp_cstring_bytes(name);
    prop[1].key = amqp_cstring_bytes("product");
    prop[1].value.kind = AMQP_FIELD_KIND_UTF8;
    prop[1].value.value.bytes = amqp_cstring_bytes("fleetfs");
    /* without it the broker drops our consumer silently when the lock's
     * queue goes (deleted, its node down): the claim would look held */
    cap[0].key = amqp_cstring_bytes("consumer_cancel_notify");
    cap[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    cap[0].value.value.boolean = 1;
    prop[2].key = amqp_cstring_bytes("capabilities");
    prop[2].value.kind = AMQP_FIELD_KIND_TABLE;
    prop[2].value.value.table = (amqp_table_t){1, cap};
    rep = amqp_login_with_properties(c->amqp, vhost, 0, 131072, BC_HEARTBEAT_S, &props,
                                     AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        br_explain_login_reply(&w, rep, why, n);
        goto out;
    }
    rc = 0;
out:
    g_free(buf);
    return rc;
}

/* The events exchange (topic, non-durable; an operator's durable one is
 * used as it is; a per-host login may not make it: `fleetfs declare` does),
 * our own queue fleet.claimev.<coord_id>.<random> bound to claims.#,
 * consumed without acks.  A refusal by the login's permissions says what
 * the operator must run. */
int bc_setup(bc_conn *c, char *why, size_t n)
{
    amqp_bytes_t ex = amqp_cstring_bytes(BC_EXCHANGE);
    char qname[200];
    int code;

    if (!amqp_channel_open(c->amqp, CH_MAIN) || !amqp_channel_open(c->amqp, CH_PROBE) ||
        !amqp_channel_open(c->amqp, CH_EVENTS)) {
        bc_rpc_words(c, "cannot open a channel", why, n);
        return -1;
    }
    if (!amqp_confirm_select(c->amqp, CH_MAIN)) {
        bc_rpc_words(c, "cannot select publisher confirms", why, n);
        return -1;
    }
    c->next_tag = 1;
    if (!amqp_exchange_declare(c->amqp, CH_PROBE, ex, amqp_cstring_bytes("topic"), 0, 0, 0, 0,
                               amqp_empty_table)) {
        code = bc_channel_refused(c, CH_PROBE);
        if ((code != 403 && code != 406) || !amqp_channel_open(c->amqp, CH_PROBE)) {
            bc_rpc_words(c, "cannot declare exchange " BC_EXCHANGE, why, n);
            return -1;
        }
        if (!amqp_exchange_declare(c->amqp, CH_PROBE, ex, amqp_cstring_bytes("topic"), 1, 0, 0, 0,
                                   amqp_empty_table)) {
            bc_rpc_words(c, "cannot find exchange " BC_EXCHANGE, why, n);
            if (code == 403 && bc_channel_refused(c, CH_PROBE) == 404)
                snprintf(why, n,
                         "this login may not configure %s and it does not exist: an operator "
                         "must run `fleetfs-broker host update %s` (or `fleetfs declare %s`), "
                         "which makes it",
                         BC_EXCHANGE, c->cfg.coord_id, c->cfg.coord_id);
            return -1;
        }
    }
    snprintf(qname, sizeof qname, BC_EVENTS_PREFIX "%s.%08x%08x", c->cfg.coord_id, g_random_int(),
             g_random_int());
    if (!amqp_queue_declare(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), 0, 0, 1, 1,
                            amqp_empty_table)) {
        bc_rpc_words(c, "cannot declare the claims events queue", why, n);
        if (bc_channel_refused(c, CH_EVENTS) == 403)
            snprintf(why, n,
                     "this login may not declare its claims events queue " BC_EVENTS_PREFIX
                     "%s.*: it predates claims; an operator must run `fleetfs-broker host "
                     "update %s`, which gives it today's permissions",
                     c->cfg.coord_id, c->cfg.coord_id);
        return -1;
    }
    if (!amqp_queue_bind(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), ex,
                         amqp_cstring_bytes("claims.#"), amqp_empty_table)) {
        bc_rpc_words(c, "cannot bind the claims events queue to " BC_EXCHANGE, why, n);
        if (bc_channel_refused(c, CH_EVENTS) == 403)
            snprintf(why, n,
                     "this login may not bind to %s: it predates claims; an operator must run "
                     "`fleetfs-broker host update %s`, which gives it today's permissions",
                     BC_EXCHANGE, c->cfg.coord_id);
        return -1;
    }
    if (!amqp_basic_consume(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), amqp_empty_bytes, 0, 1,
                            1, amqp_empty_table)) {
        bc_rpc_words(c, "cannot consume the claims events queue", why, n);
        return -1;
    }
    return 0;
}
