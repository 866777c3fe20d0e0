/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_control.c — libFuzzer target for ctl_decode and ctl_request_parse,
 * the first code a control request (spawn, stop) or its answer reaches
 * (fleetfs/wire/control.h), and the parser of what a lead writes to
 * hosts/<h>/spawn.
 *
 * Beyond "never crash": whatever the decoder accepts, the encoder writes
 * back and the decoder accepts again with the same signed fields, so the
 * signature check and whatever acts on the request cannot see two
 * different requests in the same bytes; and nothing accepted carries a
 * control character in a field that reaches a log, a title or a path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/wire/control.h"

#define FZ_MAX_BRIEF 65536

static void fz_plain(const char *what, const char *s)
{
    if (!env_text_plain(s, strlen(s))) {
        fprintf(stderr, "accepted a control character in %s\n", what);
        abort();
    }
}

static void fz_round_trip(const ctl_env *e)
{
    unsigned char *a, *b;
    size_t alen, blen, len = 0;
    char why[160], *js = ctl_encode(e, &len);
    ctl_env d;

    if (!js) {
        fprintf(stderr, "accepted but cannot encode\n");
        abort();
    }
    if (ctl_decode(js, len, FZ_MAX_BRIEF, &d, why, sizeof why) != 0) {
        fprintf(stderr, "re-encoded envelope refused: %s\n%s\n", why, js);
        abort();
    }
    if (ctl_signing_fields(e, &a, &alen) || ctl_signing_fields(&d, &b, &blen) || alen != blen ||
        memcmp(a, b, alen) != 0) {
        fprintf(stderr, "round trip changed the signed fields\n");
        abort();
    }
    free(a);
    free(b);
    free(js);
    ctl_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1), why[160];
    ctl_env e;

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (ctl_decode(copy, size, FZ_MAX_BRIEF, &e, why, sizeof why) == 0) {
        fz_plain("profile", e.profile);
        fz_plain("name", e.name);
        fz_plain("dir", e.dir);
        fz_plain("gid", e.gid);
        fz_plain("detail", e.detail);
        fz_round_trip(&e);
        ctl_free(&e);
    }
    if (ctl_request_parse(copy, size, FZ_MAX_BRIEF, &e, why, sizeof why) == 0) {
        fz_plain("profile", e.profile);
        fz_plain("name", e.name);
        fz_plain("dir", e.dir);
        ctl_free(&e);
    }
    free(copy);
    return 0;
}
