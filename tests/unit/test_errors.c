/* SPDX-License-Identifier: Apache-2.0 */
/* test_errors.c — the failure table: every code's errno as SPEC section 5
 * fixes it, unique tokens, real hints, and out-of-range codes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "fleetfs/base/errors.h"
#include "fleetfs/os/os.h"

static void test_errno_table(void **state)
{
    static const struct {
        fe_code c;
        int err;
    } want[] = {
        {FE_OK, 0},
        {FE_EMPTY, EINVAL},
        {FE_BAD_UTF8, EINVAL},
        {FE_TOO_BIG, EMSGSIZE},
        {FE_NO_PEER, ENOENT},
        {FE_NOT_CONNECTED, OS_ECOMM},
        {FE_TIMEOUT, ETIMEDOUT},
        {FE_FULL, ENOSPC},
        {FE_NO_MAILBOX, ENXIO},
        {FE_MISMATCH, EIO},
        {FE_NOT_HELD, ENOENT},
        {FE_BAD_INPUT, EINVAL},
        {FE_ACCESS, EACCES},
        {FE_BLOCKED, ENOBUFS},
        {FE_NOT_EMPTY, ENOTEMPTY},
        {FE_INTERNAL, EIO},
    };
    size_t i;

    (void)state;
    assert_int_equal(sizeof(want) / sizeof(want[0]), FE__COUNT);
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(want[i].c, (fe_code)i);
        assert_int_equal(fe_errno(want[i].c), want[i].err);
    }
}

/* issue 42: the errno that stands for ECOMM (ENETDOWN where there is no
 * ECOMM, macOS) is told in Linux's words; it is no errno the table uses
 * for another meaning; any other errno is strerror's */
static void test_ecomm_words(void **state)
{
    (void)state;
    assert_string_equal(fe_errno_text(OS_ECOMM), "Communication error on send");
    assert_string_equal(fe_errno_text(ENOSPC), strerror(ENOSPC));
    for (int i = 0; i < FE__COUNT; i++)
        if (i != FE_NOT_CONNECTED)
            assert_int_not_equal(fe_errno((fe_code)i), OS_ECOMM);
#ifndef ECOMM
    assert_int_equal(OS_ECOMM, ENETDOWN);
#endif
}

static void test_names_unique_kebab(void **state)
{
    int i, j;

    (void)state;
    for (i = 0; i < FE__COUNT; i++) {
        const char *n = fe_name((fe_code)i);

        assert_non_null(n);
        assert_true(strlen(n) > 0);
        assert_int_equal(strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-"), strlen(n));
        for (j = 0; j < i; j++)
            assert_string_not_equal(n, fe_name((fe_code)j));
    }
    assert_string_equal(fe_name(FE_OK), "ok");
    assert_string_equal(fe_name(FE_NOT_CONNECTED), "not-connected");
    assert_string_equal(fe_name(FE_FULL), "full");
}

static void test_hints(void **state)
{
    int i, j;

    (void)state;
    for (i = 0; i < FE__COUNT; i++) {
        const char *h = fe_hint((fe_code)i);

        assert_non_null(h);
        assert_true(strlen(h) > 20);
        assert_null(strchr(h, '\n'));
        for (j = 0; j < i; j++)
            assert_string_not_equal(h, fe_hint((fe_code)j));
    }
    assert_non_null(strstr(fe_hint(FE_FULL), "x-max-length"));
    assert_non_null(strstr(fe_hint(FE_FULL), "max_length"));
    assert_non_null(strstr(fe_hint(FE_TOO_BIG), "max_message"));
    assert_non_null(strstr(fe_hint(FE_TIMEOUT), "send_timeout"));
}

static void test_out_of_range(void **state)
{
    (void)state;
    assert_int_equal(fe_errno(FE__COUNT), EIO);
    assert_int_equal(fe_errno((fe_code)-1), EIO);
    assert_int_equal(fe_errno((fe_code)1000), EIO);
    assert_string_equal(fe_name(FE__COUNT), fe_name(FE_INTERNAL));
    assert_string_equal(fe_name((fe_code)-7), "internal");
    assert_string_equal(fe_hint((fe_code)99), fe_hint(FE_INTERNAL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errno_table),        cmocka_unit_test(test_ecomm_words),
        cmocka_unit_test(test_names_unique_kebab), cmocka_unit_test(test_hints),
        cmocka_unit_test(test_out_of_range),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
