/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_sanitize.c — libFuzzer target for san_text, the last filter before
 * bytes become keystrokes in an agent's terminal.
 *
 * It checks the promise itself rather than trusting the sanitiser's own
 * helpers alone: the output is decoded here independently and must be valid
 * UTF-8 with no C0 byte but '\n' and '\t', no DEL, no C1 code point (and so
 * no ESC, no CSI), no longer than the input, and a fixed point — sanitising
 * it again changes nothing, and san_is_clean agrees. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herdr/sanitize.h"

/* Independent strict UTF-8 decoder: the code point at s[*i], or -1. */
static long fz_next_cp(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char c = s[*i];
    size_t k, need;
    long cp, min;

    if (c < 0x80) {
        (*i)++;
        return c;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return -1;
    }
    for (k = 1; k <= need; k++) {
        if (*i + k >= n || (s[*i + k] & 0xc0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[*i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    *i += need + 1;
    return cp;
}

static void fz_check_clean(const unsigned char *s, size_t n)
{
    size_t i = 0;
    long cp;

    while (i < n) {
        cp = fz_next_cp(s, n, &i);
        if (cp < 0) {
            fprintf(stderr, "san_text output is not UTF-8 at %zu\n", i);
            abort();
        }
        if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
            fprintf(stderr, "san_text left U+%04lX at %zu\n", cp, i);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size > 0 ? size : 1), *out, *again;
    size_t outlen = 0, againlen = 0;
    bool clean;

    if (in == NULL)
        return 0;
    if (size > 0)
        memcpy(in, data, size);
    clean = san_is_clean(in, size);
    out = san_text(in, size, &outlen);
    if (out == NULL)
        abort();
    if (outlen > size || out[outlen] != '\0')
        abort();
    if (clean && (outlen != size || memcmp(out, in, size) != 0)) {
        fprintf(stderr, "san_is_clean said clean but san_text changed it\n");
        abort();
    }
    fz_check_clean((const unsigned char *)out, outlen);
    if (!san_utf8_valid(out, outlen) || !san_is_clean(out, outlen))
        abort();
    again = san_text(out, outlen, &againlen);
    if (again == NULL || againlen != outlen || memcmp(again, out, outlen) != 0) {
        fprintf(stderr, "san_text is not idempotent\n");
        abort();
    }
    free(again);
    free(out);
    free(in);
    return 0;
}
