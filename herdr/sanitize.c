/* SPDX-License-Identifier: Apache-2.0 */
/* sanitize.c — strip terminal controls from text before it is typed.
 *
 * One left-to-right pass over the bytes, decoding UTF-8 as it goes. What
 * survives: printable ASCII, '\n', '\t', and well-formed UTF-8 whose code
 * point is not a C1 control. Everything else is dropped:
 *
 *  - C0 controls (NUL..US) except LF and TAB, and DEL. CR is not dropped
 *    but rewritten: CRLF becomes LF and a lone CR becomes LF, so a message
 *    written on any platform keeps its line breaks and none of them is a
 *    bare Enter (herdr presses Enter itself once the text is in).
 *  - Escape sequences, removed whole, introducer and body alike:
 *      CSI   ESC [ params intermediates final (covers ESC[200~ / ESC[201~)
 *      OSC, DCS, SOS, PM, APC   ESC ] / P / X / ^ / _ ... up to BEL, ST
 *            (ESC \ or the C1 ST), CAN or SUB; an ESC inside the string
 *            ends it and starts the next sequence; an unterminated string
 *            runs to the end of the input and is dropped with it
 *      SS2/SS3  ESC N x, ESC O x (ESC O A is an arrow key)
 *      nF    ESC intermediates final (ESC ( B ...)
 *      two-byte ESC x for any other printable x
 *    An ESC followed by anything else (end, a control, a non-ASCII byte) is
 *    dropped alone and the next byte is looked at afresh.
 *  - C1 controls U+0080..U+009F, both as UTF-8 (C2 80..C2 9F) and as raw
 *    bytes that are not part of a valid UTF-8 sequence. Encoded as UTF-8,
 *    the 8-bit introducers (CSI, OSC, DCS, SOS, PM, APC, SS2, SS3) swallow
 *    their sequence exactly like the ESC forms. As raw bytes they are far
 *    more often legacy-encoding debris (cp1252 quotes, "ž" = 0x9E = PM) than
 *    controls, so they are dropped alone and what follows stays as the
 *    inert text it then is; the exception is raw CSI 0x9B, which takes its
 *    (short, self-delimiting) CSI with it so that the 8-bit paste marker
 *    "\x9b201~" leaves nothing behind.
 *  - Bytes that are not valid UTF-8 (stray continuations, overlongs,
 *    surrogates, > U+10FFFF, truncated sequences), one byte at a time.
 *
 * A sequence cut short by an unexpected byte ends there; the byte is then
 * judged on its own. That can leave harmless printable residue ("ESC[2" +
 * CR + "01~" yields "\n01~") but never an introducer. The output is never
 * longer than the input. */
#include "herdr/sanitize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ESC 0x1b

/* Length (1..4) of the well-formed UTF-8 sequence at p[0..n), with its code
 * point in *cp; 0 when p does not start one. */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
    unsigned char b = p[0];
    size_t k;
    uint32_t c, min;

    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf) {
        k = 2, c = b & 0x1f, min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
        k = 3, c = b & 0x0f, min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
        k = 4, c = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return k;
}

bool san_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;

    for (size_t i = 0; i < len;) {
        size_t k = utf8_decode(p + i, len - i, &cp);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* The C1 control at p[i], as UTF-8 (C2 80..9F) or as a raw byte that is not
 * valid UTF-8: its value in *c1 and its length; 0 when p[i] is not one. */
static size_t c1_at(const unsigned char *p, size_t n, size_t i, unsigned *c1)
{
    uint32_t cp;
    size_t k = utf8_decode(p + i, n - i, &cp);

    if (k == 2 && cp >= 0x80 && cp <= 0x9f) {
        *c1 = cp;
        return 2;
    }
    if (k == 0 && p[i] >= 0x80 && p[i] <= 0x9f) {
        *c1 = p[i] == 0x9b || p[i] == 0x9c ? p[i] : 0x80; /* see top */
        return 1;
    }
    return 0;
}

/* CSI body from j: parameters 0x30-0x3F, intermediates 0x20-0x2F, one final
 * byte 0x40-0x7E. Returns the index after the sequence. */
static size_t skip_csi(const unsigned char *p, size_t n, size_t j)
{
    while (j < n && p[j] >= 0x30 && p[j] <= 0x3f)
        j++;
    while (j < n && p[j] >= 0x20 && p[j] <= 0x2f)
        j++;
    if (j < n && p[j] >= 0x40 && p[j] <= 0x7e)
        j++;
    return j;
}

/* Control string body (OSC, DCS, SOS, PM, APC) from j, up to and including
 * its terminator. Valid UTF-8 inside is skipped whole so that a continuation
 * byte 0x9C of an ordinary character is not taken for ST. */
static size_t skip_string(const unsigned char *p, size_t n, size_t j)
{
    while (j < n) {
        unsigned c1;
        size_t k;
        uint32_t cp;

        if (p[j] == 0x07 || p[j] == 0x18 || p[j] == 0x1a)
            return j + 1;
        if (p[j] == ESC)
            return (j + 1 < n && p[j + 1] == '\\') ? j + 2 : j;
        k = c1_at(p, n, j, &c1);
        if (k > 0 && c1 == 0x9c)
            return j + k;
        if (k == 0)
            k = utf8_decode(p + j, n - j, &cp);
        j += k ? k : 1;
    }
    return n;
}

/* SS2/SS3 apply to the one character that follows. */
static size_t skip_ss(const unsigned char *p, size_t n, size_t j)
{
    return (j < n && p[j] >= 0x20 && p[j] <= 0x7e) ? j + 1 : j;
}

/* p[i] is ESC: the index after the whole sequence it introduces. */
static size_t skip_esc(const unsigned char *p, size_t n, size_t i)
{
    size_t j = i + 1;

    if (j >= n)
        return j;
    switch (p[j]) {
    case '[':
        return skip_csi(p, n, j + 1);
    case ']':
    case 'P':
    case 'X':
    case '^':
    case '_':
        return skip_string(p, n, j + 1);
    case 'N':
    case 'O':
        return skip_ss(p, n, j + 1);
    }
    if (p[j] >= 0x20 && p[j] <= 0x2f) {
        while (j < n && p[j] >= 0x20 && p[j] <= 0x2f)
            j++;
        return (j < n && p[j] >= 0x30 && p[j] <= 0x7e) ? j + 1 : j;
    }
    if (p[j] >= 0x30 && p[j] <= 0x7e)
        return j + 1;
    return j;
}

/* A C1 control of length k at p[i]: the index after what it introduces. */
static size_t skip_c1(const unsigned char *p, size_t n, size_t i, size_t k, unsigned c1)
{
    switch (c1) {
    case 0x9b:
        return skip_csi(p, n, i + k);
    case 0x90:
    case 0x98:
    case 0x9d:
    case 0x9e:
    case 0x9f:
        return skip_string(p, n, i + k);
    case 0x8e:
    case 0x8f:
        return skip_ss(p, n, i + k);
    }
    return i + k;
}

char *san_text(const char *in, size_t len, size_t *outlen)
{
    const unsigned char *p = (const unsigned char *)in;
    char *out = malloc(len + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned char b = p[i];
        unsigned c1;
        uint32_t cp;
        size_t k;

        if (b == ESC) {
            i = skip_esc(p, len, i);
        } else if (b == '\r') {
            out[o++] = '\n';
            i += (i + 1 < len && p[i + 1] == '\n') ? 2 : 1;
        } else if (b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7f)) {
            out[o++] = (char)b;
            i++;
        } else if (b < 0x80) {
            i++; /* other C0, DEL */
        } else if ((k = c1_at(p, len, i, &c1)) > 0) {
            i = skip_c1(p, len, i, k, c1);
        } else if ((k = utf8_decode(p + i, len - i, &cp)) > 0) {
            memcpy(out + o, p + i, k);
            o += k;
            i += k;
        } else {
            i++; /* invalid UTF-8 byte */
        }
    }
    out[o] = '\0';
    if (outlen)
        *outlen = o;
    return out;
}

bool san_is_clean(const char *in, size_t len)
{
    size_t n;
    char *s = san_text(in, len, &n);
    bool same = s && n == len && memcmp(s, in, len) == 0;

    free(s);
    return same;
}
