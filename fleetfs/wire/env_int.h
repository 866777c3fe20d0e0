/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/wire/env_int.h — inside the envelope codec; for fleetfs/wire/ only.
 *
 * What envelope.c (msgIds, times, messages and receipts: encoding, strict
 * decoding, the bytes a signature covers) shares with heartbeat.c (the
 * heartbeat and its agents and profiles extensions): the JSON writers, the
 * strict decoder's state and its field readers, and the length-prefixed
 * field of a signature.  They are defined once, in envelope.c, so that
 * every envelope type is written, refused and signed by the same rules.
 */
#ifndef FLEETFS_WIRE_ENV_INT_H
#define FLEETFS_WIRE_ENV_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/wire/envelope.h"

/* ---- encoding: keys in SPEC order ---- */

/* Adds key = s; false when jansson refuses (bad UTF-8). */
bool env_put(json_t *o, const char *key, const char *s);
/* Adds key = s unless s is empty; false when jansson refuses (bad UTF-8). */
bool env_put_opt(json_t *o, const char *key, const char *s);
/* Compact JSON of o (malloc'd), with a newline when asked; *len its length. */
char *env_dump_line(json_t *o, bool newline, size_t *len);

/* ---- strict decoding ---- */

/* The object being read, and where the reason of a refusal goes. */
struct env_dec {
    json_t *root;
    char *why;
    size_t whylen;
};

/* Records the reason; fmt may hold one %s for key. Always returns -1. */
int env_failk(struct env_dec *dc, const char *fmt, const char *key);
int env_fail(struct env_dec *dc, const char *msg);
/* Copies string field key into dst[dstsz]. 1 copied, 0 absent and allowed,
 * -1 refused (reason set). */
int env_get_str(struct env_dec *dc, const char *key, bool required, char *dst, size_t dstsz);
/* A required RFC 3339 time in dst[40]; 0 or -1 (reason set). */
int env_get_time(struct env_dec *dc, const char *key, char *dst);
/* A required lead name in dst[64]; 0 or -1 (reason set). */
int env_get_name(struct env_dec *dc, const char *key, char *dst);
/* s holds base64 characters only (or is empty). */
bool env_base64_ok(const char *s);

/* ---- signing ---- */

/* Writes n as 8 bytes big-endian, then the n bytes of data; returns the
 * byte after them. */
unsigned char *env_put_field(unsigned char *p, const void *data, size_t n);

#endif
