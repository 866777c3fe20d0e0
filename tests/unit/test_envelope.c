/* SPDX-License-Identifier: Apache-2.0 */
/* test_envelope.c — the wire envelope: exact encoding, round trips, every
 * refusal the decoder promises (with its reason), RFC 3339 times, the
 * signing byte string, the inbox line, and a small deterministic mutation
 * fuzz that must never crash or leak. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleetfs/wire/envelope.h"

#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"
#define T1 "2026-11-29T09:27:41.123Z"
#define T2 "2026-12-06T09:27:41.123Z"
#define MAXB 65536

static void make_coord(envelope *e, const char *body)
{
    memset(e, 0, sizeof(*e));
    e->v = 1;
    strcpy(e->type, "coord");
    strcpy(e->msgId, ID1);
    strcpy(e->from, "mac");
    strcpy(e->to, "fleet01");
    strcpy(e->sentAt, T1);
    strcpy(e->expiresAt, T2);
    e->body = strdup(body);
    e->body_len = strlen(body);
}

static void make_receipt(envelope *e)
{
    memset(e, 0, sizeof(*e));
    e->v = 1;
    strcpy(e->type, "receipt");
    strcpy(e->msgId, ID2);
    strcpy(e->from, "fleet01");
    strcpy(e->to, "mac");
    strcpy(e->sentAt, T1);
    strcpy(e->expiresAt, T2);
    strcpy(e->ref, ID1);
    strcpy(e->state, "injected");
    strcpy(e->detail, "typed into pane w1:p2");
}

static void assert_same(const envelope *a, const envelope *b)
{
    assert_int_equal(a->v, b->v);
    assert_string_equal(a->type, b->type);
    assert_string_equal(a->msgId, b->msgId);
    assert_string_equal(a->from, b->from);
    assert_string_equal(a->to, b->to);
    assert_string_equal(a->sentAt, b->sentAt);
    assert_string_equal(a->expiresAt, b->expiresAt);
    assert_string_equal(a->replyTo, b->replyTo);
    assert_string_equal(a->ref, b->ref);
    assert_string_equal(a->state, b->state);
    assert_string_equal(a->detail, b->detail);
    assert_string_equal(a->sig, b->sig);
    assert_int_equal(a->body_len, b->body_len);
    assert_memory_equal(a->body ? a->body : "", b->body, a->body_len);
}

/* Encodes e, checks the exact text when want != NULL, decodes it back. */
static void round_trip(const envelope *e, const char *want)
{
    envelope d;
    char why[128];
    size_t len = 0;
    char *js = env_encode(e, &len);

    assert_non_null(js);
    assert_int_equal(len, strlen(js));
    assert_null(strchr(js, '\n'));
    if (want != NULL)
        assert_string_equal(js, want);
    assert_int_equal(env_decode(js, len, MAXB, &d, why, sizeof(why)), 0);
    assert_string_equal(why, "");
    assert_same(e, &d);
    env_free(&d);
    free(js);
}

static void test_round_trip_coord(void **state)
{
    envelope e;

    (void)state;
    make_coord(&e, "I take the parser, you take codegen");
    round_trip(&e, "{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"mac\","
                   "\"to\":\"fleet01\",\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                   "\"body\":\"I take the parser, you take codegen\"}");
    strcpy(e.replyTo, ID2);
    strcpy(e.sig, "c2lnbmF0dXJl+/==");
    round_trip(&e, "{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"mac\","
                   "\"to\":\"fleet01\",\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                   "\"replyTo\":\"" ID2 "\",\"body\":\"I take the parser, you take codegen\","
                   "\"sig\":\"c2lnbmF0dXJl+/==\"}");
    env_free(&e);
    env_free(&e); /* idempotent */
    assert_null(e.body);
}

static void test_round_trip_receipt(void **state)
{
    envelope e;

    (void)state;
    make_receipt(&e);
    round_trip(&e, "{\"v\":1,\"type\":\"receipt\",\"msgId\":\"" ID2 "\",\"from\":\"fleet01\","
                   "\"to\":\"mac\",\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                   "\"ref\":\"" ID1 "\",\"state\":\"injected\","
                   "\"detail\":\"typed into pane w1:p2\"}");
    e.detail[0] = '\0';
    strcpy(e.state, "rejected");
    round_trip(&e, NULL);
}

static void test_round_trip_unicode(void **state)
{
    envelope e;
    char *js;

    (void)state;
    make_coord(&e, "caf\xc3\xa9 \xf0\x9f\x9a\x80 \xe4\xb8\xad\xe6\x96\x87\n"
                   "line 2\t\"quoted\" back\\slash / \x01\x1b[31m");
    round_trip(&e, NULL);
    js = env_encode(&e, NULL);
    /* Non-ASCII stays raw UTF-8; control characters are escaped. */
    assert_non_null(strstr(js, "caf\xc3\xa9 \xf0\x9f\x9a\x80"));
    assert_non_null(strstr(js, "\\n"));
    assert_non_null(strcasestr(js, "\\u001b"));
    assert_null(strchr(js, '\x1b'));
    free(js);
    env_free(&e);
}

static void test_encode_refuses_bad_body(void **state)
{
    envelope e;

    (void)state;
    make_coord(&e, "ok");
    memcpy(e.body, "\xff", 2);
    e.body_len = 1;
    assert_null(env_encode(&e, NULL));
    memcpy(e.body, "a\0", 2);
    e.body_len = 2;
    assert_null(env_encode(&e, NULL));
    env_free(&e);
}

/* ---- refusals ----------------------------------------------------------- */

static void reject_n(const char *js, size_t len, size_t max, const char *reason)
{
    envelope d;
    char why[128] = "unchanged";

    d.body = (char *)"garbage";
    if (env_decode(js, len, max, &d, why, sizeof(why)) != -1)
        fail_msg("accepted: %.200s", js);
    assert_null(d.body);
    assert_true(strlen(why) > 0);
    if (strstr(why, reason) == NULL)
        fail_msg("reason '%s' lacks '%s' for %.200s", why, reason, js);
}

static void reject(const char *js, const char *reason)
{
    reject_n(js, strlen(js), MAXB, reason);
}

#define HEAD "\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"mac\",\"to\":\"fleet01\""
#define TIMES "\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\""
#define GOOD "{" HEAD "," TIMES ",\"body\":\"hi\"}"
#define RHEAD                                                                         \
    "\"v\":1,\"type\":\"receipt\",\"msgId\":\"" ID2 "\",\"from\":\"fleet01\",\"to\":" \
    "\"mac\"," TIMES

static void test_decode_good_baseline(void **state)
{
    envelope d;
    char why[64];

    (void)state;
    assert_int_equal(env_decode(GOOD, strlen(GOOD), MAXB, &d, why, sizeof(why)), 0);
    assert_string_equal(d.body, "hi");
    assert_int_equal(d.body_len, 2);
    assert_string_equal(d.replyTo, "");
    env_free(&d);
    /* Unknown keys are ignored (forward compatibility); offsets accepted. */
    {
        const char *js = "{" HEAD ",\"sentAt\":\"2026-11-29T10:27:41.123456+01:00\","
                         "\"expiresAt\":\"" T2 "\",\"body\":\"x\",\"extra\":[1,{}]}";
        assert_int_equal(env_decode(js, strlen(js), MAXB, &d, why, sizeof(why)), 0);
        env_free(&d);
    }
}

static void test_decode_rejects_structure(void **state)
{
    (void)state;
    reject("", "not JSON");
    reject("hello", "not JSON");
    reject("{", "not JSON");
    reject(GOOD "x", "not JSON");
    reject("[1,2]", "not a JSON object");
    reject("\"str\"", "not JSON");
    reject("null", "not JSON");
    reject("{}", "missing field v");
    reject("{\"v\":2,\"type\":\"coord\"}", "v must be 1");
    reject("{\"v\":\"1\",\"type\":\"coord\"}", "v must be 1");
    reject("{\"v\":1.0,\"type\":\"coord\"}", "v must be 1");
    reject("{\"v\":1,\"type\":\"chat\"}", "type");
    reject("{\"v\":1,\"type\":3}", "type is not a string");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"msgId\":\"" ID2 "\"}",
           "key given twice"); /* duplicate key: said so, not "not JSON" */
    reject_n(GOOD, 0, MAXB, "not JSON");
    reject_n(NULL, 0, MAXB, "not JSON");
}

static void test_decode_rejects_truncated(void **state)
{
    size_t n;

    (void)state;
    for (n = 0; n < strlen(GOOD); n++)
        reject_n(GOOD, n, MAXB, "");
}

static void test_decode_rejects_fields(void **state)
{
    (void)state;
    reject("{\"v\":1,\"type\":\"coord\",\"from\":\"mac\",\"to\":\"x\"," TIMES ",\"body\":\"b\"}",
           "missing field msgId");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"0123456789ABCDEF0123456789abcdef\","
           "\"from\":\"mac\",\"to\":\"x\"," TIMES ",\"body\":\"b\"}",
           "msgId is not 32 hex digits");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"0123456789abcdef0123456789abcde\","
           "\"from\":\"mac\",\"to\":\"x\"," TIMES ",\"body\":\"b\"}",
           "msgId is not 32 hex digits");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"0123456789abcdef0123456789abcdef0\","
           "\"from\":\"mac\",\"to\":\"x\"," TIMES ",\"body\":\"b\"}",
           "msgId is too long");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":42,"
           "\"from\":\"mac\",\"to\":\"x\"," TIMES ",\"body\":\"b\"}",
           "msgId is not a string");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"to\":\"x\"," TIMES
           ",\"body\":\"b\"}",
           "missing field from");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"Mac\",\"to\":\"x\"," TIMES
           ",\"body\":\"b\"}",
           "from is not a valid lead name");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1
           "\",\"from\":\"mac\",\"to\":\"../x\"," TIMES ",\"body\":\"b\"}",
           "to is not a valid lead name");
    reject("{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"mac\",\"to\":null," TIMES
           ",\"body\":\"b\"}",
           "to is not a string");
    reject("{" HEAD ",\"sentAt\":\"2026-13-01T00:00:00Z\",\"expiresAt\":\"" T2 "\",\"body\":\"b\"}",
           "sentAt is not RFC 3339");
    reject("{" HEAD ",\"sentAt\":\"yesterday\",\"expiresAt\":\"" T2 "\",\"body\":\"b\"}",
           "sentAt is not RFC 3339");
    reject("{" HEAD ",\"sentAt\":\"" T1 "\",\"expiresAt\":1795944461123,\"body\":\"b\"}",
           "expiresAt is not a string");
    reject("{" HEAD ",\"sentAt\":\"" T1 "\",\"body\":\"b\"}", "missing field expiresAt");
    reject("{" HEAD "," TIMES ",\"replyTo\":\"\",\"body\":\"b\"}", "replyTo is not 32 hex digits");
    reject("{" HEAD "," TIMES ",\"replyTo\":\"xyz\",\"body\":\"b\"}",
           "replyTo is not 32 hex digits");
    reject("{" HEAD "," TIMES ",\"replyTo\":5,\"body\":\"b\"}", "replyTo is not a string");
    reject("{" HEAD "," TIMES ",\"body\":\"b\",\"sig\":\"<script>\"}", "sig is not base64");
    reject("{" HEAD "," TIMES ",\"body\":\"b\",\"ref\":\"" ID2 "\"}",
           "ref is only allowed in receipts");
    reject("{" HEAD "," TIMES ",\"from\":\"x\",\"body\":\"b\"}",
           "key given twice"); /* duplicate from */
}

static void test_decode_rejects_body(void **state)
{
    char *big, *js;
    size_t n = 1024 * 1024, i;

    (void)state;
    reject("{" HEAD "," TIMES "}", "missing field body");
    reject("{" HEAD "," TIMES ",\"body\":\"\"}", "body is empty");
    reject("{" HEAD "," TIMES ",\"body\":7}", "body is not a string");
    reject("{" HEAD "," TIMES ",\"body\":[\"a\"]}", "body is not a string");
    reject("{" HEAD "," TIMES ",\"body\":\"a\\u0000b\"}", "body contains a NUL");
    reject("{" HEAD "," TIMES ",\"body\":\"\\ud800\"}", "not JSON"); /* lone surrogate */
    /* raw invalid UTF-8 bytes inside the JSON string */
    reject("{" HEAD "," TIMES ",\"body\":\"ab\xff\xfe\"}", "UTF-8");
    reject("{" HEAD "," TIMES ",\"body\":\"\xc0\xaf\"}", "UTF-8");
    reject("{" HEAD "," TIMES ",\"body\":\"\xed\xa0\x80\"}", "UTF-8");
    {
        static const char raw[] = "{" HEAD "," TIMES ",\"body\":\"a\0b\"}";

        reject_n(raw, sizeof(raw) - 1, MAXB, "not JSON");
    }
    reject("{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"acked\",\"detail\":\"a\\u0000\"}",
           "detail contains a NUL");

    /* 1 MiB body, max 64 KiB: refused by size */
    big = malloc(n + 1);
    memset(big, 'x', n);
    big[n] = '\0';
    js = malloc(n + 512);
    sprintf(js, "{" HEAD "," TIMES ",\"body\":\"%s\"}", big);
    reject_n(js, strlen(js), MAXB, "larger than max_message");
    /* exactly max is accepted, one more byte is not (past the early check) */
    for (i = 0; i < 2; i++) {
        envelope d;
        char why[128];

        big[MAXB + i] = '\0';
        sprintf(js, "{" HEAD "," TIMES ",\"body\":\"%s\"}", big);
        if (i == 0) {
            assert_int_equal(env_decode(js, strlen(js), MAXB, &d, why, sizeof(why)), 0);
            assert_int_equal(d.body_len, MAXB);
            env_free(&d);
        } else {
            reject_n(js, strlen(js), MAXB, "body larger than max_message");
        }
        big[MAXB + i] = 'x';
    }
    free(js);
    free(big);
}

static void test_decode_receipts(void **state)
{
    envelope d;
    char why[128];
    const char *ok = "{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"acked\"}";

    (void)state;
    assert_int_equal(env_decode(ok, strlen(ok), MAXB, &d, why, sizeof(why)), 0);
    assert_string_equal(d.ref, ID1);
    assert_string_equal(d.state, "acked");
    assert_string_equal(d.detail, "");
    assert_non_null(d.body);
    assert_int_equal(d.body_len, 0);
    env_free(&d);
    {
        /* the unsigned detail keeps its words but no control character */
        const char *esc = "{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                          "\"detail\":\"typed\\u001b[2J\\nstate: injected\\u0085\"}";
        assert_int_equal(env_decode(esc, strlen(esc), MAXB, &d, why, sizeof(why)), 0);
        assert_string_equal(d.detail, "typed?[2J?state: injected??");
        env_free(&d);
    }
    reject("{" RHEAD ",\"state\":\"acked\"}", "missing field ref");
    reject("{" RHEAD ",\"ref\":\"" ID1 "\"}", "missing field state");
    reject("{" RHEAD ",\"ref\":\"nothex\",\"state\":\"acked\"}", "ref is not 32 hex digits");
    reject("{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"published\"}",
           "state is not a receipt state");
    reject("{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":true}", "state is not a string");
    reject("{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"acked\",\"detail\":3}",
           "detail is not a string");
}

/* ---- agents and groups (SPEC section 10) --------------------------------- */

#define GID96                           \
    "abcdefghijklmnopqrstuvwxyz012345@" \
    "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"
#define AHEAD(from, to) \
    "\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"" from "\",\"to\":\"" to "\""

static void accept_js(const char *js, envelope *d)
{
    char why[128];

    if (env_decode(js, strlen(js), MAXB, d, why, sizeof(why)) != 0)
        fail_msg("refused (%s): %.300s", why, js);
}

static void test_agent_and_group_addresses(void **state)
{
    envelope e, d;

    (void)state;
    /* an agent sends to an agent, exact text */
    make_coord(&e, "build it");
    strcpy(e.from, "w1@mac");
    strcpy(e.to, "w2@fleet01");
    round_trip(&e, "{\"v\":1,\"type\":\"coord\",\"msgId\":\"" ID1 "\",\"from\":\"w1@mac\","
                   "\"to\":\"w2@fleet01\",\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                   "\"body\":\"build it\"}");
    /* a broadcast, and the longest ids */
    strcpy(e.to, "group:build");
    round_trip(&e, NULL);
    strcpy(e.to, "group:all");
    round_trip(&e, NULL);
    strcpy(e.from, GID96);
    strcpy(e.to, GID96);
    round_trip(&e, NULL);
    env_free(&e);

    accept_js("{" AHEAD("mac", "w1@fleet01") "," TIMES ",\"body\":\"b\"}", &d);
    assert_string_equal(d.to, "w1@fleet01");
    env_free(&d);
    accept_js("{" AHEAD("w1@mac", "fleet01") "," TIMES ",\"body\":\"b\"}", &d);
    assert_string_equal(d.from, "w1@mac");
    env_free(&d);

    /* still refused: anything that is not an id (from) or an address (to) */
    reject("{" AHEAD("group:build", "fleet01") "," TIMES ",\"body\":\"b\"}",
           "from is not a valid lead name");
    reject("{" AHEAD("w1@mac@x", "fleet01") "," TIMES ",\"body\":\"b\"}",
           "from is not a valid lead name");
    reject("{" AHEAD("@mac", "fleet01") "," TIMES ",\"body\":\"b\"}", "from is not");
    reject("{" AHEAD("W1@mac", "fleet01") "," TIMES ",\"body\":\"b\"}", "from is not");
    reject("{" AHEAD("a" GID96, "fleet01") "," TIMES ",\"body\":\"b\"}", "from is too long");
    reject("{" AHEAD("mac", "group:") "," TIMES ",\"body\":\"b\"}", "to is not a valid lead name");
    reject("{" AHEAD("mac", "group:Build") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "group:a.b") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "group:w1@mac") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "w1@") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "w1@fleet01@x") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "w\\u00e9@fleet01") "," TIMES ",\"body\":\"b\"}", "to is not");
    reject("{" AHEAD("mac", "w1\\u0000@fleet01") "," TIMES ",\"body\":\"b\"}", "to contains a NUL");
    reject("{" AHEAD("mac", "a" GID96) "," TIMES ",\"body\":\"b\"}", "to is too long");
    /* a recipient belongs to receipts only */
    reject("{" HEAD "," TIMES ",\"body\":\"b\",\"recipient\":\"fleet01\"}",
           "recipient is only allowed in receipts");
}

#define RECEIPT_TO(to)                                                                     \
    "\"v\":1,\"type\":\"receipt\",\"msgId\":\"" ID2 "\",\"from\":\"fleet01\",\"to\":\"" to \
    "\"," TIMES

static void test_receipt_recipient(void **state)
{
    envelope e, d;

    (void)state;
    /* a lead's own receipt: no recipient on the wire, recipient = from */
    make_receipt(&e);
    assert_string_equal(env_receipt_recipient(&e), "fleet01");
    /* an agent's receipt names it, between state and detail */
    strcpy(e.recipient, "w1@fleet01");
    strcpy(e.to, "w9@mac"); /* about a message agent w9 sent */
    round_trip(&e, "{\"v\":1,\"type\":\"receipt\",\"msgId\":\"" ID2 "\",\"from\":\"fleet01\","
                   "\"to\":\"w9@mac\",\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                   "\"ref\":\"" ID1 "\",\"state\":\"injected\",\"recipient\":\"w1@fleet01\","
                   "\"detail\":\"typed into pane w1:p2\"}");
    assert_string_equal(env_receipt_recipient(&e), "w1@fleet01");

    accept_js("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                    "\"recipient\":\"w1@fleet01\"}",
              &d);
    assert_string_equal(d.recipient, "w1@fleet01");
    assert_string_equal(env_receipt_recipient(&d), "w1@fleet01");
    env_free(&d);
    accept_js("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\"}", &d);
    assert_string_equal(d.recipient, "");
    assert_string_equal(env_receipt_recipient(&d), "fleet01");
    env_free(&d);

    /* the recipient lives on the sending host, and is an id */
    reject("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                 "\"recipient\":\"w1@mac\"}",
           "recipient does not live on the host of from");
    reject("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                 "\"recipient\":\"other\"}",
           "recipient does not live on the host of from");
    reject("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                 "\"recipient\":\"group:all\"}",
           "recipient is not a valid lead name or agent id");
    reject("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                 "\"recipient\":\"\"}",
           "recipient is not a valid lead name or agent id");
    reject("{" RECEIPT_TO("mac") ",\"ref\":\"" ID1 "\",\"state\":\"acked\","
                                 "\"recipient\":7}",
           "recipient is not a string");
    /* a receipt is about one entity's message: never to a group */
    reject("{" RECEIPT_TO("group:all") ",\"ref\":\"" ID1 "\",\"state\":\"acked\"}",
           "to is not a valid lead name or agent id");
}

/* Deterministic mutation fuzz: flip, drop and insert bytes of valid
 * envelopes. Must never crash (ASan run) and never report success with a
 * NULL body or failure with a body. */
static void test_decode_mutations(void **state)
{
    const char *seeds[] = {GOOD, "{" RHEAD ",\"ref\":\"" ID1 "\",\"state\":\"acked\"}"};
    const char junk[] = "\"{}[]:,\\u0\xff\xc3\x80 9e-";
    uint32_t rng = 12345;
    size_t s, k;

    (void)state;
    for (s = 0; s < 2; s++) {
        size_t n = strlen(seeds[s]);
        char *buf = malloc(n + 8);

        for (k = 0; k < 20000; k++) {
            envelope d;
            char why[64];
            size_t len = n, pos;
            int r;

            memcpy(buf, seeds[s], n);
            rng = rng * 1103515245u + 12345u;
            pos = (rng >> 8) % n;
            switch ((rng >> 4) % 3) {
            case 0:
                buf[pos] = junk[(rng >> 20) % (sizeof(junk) - 1)];
                break;
            case 1:
                memmove(buf + pos, buf + pos + 1, n - pos - 1);
                len--;
                break;
            default:
                memmove(buf + pos + 1, buf + pos, n - pos);
                buf[pos] = junk[(rng >> 20) % (sizeof(junk) - 1)];
                len++;
            }
            r = env_decode(buf, len, 64, &d, why, sizeof(why));
            if (r == 0) {
                assert_non_null(d.body);
                assert_true(d.body_len <= 64);
            } else {
                assert_int_equal(r, -1);
                assert_null(d.body);
            }
            env_free(&d);
        }
        free(buf);
    }
}

/* ---- time --------------------------------------------------------------- */

static void test_time_format(void **state)
{
    char out[40];

    (void)state;
    env_time_format(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    env_time_format(1795944461123LL, out);
    assert_string_equal(out, "2026-11-29T09:27:41.123Z");
    env_time_format(1709251199999LL, out);
    assert_string_equal(out, "2024-02-29T23:59:59.999Z");
    env_time_format(-1, out);
    assert_string_equal(out, "1969-12-31T23:59:59.999Z");
}

static void test_time_parse(void **state)
{
    int64_t ms = 0;

    (void)state;
    assert_int_equal(env_time_parse("2026-11-29T09:27:41.123Z", &ms), 0);
    assert_int_equal(ms, 1795944461123LL);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41Z", &ms), 0);
    assert_int_equal(ms, 1795944461000LL);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41.1Z", &ms), 0);
    assert_int_equal(ms, 1795944461100LL);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41.123999999Z", &ms), 0);
    assert_int_equal(ms, 1795944461123LL);
    assert_int_equal(env_time_parse("2026-11-29T10:27:41.123+01:00", &ms), 0);
    assert_int_equal(ms, 1795944461123LL);
    assert_int_equal(env_time_parse("2026-11-29T04:57:41.123-04:30", &ms), 0);
    assert_int_equal(ms, 1795944461123LL);
    assert_int_equal(env_time_parse("2026-11-29t09:27:41.123z", &ms), 0);
    assert_int_equal(ms, 1795944461123LL);
    assert_int_equal(env_time_parse("2024-02-29T00:00:00Z", &ms), 0);
    assert_int_equal(env_time_parse("2000-02-29T00:00:00Z", &ms), 0);

    assert_int_equal(env_time_parse(NULL, &ms), -1);
    assert_int_equal(env_time_parse("", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41", &ms), -1); /* no offset */
    assert_int_equal(env_time_parse("2026-11-29 09:27:41Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41.Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41ZZ", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41+0100", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T24:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:60:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-00-10T00:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-02-30T00:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2023-02-29T00:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("1900-02-29T00:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-04-31T00:00:00Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-11-29T09:27:41+24:00", &ms), -1);
    assert_int_equal(env_time_parse("+2026-11-29T09:27:41Z", &ms), -1);
    assert_int_equal(env_time_parse("2026-1-29T09:27:41Z", &ms), -1);
}

static void test_time_round_trip(void **state)
{
    static const int64_t samples[] = {
        0,
        1,
        999,
        1000,
        86399999,
        86400000,
        951782400000LL,
        1795944461123LL,
        4102444800000LL,
        253402300799999LL,
        -1,
        -86400001,
        -62135596800000LL,
    };
    char out[40];
    int64_t ms, now = env_now_ms();
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        env_time_format(samples[i], out);
        assert_int_equal(env_time_parse(out, &ms), 0);
        assert_int_equal(ms, samples[i]);
    }
    /* now: after 2024, and round-trips */
    assert_true(now > 1704067200000LL);
    env_time_format(now, out);
    assert_int_equal(strlen(out), 24);
    assert_int_equal(env_time_parse(out, &ms), 0);
    assert_int_equal(ms, now);
}

/* ---- ids, signing, inbox line ------------------------------------------- */

static void test_msgid(void **state)
{
    char a[ENV_ID_LEN + 1], b[ENV_ID_LEN + 1];

    (void)state;
    memset(a, 'Z', sizeof(a));
    env_new_msgid(a);
    env_new_msgid(b);
    assert_int_equal(strlen(a), ENV_ID_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), ENV_ID_LEN);
    assert_true(env_id_valid(a));
    assert_string_not_equal(a, b);
    assert_false(env_id_valid("0123456789abcdef0123456789abcdeF"));
    assert_false(env_id_valid(""));
    assert_false(env_id_valid(NULL));
}

/* msgIds come from a per-thread pool of random bytes (32 ids per draw):
 * ids across several draws are all different, and a forked child does not
 * repeat the ids its parent makes next (it draws afresh). */
static void test_msgid_pool(void **state)
{
    enum { N = 200 };
    static char ids[N][ENV_ID_LEN + 1];
    char parent[ENV_ID_LEN + 1], child[ENV_ID_LEN + 1] = "";
    int p[2], status;
    pid_t pid;

    (void)state;
    for (int i = 0; i < N; i++) {
        env_new_msgid(ids[i]);
        assert_true(env_id_valid(ids[i]));
        for (int j = 0; j < i; j++)
            assert_string_not_equal(ids[i], ids[j]);
    }
    env_new_msgid(parent); /* the pool is part-used when the child forks */
    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        env_new_msgid(child);
        _exit(write(p[1], child, ENV_ID_LEN) == ENV_ID_LEN ? 0 : 1);
    }
    close(p[1]);
    env_new_msgid(parent);
    assert_int_equal(read(p[0], child, ENV_ID_LEN), ENV_ID_LEN);
    child[ENV_ID_LEN] = '\0';
    close(p[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(env_id_valid(child));
    assert_string_not_equal(child, parent);
}

static void sign_bytes(const envelope *e, unsigned char **buf, size_t *len)
{
    assert_int_equal(env_signing_fields(e, buf, len), 0);
    assert_non_null(*buf);
}

static bool sign_equal(const envelope *a, const envelope *b)
{
    unsigned char *x, *y;
    size_t xl, yl;
    bool same;

    sign_bytes(a, &x, &xl);
    sign_bytes(b, &y, &yl);
    same = xl == yl && memcmp(x, y, xl) == 0;
    free(x);
    free(y);
    return same;
}

static void test_signing_layout(void **state)
{
    envelope e;
    unsigned char *buf;
    size_t len;
    static const unsigned char head[] = {
        0, 0, 0,   0,   0,   0,   0,   1, '1', 0, 0, 0, 0, 0, 0,
        0, 5, 'c', 'o', 'o', 'r', 'd', 0, 0,   0, 0, 0, 0, 0, 32,
    };
    static const unsigned char tail[] = {
        0, 0, 0, 0, 0, 0, 0, 0,           /* replyTo, empty */
        0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', /* body */
    };

    (void)state;
    make_coord(&e, "hi");
    sign_bytes(&e, &buf, &len);
    assert_int_equal(len, 9 * 8 + 1 + 5 + 32 + 3 + 7 + 24 + 24 + 0 + 2);
    assert_memory_equal(buf, head, sizeof(head));
    assert_memory_equal(buf + sizeof(head), ID1, 32);
    assert_memory_equal(buf + len - sizeof(tail), tail, sizeof(tail));
    free(buf);
    env_free(&e);

    make_receipt(&e);
    sign_bytes(&e, &buf, &len);
    /* ends with ref then state; detail and sig are not covered */
    assert_memory_equal(buf + len - 8 - 8, "\0\0\0\0\0\0\0\x08injected", 16);
    assert_memory_equal(buf + len - 16 - 32, ID1, 32);
    free(buf);
}

static void test_signing_sensitivity(void **state)
{
    envelope a, b;
    int f;

    (void)state;
    make_coord(&a, "hello");
    make_coord(&b, "hello");
    assert_true(sign_equal(&a, &b));
    /* sig itself is not covered */
    strcpy(b.sig, "AAAA");
    assert_true(sign_equal(&a, &b));
    for (f = 0; f < 10; f++) {
        env_free(&b);
        make_coord(&b, "hello");
        switch (f) {
        case 0:
            b.v = 2;
            break;
        case 1:
            strcpy(b.type, "receipt");
            break;
        case 2:
            b.msgId[0] = '1';
            break;
        case 3:
            strcpy(b.from, "mad");
            break;
        case 4:
            strcpy(b.to, "fleet02");
            break;
        case 5:
            b.sentAt[22] = '4';
            break;
        case 6:
            b.expiresAt[22] = '4';
            break;
        case 7:
            strcpy(b.replyTo, ID2);
            break;
        case 8:
            b.body[4] = 'O';
            break;
        default:
            b.body_len = 4;
            break;
        }
        if (sign_equal(&a, &b))
            fail_msg("field change %d not covered by the signature", f);
    }
    /* moving a byte between adjacent fields changes the bytes (prefixes) */
    env_free(&b);
    make_coord(&b, "hello");
    strcpy(a.from, "ab");
    strcpy(a.to, "c");
    strcpy(b.from, "a");
    strcpy(b.to, "bc");
    assert_false(sign_equal(&a, &b));
    env_free(&a);
    env_free(&b);

    make_receipt(&a);
    make_receipt(&b);
    assert_true(sign_equal(&a, &b));
    strcpy(b.state, "acked");
    assert_false(sign_equal(&a, &b));
    strcpy(b.state, a.state);
    b.ref[31] = '0';
    assert_false(sign_equal(&a, &b));
}

static void test_signing_recipient(void **state)
{
    envelope a, b;
    unsigned char *buf, *old;
    size_t len, oldlen;

    (void)state;
    make_receipt(&a);
    sign_bytes(&a, &old, &oldlen);
    /* with a recipient: the same eleven fields, then the recipient */
    strcpy(a.recipient, "w1@fleet01");
    sign_bytes(&a, &buf, &len);
    assert_int_equal(len, oldlen + 8 + 10);
    assert_memory_equal(buf, old, oldlen);
    assert_memory_equal(buf + oldlen, "\0\0\0\0\0\0\0\x0aw1@fleet01", 18);
    free(buf);
    free(old);
    make_receipt(&b);
    strcpy(b.recipient, "w2@fleet01");
    assert_false(sign_equal(&a, &b));
    b.recipient[0] = '\0';
    assert_false(sign_equal(&a, &b)); /* stripped: not the same bytes */
    /* a coord envelope never signs a recipient (it has none) */
    env_free(&a);
    make_coord(&a, "hi");
    make_coord(&b, "hi");
    strcpy(b.recipient, "x");
    assert_true(sign_equal(&a, &b));
    env_free(&a);
    env_free(&b);
}

static void test_inbox_line(void **state)
{
    envelope e;
    size_t len = 0;
    char *s;

    (void)state;
    make_coord(&e, "hi \"there\"\n\xc3\xa9");
    s = env_inbox_line(&e, "2026-11-29T09:27:42.000Z", false, &len);
    assert_string_equal(s, "{\"msgId\":\"" ID1 "\",\"from\":\"mac\",\"to\":\"fleet01\","
                           "\"sentAt\":\"" T1 "\",\"expiresAt\":\"" T2 "\","
                           "\"receivedAt\":\"2026-11-29T09:27:42.000Z\",\"redelivered\":false,"
                           "\"body\":\"hi \\\"there\\\"\\n\xc3\xa9\"}\n");
    assert_int_equal(len, strlen(s));
    free(s);
    strcpy(e.replyTo, ID2);
    s = env_inbox_line(&e, "2026-11-29T09:27:42.000Z", true, &len);
    assert_non_null(strstr(s, "\"redelivered\":true,"));
    assert_non_null(strstr(s, "\xc3\xa9\",\"replyTo\":\"" ID2 "\"}\n"));
    assert_int_equal(s[len - 1], '\n');
    assert_null(memchr(s, '\n', len - 1));
    free(s);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_coord),
        cmocka_unit_test(test_round_trip_receipt),
        cmocka_unit_test(test_round_trip_unicode),
        cmocka_unit_test(test_encode_refuses_bad_body),
        cmocka_unit_test(test_decode_good_baseline),
        cmocka_unit_test(test_decode_rejects_structure),
        cmocka_unit_test(test_decode_rejects_truncated),
        cmocka_unit_test(test_decode_rejects_fields),
        cmocka_unit_test(test_decode_rejects_body),
        cmocka_unit_test(test_decode_receipts),
        cmocka_unit_test(test_decode_mutations),
        cmocka_unit_test(test_agent_and_group_addresses),
        cmocka_unit_test(test_receipt_recipient),
        cmocka_unit_test(test_time_format),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_time_round_trip),
        cmocka_unit_test(test_msgid),
        cmocka_unit_test(test_msgid_pool),
        cmocka_unit_test(test_signing_layout),
        cmocka_unit_test(test_signing_sensitivity),
        cmocka_unit_test(test_signing_recipient),
        cmocka_unit_test(test_inbox_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
