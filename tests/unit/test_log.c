/* SPDX-License-Identifier: Apache-2.0 */
/* test_log.c — log_clean: text from outside reaches a log line, a status
 * file or a receipt without a control character, and nothing else of it
 * changes; log_line writes one line whatever the message holds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/base/log.h"

static void clean_is(const char *in, const char *want)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", in);
    log_clean(buf);
    assert_string_equal(buf, want);
}

static void test_c0_del_c1(void **state)
{
    (void)state;
    clean_is("w1:p2\x1b]2;pwn\x07", "w1:p2?]2;pwn?");
    clean_is("a\nstate: live\r\tb", "a?state: live??b");
    clean_is("del\x7f end", "del? end");
    clean_is("csi \xc2\x9b"
             "31m nel \xc2\x85",
             "csi ??31m nel ??");
    clean_is("\x01\x1f", "??");
}

static void test_text_unchanged(void **state)
{
    (void)state;
    clean_is("agent beta (w1:p2) is blocked", "agent beta (w1:p2) is blocked");
    clean_is("caf\xc3\xa9 \xc2\xa0nbsp \xe2\x82\xac", "caf\xc3\xa9 \xc2\xa0nbsp \xe2\x82\xac");
    clean_is("", "");
}

/* log_line on a pipe: exactly one line, no ESC, no BEL */
static void test_log_line_one_line(void **state)
{
    int fds[2], saved;
    char out[512] = "";
    ssize_t n;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    fflush(stderr);
    saved = dup(2);
    dup2(fds[1], 2);
    log_warn("pane %s said %s", "w1:p2\x1b[2J", "line one\nstate: live\x07");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    n = read(fds[0], out, sizeof out - 1);
    close(fds[0]);
    assert_true(n > 0);
    out[n] = '\0';
    assert_non_null(strstr(out, "pane w1:p2?[2J said line one state: live?\n"));
    assert_null(strchr(out, '\x1b'));
    assert_null(strchr(out, '\x07'));
    assert_ptr_equal(strchr(out, '\n'), out + n - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c0_del_c1),
        cmocka_unit_test(test_text_unchanged),
        cmocka_unit_test(test_log_line_one_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
