/* test_names.c — lead names and strict UTF-8: the two gates every external
 * string passes. Cases are chosen at the edges of each rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "fleetfs/wire/names.h"

static void test_name_valid_accepts(void **state)
{
    (void)state;
    assert_true(name_valid("a"));
    assert_true(name_valid("0"));
    assert_true(name_valid("mac"));
    assert_true(name_valid("fleet01"));
    assert_true(name_valid("a_b-c"));
    assert_true(name_valid("a-"));
    assert_true(name_valid("9_"));
    /* 63 characters: the maximum */
    assert_true(name_valid("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"));
}

static void test_name_valid_rejects(void **state)
{
    (void)state;
    assert_false(name_valid(NULL));
    assert_false(name_valid(""));
    assert_false(name_valid("-a"));
    assert_false(name_valid("_a"));
    assert_false(name_valid("Mac"));
    assert_false(name_valid("a.b"));
    assert_false(name_valid("a/b"));
    assert_false(name_valid(".."));
    assert_false(name_valid("."));
    assert_false(name_valid("a b"));
    assert_false(name_valid("a\n"));
    assert_false(name_valid("caf\xc3\xa9"));
    /* 64 characters: one too many */
    assert_false(name_valid("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"));
}

static bool u8(const char *s)
{
    return text_utf8_valid(s, strlen(s));
}

static void test_utf8_accepts(void **state)
{
    (void)state;
    assert_true(text_utf8_valid("", 0));
    assert_true(text_utf8_valid(NULL, 0));
    assert_true(u8("hello, world\n\t"));
    assert_true(u8("caf\xc3\xa9"));      /* U+00E9 */
    assert_true(u8("\xc2\x80"));         /* U+0080, smallest 2-byte */
    assert_true(u8("\xdf\xbf"));         /* U+07FF */
    assert_true(u8("\xe0\xa0\x80"));     /* U+0800, smallest 3-byte */
    assert_true(u8("\xed\x9f\xbf"));     /* U+D7FF, just below surrogates */
    assert_true(u8("\xee\x80\x80"));     /* U+E000, just above */
    assert_true(u8("\xef\xbf\xbf"));     /* U+FFFF */
    assert_true(u8("\xf0\x90\x80\x80")); /* U+10000 */
    assert_true(u8("\xf0\x9f\x98\x80")); /* emoji */
    assert_true(u8("\xf4\x8f\xbf\xbf")); /* U+10FFFF, the last */
}

static void test_utf8_rejects(void **state)
{
    (void)state;
    assert_false(text_utf8_valid("a\0b", 3)); /* embedded NUL */
    assert_false(text_utf8_valid("\0", 1));
    assert_false(u8("\x80")); /* lone continuation */
    assert_false(u8("\xbf"));
    assert_false(u8("\xc0\x80"));     /* overlong NUL */
    assert_false(u8("\xc1\xbf"));     /* overlong 2-byte */
    assert_false(u8("\xe0\x80\x80")); /* overlong 3-byte */
    assert_false(u8("\xe0\x9f\xbf"));
    assert_false(u8("\xf0\x80\x80\x80")); /* overlong 4-byte */
    assert_false(u8("\xf0\x8f\xbf\xbf"));
    assert_false(u8("\xed\xa0\x80"));     /* U+D800 */
    assert_false(u8("\xed\xbf\xbf"));     /* U+DFFF */
    assert_false(u8("\xf4\x90\x80\x80")); /* U+110000 */
    assert_false(u8("\xf5\x80\x80\x80"));
    assert_false(u8("\xff"));
    assert_false(u8("\xfe"));
    assert_false(u8("\xc3")); /* truncated */
    assert_false(u8("\xe2\x82"));
    assert_false(u8("\xf0\x9f\x98"));
    assert_false(u8("\xc3\x28")); /* bad continuation */
    assert_false(u8("\xe2\x28\xa1"));
    assert_false(u8("ok\xe2\x82\x28"));
    /* a valid sequence cut by the length argument */
    assert_false(text_utf8_valid("\xc3\xa9", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_valid_accepts),
        cmocka_unit_test(test_name_valid_rejects),
        cmocka_unit_test(test_utf8_accepts),
        cmocka_unit_test(test_utf8_rejects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
