/* SPDX-License-Identifier: Apache-2.0 */
/* broker/declare.c — the operator's declarations for a host (declare.h).
 *
 * Synchronous rabbitmq-c calls on one channel: a refused call closes the
 * channel, which is answered with close-ok and reopened before the next
 * one (BROKER-FACTS.md).  The fleet-wide objects are probed passively
 * first and made only when missing, so an existing fleet.roster made
 * non-durable by a fleetfs with a shared login is left as it is; the
 * host's own queues are always declared actively, which is also the check
 * that their arguments match the fleet's.
 */
#include "broker/declare.h"

#include <stdio.h>
#include <string.h>

#include <glib.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "broker/claims.h"
#include "broker/death.h"
#include "broker/explain.h"
#include "broker/quirks.h"
#include "broker/topology.h"
#include "broker/uri.h"

#define DC_CH 1

/* The broker's words for the last failed call; reopens a closed channel.
 * Returns the reply code (0: not a channel-level refusal). */
static int dc_failed(amqp_connection_state_t a, const char *what, char *why, size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(a);
    int code = 0;

    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = rep.reply.decoded;
        amqp_channel_close_ok_t ok = {0};
        code = m->reply_code;
        char text[256];
        snprintf(text, sizeof text, "%.*s", (int)m->reply_text.len,
                 (const char *)m->reply_text.bytes);
        snprintf(why, n, "%s: %d %s%s", what, code, text,
                 code == 406 && strncmp(what, "declare queue", 13) == 0 ? br_mismatch_hint(text)
                                                                        : "");
        if (amqp_send_method(a, DC_CH, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK ||
            !amqp_channel_open(a, DC_CH))
            code = 0;
    } else if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        snprintf(why, n, "%s: %s", what, amqp_error_string2(rep.library_error));
    } else {
        snprintf(why, n, "%s: the broker closed the connection", what);
    }
    return code;
}

static int dc_exchange(amqp_connection_state_t a, const char *name, const char *type, char *why,
                       size_t n)
{
    char what[128];
    if (amqp_exchange_declare(a, DC_CH, amqp_cstring_bytes(name), amqp_cstring_bytes(type), 1, 0, 0,
                              0, amqp_empty_table))
        return 0;
    snprintf(what, sizeof what, "probe exchange %s", name);
    if (dc_failed(a, what, why, n) != 404)
        return -1;
    snprintf(what, sizeof what, "declare exchange %s", name);
    if (amqp_exchange_declare(a, DC_CH, amqp_cstring_bytes(name), amqp_cstring_bytes(type), 0, 1, 0,
                              0, amqp_empty_table))
        return 0;
    dc_failed(a, what, why, n);
    return -1;
}

static int dc_queue(amqp_connection_state_t a, const char *name, bool probe_first,
                    amqp_table_t args, char *why, size_t n)
{
    char what[128];
    if (probe_first) {
        if (amqp_queue_declare(a, DC_CH, amqp_cstring_bytes(name), 1, 1, 0, 0, amqp_empty_table))
            return 0;
        snprintf(what, sizeof what, "probe queue %s", name);
        if (dc_failed(a, what, why, n) != 404)
            return -1;
    }
    if (amqp_queue_declare(a, DC_CH, amqp_cstring_bytes(name), 0, 1, 0, 0, args))
        return 0;
    snprintf(what, sizeof what, "declare queue %s", name);
    dc_failed(a, what, why, n);
    return -1;
}

static int dc_objects(amqp_connection_state_t a, const br_config *cfg, const char *name, char *why,
                      size_t n)
{
    amqp_table_entry_t dlq[TOPO_DLQ_ARGS], mb[TOPO_MAILBOX_ARGS];
    char q[96];

    if (dc_exchange(a, TOPO_DLX, "fanout", why, n) < 0 ||
        dc_queue(a, TOPO_DLQ, true, topo_dlq_args(cfg, dlq), why, n) < 0)
        return -1;
    if (!amqp_queue_bind(a, DC_CH, amqp_cstring_bytes(TOPO_DLQ), amqp_cstring_bytes(TOPO_DLX),
                         amqp_cstring_bytes(""), amqp_empty_table)) {
        dc_failed(a, "bind " TOPO_DLQ " to " TOPO_DLX, why, n);
        return -1;
    }
    /* the dead letters' way home (broker/death.h): fleet.dead bound to
     * fleet.dlx, and lead.<name>.dead bound to it by its sender header */
    if (dc_exchange(a, BR_EXCHANGE_DEAD, "headers", why, n) < 0)
        return -1;
    if (!amqp_exchange_bind(a, DC_CH, amqp_cstring_bytes(BR_EXCHANGE_DEAD),
                            amqp_cstring_bytes(TOPO_DLX), amqp_cstring_bytes(""),
                            amqp_empty_table)) {
        dc_failed(a, "bind " BR_EXCHANGE_DEAD " to " TOPO_DLX, why, n);
        return -1;
    }
    br_dead_queue(name, q, sizeof q);
    if (dc_queue(a, q, false, topo_dlq_args(cfg, dlq), why, n) < 0)
        return -1;
    {
        amqp_table_entry_t h[2];
        if (!amqp_queue_bind(a, DC_CH, amqp_cstring_bytes(q), amqp_cstring_bytes(BR_EXCHANGE_DEAD),
                             amqp_cstring_bytes(name), topo_dead_binding(name, h))) {
            char what[160];
            snprintf(what, sizeof what, "bind %s to " BR_EXCHANGE_DEAD " by header %s=%s", q,
                     BR_HEADER_HOST, name);
            dc_failed(a, what, why, n);
            return -1;
        }
    }
    if (dc_exchange(a, TOPO_ROSTER_EXCHANGE, "topic", why, n) < 0 ||
        dc_exchange(a, BR_EXCHANGE_MSG, "topic", why, n) < 0 ||
        dc_exchange(a, BR_EXCHANGE_CONTROL, "direct", why, n) < 0 ||
        dc_exchange(a, BC_EXCHANGE, "topic", why, n) < 0)
        return -1;
    for (int inbox = 1; inbox >= 0; inbox--) {
        topo_consumer_queue(inbox, name, q, sizeof q);
        if (dc_queue(a, q, false, topo_mailbox_args(cfg, mb), why, n) < 0)
            return -1;
    }
    /* control.<name>, bound here and only here: the host's own login may
     * not bind to fleet.control (see BR_EXCHANGE_CONTROL) */
    br_control_queue(name, q, sizeof q);
    if (dc_queue(a, q, false, topo_mailbox_args(cfg, mb), why, n) < 0)
        return -1;
    if (!amqp_queue_bind(a, DC_CH, amqp_cstring_bytes(q), amqp_cstring_bytes(BR_EXCHANGE_CONTROL),
                         amqp_cstring_bytes(name), amqp_empty_table)) {
        char what[160];
        snprintf(what, sizeof what, "bind %s to " BR_EXCHANGE_CONTROL " with key %s", q, name);
        dc_failed(a, what, why, n);
        return -1;
    }
    return 0;
}

amqp_connection_state_t br_operator_connect(const br_config *cfg, char *why, size_t n,
                                            char *product, size_t pn)
{
    struct amqp_connection_info info;
    struct timeval tv = {5, 0};
    char *buf, *shown;
    amqp_connection_state_t a;
    amqp_socket_t *sock;
    amqp_rpc_reply_t rep;
    br_where w;
    int s;

    if (product && pn)
        product[0] = '\0';
    if (!cfg->uris || !cfg->uris[0]) {
        snprintf(why, n, "no broker URI");
        return NULL;
    }
    buf = g_strdup(cfg->uris[0]);
    shown = br_uri_redact(cfg->uris[0]);
    a = amqp_new_connection();
    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        snprintf(why, n, "cannot parse broker URI %s", shown);
        goto fail;
    }
    w = (br_where){.shown = shown,
                   .host = info.host,
                   .port = info.port,
                   .user = info.user,
                   .vhost = cfg->vhost && *cfg->vhost ? cfg->vhost : info.vhost,
                   .ca = cfg->ca,
                   .uri_env = cfg->uri_env};
    if (info.ssl && !cfg->ca) {
        snprintf(why, n, "%s: amqps:// needs -o ca=FILE", shown);
        goto fail;
    }
    sock = info.ssl ? amqp_ssl_socket_new(a) : amqp_tcp_socket_new(a);
    if (sock && info.ssl) {
        if (amqp_ssl_socket_set_cacert(sock, cfg->ca) != AMQP_STATUS_OK) {
            snprintf(why, n, "cannot load CA file %s", cfg->ca);
            goto fail;
        }
        amqp_ssl_socket_set_verify_peer(sock, 1);
        amqp_ssl_socket_set_verify_hostname(sock, 1);
    }
    if (!sock) {
        snprintf(why, n, "cannot create a socket");
        goto fail;
    }
    s = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (s != AMQP_STATUS_OK) {
        br_explain_open(&w, s, why, n);
        goto fail;
    }
    amqp_set_rpc_timeout(a, &tv);
    rep = amqp_login(a, w.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        br_explain_login_reply(&w, rep, why, n);
        goto fail;
    }
    if (!amqp_channel_open(a, DC_CH)) {
        dc_failed(a, "open a channel", why, n);
        amqp_connection_close(a, AMQP_REPLY_SUCCESS);
        goto fail;
    }
    if (product && pn) {
        amqp_table_t *t = amqp_get_server_properties(a);
        for (int i = 0; t && i < t->num_entries; i++) {
            amqp_table_entry_t *e = &t->entries[i];
            if (e->value.kind == AMQP_FIELD_KIND_UTF8 && e->key.len == 7 &&
                memcmp(e->key.bytes, "product", 7) == 0)
                snprintf(product, pn, "%.*s", (int)e->value.value.bytes.len,
                         (const char *)e->value.value.bytes.bytes);
        }
    }
    g_free(shown);
    g_free(buf);
    return a;
fail:
    amqp_destroy_connection(a);
    g_free(shown);
    g_free(buf);
    return NULL;
}

void br_operator_close(amqp_connection_state_t a)
{
    if (!a)
        return;
    amqp_channel_close(a, DC_CH, AMQP_REPLY_SUCCESS);
    amqp_connection_close(a, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(a);
}

int br_declare_host(const br_config *cfg, const char *name, char *why, size_t n, char *made,
                    size_t mn)
{
    char product[64];
    int rc;
    amqp_connection_state_t a = br_operator_connect(cfg, why, n, product, sizeof product);

    if (!a)
        return -1;
    rc = dc_objects(a, cfg, name, why, n);
    if (made && mn)
        br_queue_type_made(product, cfg->queue_type, made, mn);
    br_operator_close(a);
    return rc;
}
