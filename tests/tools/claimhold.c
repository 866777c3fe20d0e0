/* SPDX-License-Identifier: Apache-2.0 */
/* claimhold — holds many claims at once, the way a fleetfs holder does on
 * the broker, for the claims listing test (t1103): for each NAME, the
 * durable lock queue fleet.claim.NAME and an exclusive consumer on it,
 * then a "take" announcement on fleet.claims as doc/claims.md describes
 * (holder COORD).  No token queue: the listing never reads it.
 *
 *   claimhold URI COORD PREFIX COUNT
 *
 * Holds PREFIX0 .. PREFIX<COUNT-1>, prints "ready" once the broker has
 * taken every consume, and holds them until stdin closes (then the
 * connection closes and the broker frees them all).  Exit 2 on errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>

#include "claimtool.h"

static int fail(const char *what)
{
    fprintf(stderr, "claimhold: %s\n", what);
    return 2;
}

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    const char *err = "";
    char q[200], body[400], key[200];
    long count;
    long long now = (long long)time(NULL) * 1000;

    if (argc != 5 || (count = strtol(argv[4], NULL, 10)) <= 0)
        return fail("usage: claimhold URI COORD PREFIX COUNT");
    c = claim_tool_open(argv[1], &err);
    if (!c)
        return fail(err);
    if (!amqp_channel_open(c, 1))
        return fail("cannot open a channel");
    for (long i = 0; i < count; i++) {
        amqp_queue_declare_t d = {0};
        amqp_basic_consume_t m = {0};
        snprintf(q, sizeof q, "fleet.claim.%s%ld", argv[3], i);
        d.queue = amqp_cstring_bytes(q);
        d.durable = 1;
        d.nowait = 1;
        m.queue = amqp_cstring_bytes(q);
        m.exclusive = 1;
        m.nowait = 1;
        if (amqp_send_method(c, 1, AMQP_QUEUE_DECLARE_METHOD, &d) != AMQP_STATUS_OK ||
            amqp_send_method(c, 1, AMQP_BASIC_CONSUME_METHOD, &m) != AMQP_STATUS_OK)
            return fail("send failed");
    }
    /* a synchronous call after them all: answered once every one is done */
    if (!amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table))
        return fail("a declare or consume was refused");
    for (long i = 0; i < count; i++) {
        snprintf(key, sizeof key, "claims.%s%ld", argv[3], i);
        snprintf(body, sizeof body,
                 "{\"op\":\"take\",\"name\":\"%s%ld\",\"host\":\"claimhold\",\"coord\":\"%s\","
                 "\"since\":%lld,\"token\":1,\"note\":\"\"}",
                 argv[3], i, argv[2], now);
        if (amqp_basic_publish(c, 1, amqp_cstring_bytes("fleet.claims"), amqp_cstring_bytes(key), 0,
                               0, NULL, amqp_cstring_bytes(body)) != AMQP_STATUS_OK)
            return fail("publish failed");
    }
    if (!amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table))
        return fail("the announcements were refused");
    printf("ready\n");
    fflush(stdout);
    while (getchar() != EOF)
        ;
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    return 0;
}
