/* SPDX-License-Identifier: Apache-2.0 */
/* tests/tools/claimtool.h — how the claims test tools (claimhold.c,
 * claimpeek.c) get onto the broker: URI parsed, plain TCP, logged in
 * without heartbeats, as a plain AMQP client would (never fleetfs's
 * code).  Header only: every .c in tests/tools is a program of its own.
 */
#ifndef FLEETFS_TESTS_TOOLS_CLAIMTOOL_H
#define FLEETFS_TESTS_TOOLS_CLAIMTOOL_H

#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

/* The connection to uri, logged in; NULL and *err ("bad URI", "cannot
 * connect", "login refused") when not. */
static amqp_connection_state_t claim_tool_open(const char *uri, const char **err)
{
    struct amqp_connection_info info;
    amqp_connection_state_t c = NULL;
    amqp_socket_t *s;
    char *buf = strdup(uri); /* info points into it */

    amqp_default_connection_info(&info);
    if (!buf || amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        *err = "bad URI";
        goto out;
    }
    c = amqp_new_connection();
    s = amqp_tcp_socket_new(c);
    if (!s || amqp_socket_open(s, info.host, info.port) != AMQP_STATUS_OK) {
        *err = "cannot connect";
        goto fail;
    }
    if (amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
            .reply_type != AMQP_RESPONSE_NORMAL) {
        *err = "login refused";
        goto fail;
    }
    goto out;
fail:
    amqp_destroy_connection(c);
    c = NULL;
out:
    free(buf);
    return c;
}

#endif
