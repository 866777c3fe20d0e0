/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for inj_render: the text typed into the pane.  One header
 * line naming the sender, the msgId, what it answers and the command that
 * replies (with the real mount path, quoted only when it must be), then
 * the sanitised body; nothing a terminal would act on, in either part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "fleetfs/inject/inject.h"

static envelope msg(const char *body, const char *reply_to)
{
    envelope e;
    memset(&e, 0, sizeof e);
    g_strlcpy(e.from, "alpha", sizeof e.from);
    g_strlcpy(e.msgId, "0123456789abcdef0123456789abcdef", sizeof e.msgId);
    g_strlcpy(e.replyTo, reply_to, sizeof e.replyTo);
    e.body = (char *)body;
    e.body_len = strlen(body);
    return e;
}

static void test_header_names_the_reply_command(void **state)
{
    envelope e = msg("review the parser", "");
    char *t = inj_render(&e, "/fleet", NULL);
    (void)state;
    assert_string_equal(t, "[fleet message from alpha, msgId 0123456789abcdef0123456789abcdef - "
                           "reply: echo '...' > "
                           "/fleet/peers/alpha/reply/0123456789abcdef0123456789abcdef]\n"
                           "review the parser");
    g_free(t);
}

/* a short-lived message (an ask's question) says until when it is awaited;
 * one that lives longer than an hour does not */
static void test_short_life_says_reply_by(void **state)
{
    envelope e = msg("which parser?", "");
    char *t;
    (void)state;
    g_strlcpy(e.sentAt, "2026-12-04T13:00:00.000Z", sizeof e.sentAt);
    g_strlcpy(e.expiresAt, "2026-12-04T13:02:00.000Z", sizeof e.expiresAt);
    t = inj_render(&e, "/fleet", NULL);
    assert_string_equal(t, "[fleet message from alpha, msgId 0123456789abcdef0123456789abcdef - "
                           "reply by 2026-12-04T13:02:00.000Z: echo '...' > "
                           "/fleet/peers/alpha/reply/0123456789abcdef0123456789abcdef]\n"
                           "which parser?");
    g_free(t);
    g_strlcpy(e.expiresAt, "2026-12-04T14:00:00.001Z", sizeof e.expiresAt);
    t = inj_render(&e, "/fleet", NULL);
    assert_non_null(strstr(t, " - reply: echo"));
    g_free(t);
}

static void test_in_reply_to_and_a_path_that_needs_quoting(void **state)
{
    envelope e = msg("done", "ffffffffffffffffffffffffffffffff");
    char *t = inj_render(&e, "/home/me/my fleet", NULL);
    (void)state;
    assert_non_null(strstr(t, ", in reply to ffffffffffffffffffffffffffffffff - reply: "));
    assert_non_null(strstr(t, "> '/home/me/my fleet/peers/alpha/reply/"));
    assert_int_equal(strchr(t, '\n') - t, strcspn(t, "\n")); /* one header line */
    g_free(t);
}

static void test_a_hostile_mount_path_stays_one_inert_line(void **state)
{
    envelope e = msg("x\033[2Jy", "");
    char *t = inj_render(&e, "/tmp/a\nb\033]0;pwn\007", NULL);
    char *nl = strchr(t, '\n');
    (void)state;
    assert_non_null(nl);
    assert_null(strchr(nl + 1, '\n'));
    for (const char *c = t; *c; c++)
        assert_false((unsigned char)*c < 0x20 && *c != '\n');
    assert_non_null(strstr(nl + 1, "xy"));
    g_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_names_the_reply_command),
        cmocka_unit_test(test_short_life_says_reply_by),
        cmocka_unit_test(test_in_reply_to_and_a_path_that_needs_quoting),
        cmocka_unit_test(test_a_hostile_mount_path_stays_one_inert_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
