/* SPDX-License-Identifier: Apache-2.0 */
/* test_death.c — what a dead letter's headers say (broker/death.h): the
 * latest death of x-death (RabbitMQ's and LavinMQ's shape: an array of
 * tables, newest first, time a timestamp, count a long), the sender's
 * fleet-host header, the message_id; x-first-death-* when x-death is
 * missing; odd kinds and bytes ignored, never a crash; and the words. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "broker/death.h"

static amqp_table_entry_t str_entry(const char *k, const char *v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(k);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(v);
    return e;
}

static amqp_table_entry_t kind_entry(const char *k, uint8_t kind, uint64_t v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(k);
    e.value.kind = kind;
    e.value.value.u64 = v;
    if (kind == AMQP_FIELD_KIND_I64)
        e.value.value.i64 = (int64_t)v;
    return e;
}

/* props with headers h (n entries) and message_id id (NULL: none) */
static amqp_basic_properties_t props_of(amqp_table_entry_t *h, int n, const char *id)
{
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof p);
    if (h) {
        p._flags |= AMQP_BASIC_HEADERS_FLAG;
        p.headers.num_entries = n;
        p.headers.entries = h;
    }
    if (id) {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = amqp_cstring_bytes(id);
    }
    return p;
}

static void test_latest_death_wins(void **state)
{
    /* two deaths: the newest (first) is the rejection in beta's mailbox */
    amqp_table_entry_t newest[] = {
        kind_entry("count", AMQP_FIELD_KIND_I64, 2), str_entry("reason", "rejected"),
        str_entry("queue", "lead.beta.inbox"),
        kind_entry("time", AMQP_FIELD_KIND_TIMESTAMP, 1796389262), str_entry("exchange", "")};
    amqp_table_entry_t older[] = {str_entry("reason", "expired"),
                                  str_entry("queue", "lead.gamma.inbox")};
    amqp_field_value_t deaths[2];
    amqp_table_entry_t h[3];
    amqp_basic_properties_t p;
    br_death d;
    char words[256];
    (void)state;
    deaths[0].kind = deaths[1].kind = AMQP_FIELD_KIND_TABLE;
    deaths[0].value.table = (amqp_table_t){5, newest};
    deaths[1].value.table = (amqp_table_t){2, older};
    h[0] = str_entry("fleet-host", "alpha");
    h[1].key = amqp_cstring_bytes("x-death");
    h[1].value.kind = AMQP_FIELD_KIND_ARRAY;
    h[1].value.value.array = (amqp_array_t){2, deaths};
    h[2] = str_entry("x-first-death-reason", "expired");
    p = props_of(h, 3, "0123456789abcdef0123456789abcdef");
    br_death_parse(&p, &d);
    assert_string_equal(d.reason, "rejected");
    assert_string_equal(d.queue, "lead.beta.inbox");
    assert_int_equal(d.count, 2);
    assert_int_equal(d.time_s, 1796389262);
    assert_string_equal(d.host, "alpha");
    assert_string_equal(d.msg_id, "0123456789abcdef0123456789abcdef");
    br_death_words(&d, words, sizeof words);
    assert_string_equal(words, "rejected by the reader of lead.beta.inbox at 2026-12-04T13:01:02Z");
}

static void test_expired_words_and_int_kinds(void **state)
{
    /* LavinMQ's count may come as a smaller integer kind */
    amqp_table_entry_t t[] = {str_entry("queue", "agent.w1@beta.inbox"),
                              str_entry("reason", "expired"),
                              kind_entry("count", AMQP_FIELD_KIND_I32, 0)};
    amqp_field_value_t one;
    amqp_table_entry_t h[1];
    amqp_basic_properties_t p;
    br_death d;
    char words[256];
    (void)state;
    t[2].value.value.i32 = 1;
    one.kind = AMQP_FIELD_KIND_TABLE;
    one.value.table = (amqp_table_t){3, t};
    h[0].key = amqp_cstring_bytes("x-death");
    h[0].value.kind = AMQP_FIELD_KIND_ARRAY;
    h[0].value.value.array = (amqp_array_t){1, &one};
    p = props_of(h, 1, NULL);
    br_death_parse(&p, &d);
    assert_int_equal(d.count, 1);
    assert_int_equal(d.time_s, 0);
    assert_string_equal(d.host, "");
    assert_string_equal(d.msg_id, "");
    br_death_words(&d, words, sizeof words);
    assert_string_equal(words, "expired in agent.w1@beta.inbox (unread past its lifetime)");
}

static void test_first_death_when_no_x_death(void **state)
{
    amqp_table_entry_t h[] = {str_entry("x-first-death-queue", "lead.beta.inbox"),
                              str_entry("x-first-death-reason", "maxlen")};
    amqp_basic_properties_t p = props_of(h, 2, NULL);
    br_death d;
    char words[256];
    (void)state;
    br_death_parse(&p, &d);
    assert_string_equal(d.reason, "maxlen");
    assert_string_equal(d.queue, "lead.beta.inbox");
    br_death_words(&d, words, sizeof words);
    assert_string_equal(words, "maxlen: dropped from lead.beta.inbox (the queue was full)");
}

static void test_nothing_or_nonsense(void **state)
{
    /* no headers; x-death of the wrong kinds; a header value with a
     * control character (cut there); a table instead of an array */
    amqp_table_entry_t bad[] = {kind_entry("x-death", AMQP_FIELD_KIND_I64, 5),
                                str_entry("fleet-host", "alp\nha"),
                                kind_entry("reason", AMQP_FIELD_KIND_BOOLEAN, 1)};
    amqp_field_value_t notable;
    amqp_table_entry_t h2[1];
    amqp_basic_properties_t p = props_of(NULL, 0, NULL);
    br_death d;
    char words[256];
    (void)state;
    br_death_parse(&p, &d);
    assert_string_equal(d.reason, "");
    assert_string_equal(d.queue, "");
    br_death_words(&d, words, sizeof words);
    assert_string_equal(words, "dead-lettered from an unnamed queue (the broker gave no reason)");
    p = props_of(bad, 3, NULL);
    br_death_parse(&p, &d);
    assert_string_equal(d.host, "alp");
    assert_string_equal(d.reason, "");
    notable.kind = AMQP_FIELD_KIND_UTF8;
    notable.value.bytes = amqp_cstring_bytes("x");
    h2[0].key = amqp_cstring_bytes("x-death");
    h2[0].value.kind = AMQP_FIELD_KIND_ARRAY;
    h2[0].value.value.array = (amqp_array_t){1, &notable};
    p = props_of(h2, 1, NULL);
    br_death_parse(&p, &d);
    assert_string_equal(d.reason, "");
    br_death_parse(NULL, &d);
    assert_string_equal(d.queue, "");
}

static void test_dead_queue_name(void **state)
{
    char q[64];
    (void)state;
    br_dead_queue("alpha", q, sizeof q);
    assert_string_equal(q, "lead.alpha.dead");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latest_death_wins),
        cmocka_unit_test(test_expired_words_and_int_kinds),
        cmocka_unit_test(test_first_death_when_no_x_death),
        cmocka_unit_test(test_nothing_or_nonsense),
        cmocka_unit_test(test_dead_queue_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
