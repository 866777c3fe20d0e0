/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_envelope.c — libFuzzer target for env_decode, the first code every
 * byte from the broker reaches (and env_hb_decode, its heartbeat twin).
 *
 * Beyond "never crash", it checks the property the rest of fleetfs leans
 * on: whatever the decoder accepts, the encoder can write back and the
 * decoder accepts again, field for field. A difference would mean two
 * parts of the system (say the signature check and the inbox file) could
 * see different messages in the same bytes. The input is copied to an
 * exact-size heap buffer so ASan sees any read past its end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"

#define FZ_MAX_BODY 65536

static void fz_same_str(const char *what, const char *a, const char *b)
{
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "round trip changed %s: \"%s\" -> \"%s\"\n", what, a, b);
        abort();
    }
}

static void fz_same(const envelope *a, const envelope *b)
{
    if (a->v != b->v)
        abort();
    fz_same_str("type", a->type, b->type);
    fz_same_str("msgId", a->msgId, b->msgId);
    fz_same_str("from", a->from, b->from);
    fz_same_str("to", a->to, b->to);
    fz_same_str("sentAt", a->sentAt, b->sentAt);
    fz_same_str("expiresAt", a->expiresAt, b->expiresAt);
    fz_same_str("replyTo", a->replyTo, b->replyTo);
    fz_same_str("ref", a->ref, b->ref);
    fz_same_str("state", a->state, b->state);
    fz_same_str("recipient", a->recipient, b->recipient);
    fz_same_str("detail", a->detail, b->detail);
    fz_same_str("sig", a->sig, b->sig);
    if (a->body_len != b->body_len || memcmp(a->body, b->body, a->body_len) != 0) {
        fprintf(stderr, "round trip changed the body\n");
        abort();
    }
}

/* Heartbeats (fleet.roster) go through their own decoder: the same
 * round-trip property, and whatever it accepts is plain text. */
static void fz_heartbeat(const char *copy, size_t size)
{
    env_heartbeat h, d;
    char why[128];
    size_t len = 0;
    char *js;
    unsigned char *a, *b;
    size_t alen, blen;

    if (env_hb_decode(copy, size, &h, why, sizeof(why)) != 0) {
        if (why[0] == '\0')
            abort();
        return;
    }
    if (!env_text_plain(h.host, strlen(h.host)) || !env_text_plain(h.agent, strlen(h.agent)))
        abort();
    js = env_hb_encode(&h, &len);
    if (js == NULL || env_hb_decode(js, len, &d, why, sizeof(why)) != 0) {
        fprintf(stderr, "accepted heartbeat does not round-trip\n");
        abort();
    }
    if (env_hb_signing_fields(&h, &a, &alen) != 0 || env_hb_signing_fields(&d, &b, &blen) != 0)
        abort();
    if (alen != blen || memcmp(a, b, alen) != 0 || strcmp(h.sig, d.sig) != 0) {
        fprintf(stderr, "round trip changed a signed heartbeat field\n");
        abort();
    }
    free(a);
    free(b);
    /* the agents extension, and its own signature */
    if (h.ext != d.ext || env_hb_agents_signing_fields(&h, &a, &alen) != 0 ||
        env_hb_agents_signing_fields(&d, &b, &blen) != 0)
        abort();
    if (alen != blen || memcmp(a, b, alen) != 0 || strcmp(h.asig, d.asig) != 0) {
        fprintf(stderr, "round trip changed a signed agents field\n");
        abort();
    }
    for (size_t i = 0; i < h.n_agents; i++)
        if (!env_text_plain(h.agents[i].state, strlen(h.agents[i].state)))
            abort();
    free(a);
    free(b);
    env_hb_free(&h);
    env_hb_free(&d);
    free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size > 0 ? size : 1);
    envelope e, d;
    char why[128];
    size_t len = 0;
    char *js;

    if (copy == NULL)
        return 0;
    if (size > 0)
        memcpy(copy, data, size);
    fz_heartbeat(copy, size);
    if (env_decode(copy, size, FZ_MAX_BODY, &e, why, sizeof(why)) != 0) {
        if (why[0] == '\0' || e.body != NULL)
            abort(); /* a refusal always says why and frees */
        free(copy);
        return 0;
    }
    if (e.body == NULL || e.body[e.body_len] != '\0')
        abort();
    js = env_encode(&e, &len);
    if (js == NULL) {
        fprintf(stderr, "accepted envelope cannot be encoded\n");
        abort();
    }
    if (env_decode(js, len, FZ_MAX_BODY, &d, why, sizeof(why)) != 0) {
        fprintf(stderr, "re-encoded envelope refused: %s\n%s\n", why, js);
        abort();
    }
    fz_same(&e, &d);
    env_free(&d);
    env_free(&e);
    free(js);
    free(copy);
    return 0;
}
