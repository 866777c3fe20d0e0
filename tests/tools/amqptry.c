/* SPDX-License-Identifier: Apache-2.0 */
/* amqptry — attempts one AMQP operation as a given broker login and says
 * what the broker answered.  The per-host login test (t0830) uses it to
 * prove each refusal from the broker's own mouth: what fleetfs would do is
 * beside the point, the question is what the login may do at all.
 *
 *   amqptry URI OP ARG...
 *     declare-queue Q        active declare, durable (configure on Q)
 *     declare-mailbox Q [TTL_MS]
 *                            active declare with fleetfs's default mailbox arguments
 *                            (configure + read on Q, write on fleet.dlx); TTL_MS: an
 *                            x-message-ttl other than 7 d.  Never x-expires: what a
 *                            fleetfs from before agent_expires made for an agent (t1050)
 *     probe-queue Q          passive declare (no permission needed)
 *     delete-queue Q         queue.delete (configure on Q)
 *     purge-queue Q          queue.purge (read on Q)
 *     get Q                  basic.get without ack (read on Q); leaves it in place
 *     consume Q              basic.consume (read on Q)
 *     bind Q EXCHANGE KEY    queue.bind (write on Q, read on EXCHANGE)
 *     unbind Q EXCHANGE KEY  queue.unbind (the same rights)
 *     delete-exchange X      exchange.delete (configure on X)
 *     declare-exchange X T   active exchange.declare, type T, durable
 *     probe-exchange X       passive exchange.declare
 *     publish X KEY BODY     basic.publish in confirm mode (write on X; X "" is
 *                            the default exchange), mandatory
 *
 * One line on stdout: "ok" or "refused CODE TEXT" (CODE the broker's reply
 * code, e.g. 403 ACCESS_REFUSED).  Exit 0 ok, 3 refused with 403, 4 refused
 * otherwise (404, 405, 406, a return), 2 usage or connection errors.  The
 * URI's password is never printed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "broker/topology.h"

#define AT_USAGE 2
#define AT_403 3
#define AT_OTHER 4

static int at_fail(const char *what)
{
    fprintf(stderr, "amqptry: %s\n", what);
    return AT_USAGE;
}

/* The broker's answer to the last synchronous call, printed; the exit code. */
static int at_reply(amqp_connection_state_t c, amqp_rpc_reply_t rep)
{
    int code = 0;
    amqp_bytes_t text = {0, NULL};

    if (rep.reply_type == AMQP_RESPONSE_NORMAL) {
        printf("ok\n");
        return 0;
    }
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = rep.reply.decoded;
        code = m->reply_code;
        text = m->reply_text;
    } else if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
               rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = rep.reply.decoded;
        code = m->reply_code;
        text = m->reply_text;
    } else {
        fprintf(stderr, "amqptry: %s\n",
                rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                    ? amqp_error_string2(rep.library_error)
                    : "unexpected reply");
        return AT_USAGE;
    }
    (void)c;
    printf("refused %d %.*s\n", code, (int)text.len, (const char *)text.bytes);
    return code == 403 ? AT_403 : AT_OTHER;
}

/* A publish in confirm mode: ack (ok), basic.return (refused 312, no
 * route), or the channel closed (refused CODE). */
static int at_publish(amqp_connection_state_t c, const char *x, const char *key, const char *body)
{
    amqp_frame_t f;
    struct timeval tv = {5, 0};
    bool returned = false;

    amqp_confirm_select(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        return at_reply(c, amqp_get_rpc_reply(c));
    if (amqp_basic_publish(c, 1, amqp_cstring_bytes(x), amqp_cstring_bytes(key), 1, 0, NULL,
                           amqp_cstring_bytes(body)) != AMQP_STATUS_OK)
        return at_fail("publish failed");
    for (;;) {
        int rc = amqp_simple_wait_frame_noblock(c, &f, &tv);
        if (rc != AMQP_STATUS_OK)
            return at_fail(amqp_error_string2(rc));
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_RETURN_METHOD:
            returned = true;
            break;
        case AMQP_BASIC_ACK_METHOD:
            if (returned) {
                printf("refused 312 NO_ROUTE (returned)\n");
                return AT_OTHER;
            }
            printf("ok\n");
            return 0;
        case AMQP_BASIC_NACK_METHOD:
            printf("refused 0 nack\n");
            return AT_OTHER;
        case AMQP_CHANNEL_CLOSE_METHOD: {
            amqp_channel_close_t *m = f.payload.method.decoded;
            printf("refused %d %.*s\n", m->reply_code, (int)m->reply_text.len,
                   (const char *)m->reply_text.bytes);
            return m->reply_code == 403 ? AT_403 : AT_OTHER;
        }
        default:
            break;
        }
    }
}

/* The operation named by argv[2], on channel 1; the exit code. */
static int at_op(amqp_connection_state_t c, int argc, char **argv)
{
    const char *op = argv[2];

    if (!strcmp(op, "declare-queue") || !strcmp(op, "probe-queue")) {
        amqp_queue_declare(c, 1, amqp_cstring_bytes(argv[3]), !strcmp(op, "probe-queue"), 1, 0, 0,
                           amqp_empty_table);
    } else if (!strcmp(op, "declare-mailbox")) {
        /* the defaults of fleetfs, from the one table (broker/topology.c) */
        br_config cfg = {.max_length = 10000, .message_ttl_ms = 7 * 24 * 3600 * 1000LL};
        if (argc > 4)
            cfg.message_ttl_ms = atoll(argv[4]);
        amqp_table_entry_t e[TOPO_MAILBOX_ARGS];
        amqp_queue_declare(c, 1, amqp_cstring_bytes(argv[3]), 0, 1, 0, 0,
                           topo_mailbox_args(&cfg, e));
    } else if (!strcmp(op, "delete-queue")) {
        amqp_queue_delete(c, 1, amqp_cstring_bytes(argv[3]), 0, 0);
    } else if (!strcmp(op, "purge-queue")) {
        amqp_queue_purge(c, 1, amqp_cstring_bytes(argv[3]));
    } else if (!strcmp(op, "get")) {
        amqp_rpc_reply_t r = amqp_basic_get(c, 1, amqp_cstring_bytes(argv[3]), 0);
        return at_reply(c, r); /* the message, if any, goes back when we hang up */
    } else if (!strcmp(op, "consume")) {
        amqp_basic_consume(c, 1, amqp_cstring_bytes(argv[3]), amqp_empty_bytes, 0, 0, 0,
                           amqp_empty_table);
    } else if (!strcmp(op, "bind") && argc >= 6) {
        amqp_queue_bind(c, 1, amqp_cstring_bytes(argv[3]), amqp_cstring_bytes(argv[4]),
                        amqp_cstring_bytes(argv[5]), amqp_empty_table);
    } else if (!strcmp(op, "unbind") && argc >= 6) {
        amqp_queue_unbind(c, 1, amqp_cstring_bytes(argv[3]), amqp_cstring_bytes(argv[4]),
                          amqp_cstring_bytes(argv[5]), amqp_empty_table);
    } else if (!strcmp(op, "delete-exchange")) {
        amqp_exchange_delete(c, 1, amqp_cstring_bytes(argv[3]), 0);
    } else if ((!strcmp(op, "declare-exchange") && argc >= 5) || !strcmp(op, "probe-exchange")) {
        bool passive = !strcmp(op, "probe-exchange");
        amqp_exchange_declare(c, 1, amqp_cstring_bytes(argv[3]),
                              amqp_cstring_bytes(passive ? "topic" : argv[4]), passive, 1, 0, 0,
                              amqp_empty_table);
    } else if (!strcmp(op, "publish") && argc >= 6) {
        return at_publish(c, argv[3], argv[4], argv[5]);
    } else {
        return at_fail("unknown operation or missing arguments");
    }
    return at_reply(c, amqp_get_rpc_reply(c));
}

int main(int argc, char **argv)
{
    struct amqp_connection_info info;
    amqp_connection_state_t c;
    amqp_socket_t *s;
    amqp_rpc_reply_t rep;
    char *buf;
    int rc;

    if (argc < 4)
        return at_fail("usage: amqptry URI OP ARG... (see the top of tests/tools/amqptry.c)");
    buf = strdup(argv[1]);
    amqp_default_connection_info(&info);
    if (!buf || amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        free(buf);
        return at_fail("cannot parse the URI");
    }
    c = amqp_new_connection();
    s = amqp_tcp_socket_new(c);
    if (!s || amqp_socket_open(s, info.host, info.port) != AMQP_STATUS_OK) {
        rc = at_fail("cannot connect");
    } else if ((rep = amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                                 info.password))
                   .reply_type != AMQP_RESPONSE_NORMAL) {
        rc = at_fail("login refused");
    } else if (!amqp_channel_open(c, 1)) {
        rc = at_fail("cannot open a channel");
    } else {
        rc = at_op(c, argc, argv);
    }
    amqp_destroy_connection(c); /* no goodbye: a get's message goes back */
    free(buf);
    return rc;
}
