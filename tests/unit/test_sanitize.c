/* SPDX-License-Identifier: Apache-2.0 */
/* test_sanitize.c — san_text against every class of control it must remove,
 * and a property check over random byte strings: whatever goes in, what
 * comes out is valid UTF-8 with no control byte but '\n' and '\t', no DEL,
 * no C1, is never longer than the input, and is a fixed point. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "herdr/sanitize.h"

/* san_text(in) must equal want. in is given with its length: it may hold NUL. */
static void check_len(const char *in, size_t len, const char *want)
{
    size_t n = 12345;
    char *out = san_text(in, len, &n);

    assert_non_null(out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    free(out);
}

#define check(in, want) check_len((in), sizeof(in) - 1, (want))

static void plain_text_preserved(void **state)
{
    (void)state;
    check("hello, world", "hello, world");
    check("h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac "
          "\xf0\x9f\x8e\x89\tx\ny",
          "h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac "
          "\xf0\x9f\x8e\x89\tx\ny");
    /* continuation bytes in the C1 range inside valid characters stay */
    check("\xe2\x82\xac 5 \xc5\x93 \xe2\x9c\x9c", "\xe2\x82\xac 5 \xc5\x93 \xe2\x9c\x9c");
    check("", "");
}

static void c0_and_del_removed(void **state)
{
    (void)state;
    check("a\x01"
          "b\x07"
          "c\x08"
          "d\x1a"
          "e\x7f"
          "f",
          "abcdef");
    check("a\0b", "ab");
    check("tab\there\nline", "tab\there\nline");
}

static void carriage_returns_become_newlines(void **state)
{
    (void)state;
    check("a\r\nb\rc\r", "a\nb\nc\n");
    check("a\r\r\nb", "a\n\nb");
}

static void csi_removed(void **state)
{
    (void)state;
    check("a\x1b[31mred\x1b[0m.", "ared.");
    check("\x1b[2J\x1b[H\x1b[?1049h\x1b[38;5;196mX", "X");
    check("a\x1b[>0;1;2 qb", "ab"); /* intermediate byte */
    check("a\x1b[Ab", "ab");
}

static void bracketed_paste_markers_removed(void **state)
{
    (void)state;
    check("x\x1b[201~rm -rf ~\r\x1b[200~y", "xrm -rf ~\ny");
    check("a\x9b"
          "201~b",
          "ab"); /* 8-bit CSI, raw byte */
    check("a\xc2\x9b"
          "201~b",
          "ab"); /* 8-bit CSI as UTF-8 */
}

static void osc_removed(void **state)
{
    (void)state;
    check("a\x1b]0;title\x07"
          "b",
          "ab");
    check("a\x1b]52;c;ZXZpbA==\x1b\\b", "ab");
    check("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb");
    check("a\xc2\x9d"
          "0;t\xc2\x9c"
          "b",
          "ab");
    /* raw C1 bytes are dropped alone, leaving inert text (see sanitize.c) */
    check("a\x9d"
          "0;t\x9c"
          "b",
          "a0;tb");
    /* U+271C is E2 9C 9C: its 0x9C bytes are not ST */
    check("a\x1b]0;\xe2\x9c\x9cX\x07"
          "b",
          "ab");
    /* unterminated: the rest of the input goes with it */
    check("a\x1b]0;never ends", "a");
    /* CAN cancels; an ESC inside starts the next sequence */
    check("a\x1b]0;x\x18"
          "b",
          "ab");
    check("a\x1b]0;x\x1b[31mb", "ab");
}

static void strings_removed(void **state)
{
    (void)state;
    check("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"); /* DCS */
    check("a\x1bXsos\x1b\\b", "ab");         /* SOS */
    check("a\x1b^pm\x1b\\b", "ab");          /* PM */
    check("a\x1b_apc\x1b\\b", "ab");         /* APC */
    check("a\x90q\x9c"
          "b",
          "aqb"); /* raw: dropped alone */
    check("a\xc2\x9f"
          "apc\xc2\x9c"
          "b",
          "ab"); /* APC as UTF-8 */
}

static void short_escapes_removed(void **state)
{
    (void)state;
    check("a\x1b"
          "7b\x1b"
          "8c\x1b"
          "cd\x1b=e",
          "abcde");
    check("a\x1b(Bb\x1b#8c", "abc"); /* nF */
    check("a\x1bOAb\x1bNxc", "abc"); /* SS3 arrow, SS2 */
    check("a\xc2\x8f"
          "Ab",
          "ab"); /* SS3 as UTF-8 */
    check("a\x8f"
          "Ab",
          "aAb");                            /* raw: dropped alone */
    check("\x93quoted\x94 \x9e", "quoted "); /* cp1252 debris */
    check("a\x1b", "a");
    check("a\x1b\nb", "a\nb");
    check("a\x1b\x1b[Ab", "ab");
    check("a\x1b\xc3\xa9", "a\xc3\xa9");
    /* a sequence cut by a control leaves printable residue only */
    check("a\x1b[2\r01~", "a\n01~");
}

static void c1_removed(void **state)
{
    (void)state;
    check("a\xc2\x85"
          "b\xc2\x80"
          "c\xc2\x9a"
          "d",
          "abcd");
    check("a\x85"
          "b\x80"
          "c\x9a"
          "d",
          "abcd");
    check("\xc2\xa0", "\xc2\xa0"); /* U+00A0 is not C1 */
}

static void invalid_utf8_dropped(void **state)
{
    (void)state;
    check("a\xc0\xaf"
          "b",
          "ab"); /* overlong */
    check("a\xe0\x80\xaf"
          "b",
          "ab"); /* overlong */
    check("a\xed\xa0\x80"
          "b",
          "ab"); /* surrogate */
    check("a\xf4\x90\x80\x80"
          "b",
          "ab");             /* > U+10FFFF */
    check("a\xe2\x82", "a"); /* truncated */
    check("a\xbf\xfe\xff"
          "b",
          "ab"); /* stray bytes */
    check("\xf0\x9f\x8e"
          "x",
          "x");
}

static void clean_and_valid_predicates(void **state)
{
    (void)state;
    assert_true(san_is_clean("plain\ttext\n\xc3\xa9", 13));
    assert_false(san_is_clean("a\x1b[0m", 6));
    assert_false(san_is_clean("a\rb", 3));
    assert_true(san_utf8_valid("\xe2\x82\xac", 3));
    assert_false(san_utf8_valid("\xe2\x82", 2));
    assert_false(san_utf8_valid("\xc0\x80", 2));
    assert_true(san_utf8_valid("", 0));
}

static void assert_output_safe(const char *in, size_t len)
{
    size_t n;
    char *out = san_text(in, len, &n);
    const unsigned char *u = (const unsigned char *)out;

    assert_non_null(out);
    assert_true(n <= len);
    assert_int_equal(out[n], '\0');
    assert_true(san_utf8_valid(out, n));
    for (size_t i = 0; i < n; i++) {
        assert_false(u[i] < 0x20 && u[i] != '\n' && u[i] != '\t');
        assert_false(u[i] == 0x7f);
        assert_false(u[i] == 0xc2 && i + 1 < n && u[i + 1] < 0xa0);
    }
    assert_true(san_is_clean(out, n));
    free(out);
}

/* Random strings over an alphabet heavy in introducers and terminators. */
static void random_inputs_give_safe_output(void **state)
{
    static const unsigned char alpha[] = {
        0x1b, '[',  ']',  'P',  '_',  '^',  'X',  'O',  '\\', 0x07, 0x18,
        '\r', '\n', '\t', 0x00, 0x7f, 0x9b, 0x9c, 0x9d, 0x85, 0xc2, 0xe2,
        0x82, 0xac, 0xf0, 0x9f, 0xed, 0xa0, 'a',  '0',  ';',  '~',
    };
    unsigned seed = 20240601;
    char buf[96];

    (void)state;
    for (int iter = 0; iter < 50000; iter++) {
        size_t len = (size_t)(rand_r(&seed) % (int)sizeof(buf));

        for (size_t i = 0; i < len; i++) {
            int r = rand_r(&seed);

            buf[i] = (char)(r % 4 == 0 ? (r >> 8) & 0xff : alpha[(r >> 8) % sizeof(alpha)]);
        }
        assert_output_safe(buf, len);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_text_preserved),
        cmocka_unit_test(c0_and_del_removed),
        cmocka_unit_test(carriage_returns_become_newlines),
        cmocka_unit_test(csi_removed),
        cmocka_unit_test(bracketed_paste_markers_removed),
        cmocka_unit_test(osc_removed),
        cmocka_unit_test(strings_removed),
        cmocka_unit_test(short_escapes_removed),
        cmocka_unit_test(c1_removed),
        cmocka_unit_test(invalid_utf8_dropped),
        cmocka_unit_test(clean_and_valid_predicates),
        cmocka_unit_test(random_inputs_give_safe_output),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
