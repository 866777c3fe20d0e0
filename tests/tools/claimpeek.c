/* SPDX-License-Identifier: Apache-2.0 */
/* claimpeek — what the broker itself holds for a claim, for the claims
 * tests' observer (never fleetfs's word).
 *
 *   claimpeek URI NAME
 *
 * Prints one line: "consumers C tokens N max T holder COORD" — C the
 * consumers on fleet.claim.NAME (1: held), N the messages in
 * fleet.claimtok.NAME, T the largest token among them and COORD the
 * "coord" of the record beside it (the holder it was granted to; "-"
 * for none), then " agent GID" when the record names the agent that
 * took it.  The token messages are taken with basic.get without ack and
 * given back when the connection closes, so run it only while no take of
 * NAME is under way: a take meanwhile would not see them (doc/claims.md).
 * Exit 0, 2 on usage or connection errors, 4 when a queue is missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>

#include "claimtool.h"

static int fail(const char *what)
{
    fprintf(stderr, "claimpeek: %s\n", what);
    return 2;
}

/* The string field key ("\"coord\":\"") of a record line, in out ("-":
 * none). */
static void field_of(const char *body, size_t len, const char *key, char *out, size_t n)
{
    const char *k = memmem(body, len, key, strlen(key)), *e;
    snprintf(out, n, "-");
    if (!k)
        return;
    k += strlen(key);
    e = memchr(k, '"', len - (size_t)(k - body));
    if (e && (size_t)(e - k) < n)
        snprintf(out, n, "%.*s", (int)(e - k), k);
}

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    const char *err = "";
    amqp_queue_declare_ok_t *ok;
    char q[300], holder[128] = "-", agent[160] = "-";
    unsigned long long max = 0, n = 0;
    unsigned consumers;

    if (argc != 3)
        return fail("usage: claimpeek URI NAME");
    c = claim_tool_open(argv[1], &err);
    if (!c)
        return fail(err);
    amqp_channel_open(c, 1);
    snprintf(q, sizeof q, "fleet.claim.%s", argv[2]);
    ok = amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
    if (!ok) { /* the channel is closed (404): the connection goes too */
        printf("no such claim\n");
        amqp_destroy_connection(c);
        return 4;
    }
    consumers = ok->consumer_count;
    snprintf(q, sizeof q, "fleet.claimtok.%s", argv[2]);
    for (;;) {
        amqp_rpc_reply_t rep = amqp_basic_get(c, 1, amqp_cstring_bytes(q), 0);
        amqp_message_t m;
        char digits[24];
        unsigned long long t;
        const char *nl;
        if (rep.reply_type != AMQP_RESPONSE_NORMAL)
            return fail("basic.get failed");
        if (rep.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        if (amqp_read_message(c, 1, &m, 0).reply_type != AMQP_RESPONSE_NORMAL)
            return fail("cannot read a token message");
        snprintf(digits, sizeof digits, "%.*s", (int)(m.body.len < 23 ? m.body.len : 23),
                 (const char *)m.body.bytes);
        t = strtoull(digits, NULL, 10);
        n++;
        if (t >= max) {
            max = t;
            nl = memchr(m.body.bytes, '\n', m.body.len);
            if (nl) {
                size_t rest = m.body.len - (size_t)(nl - (const char *)m.body.bytes);
                field_of(nl, rest, "\"coord\":\"", holder, sizeof holder);
                field_of(nl, rest, "\"agent\":\"", agent, sizeof agent);
            }
        }
        amqp_destroy_message(&m);
    }
    printf("consumers %u tokens %llu max %llu holder %s%s%s\n", consumers, n, max, holder,
           strcmp(agent, "-") ? " agent " : "", strcmp(agent, "-") ? agent : "");
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    return 0;
}
