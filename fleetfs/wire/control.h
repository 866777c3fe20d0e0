/* SPDX-License-Identifier: Apache-2.0 */
/* control.h — the control plane's envelopes (SPEC section 11): a request
 * to start an agent on another host (`spawn`), to stop one (`stop`), and
 * the far host's answer (`spawned`). Encoding, strict decoding of
 * untrusted bytes, the fields a signature covers, and the checks every
 * control envelope must pass before anything acts on it (signature, `to`,
 * a short expiry). Pure functions; a ctl_env belongs to whoever holds it.
 *
 * On the wire (one compact JSON object; unknown keys are refused):
 *
 *   {"v":1,"type":"spawn","msgId":"<32 hex>","from":"alpha","to":"beta",
 *    "sentAt":"..","expiresAt":"..","profile":"worker","name":"w1",
 *    "dir":"repo"?,"brief":"..."?,"sig":"<base64 ed25519>"}
 *   {"v":1,"type":"stop", ...header..., "gid":"w1@beta","sig":".."}
 *   {"v":1,"type":"spawned", ...header..., "requestId":"<msgId asked>",
 *    "state":"ready"|"refused"|"failed"|"stopped","detail":"..",
 *    "gid":"w1@beta"?,"sig":".."}
 *
 * from and to are hosts (coord_ids). A request carries nothing but
 * profile, name, dir and brief: no command, argument, environment variable
 * or path beyond `dir` exists in the format, and the far host decides what
 * each profile runs (fleetfs/spawn/check.h). */
#ifndef FLEETFS_WIRE_CONTROL_H
#define FLEETFS_WIRE_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/sign.h"

#define CTL_TYPE_SPAWN "spawn"
#define CTL_TYPE_STOP "stop"
#define CTL_TYPE_SPAWNED "spawned"

/* An agent or profile name: [a-z][a-z0-9_-]{0,31} (herdr's rule). */
#define CTL_NAME_MAX 32
/* name@coord_id */
#define CTL_GID_MAX (CTL_NAME_MAX + 1 + 63)
#define CTL_DIR_MAX 4096
/* A control envelope lives this long (the default) and never longer than
 * CTL_MAX_TTL_MS: a request that outlives its moment must not start an
 * agent minutes later. */
#define CTL_TTL_MS (60 * 1000)
#define CTL_MAX_TTL_MS (5 * 60 * 1000)
/* How far a sender's clock may run ahead of ours. */
#define CTL_SKEW_MS (60 * 1000)

typedef struct {
    int v;
    char type[16];
    char msgId[ENV_ID_LEN + 1];
    char from[64];
    char to[64];
    char sentAt[40];
    char expiresAt[40];
    /* spawn */
    char profile[CTL_NAME_MAX + 1];
    char name[CTL_NAME_MAX + 1];
    char dir[CTL_DIR_MAX]; /* "" when absent */
    char *brief;           /* malloc'd, NULL when absent */
    size_t brief_len;
    /* stop, spawned */
    char gid[CTL_GID_MAX + 1]; /* spawned: "" when none */
    /* spawned */
    char requestId[ENV_ID_LEN + 1];
    char state[16];
    char detail[256];
    char sig[100];
} ctl_env;

/* The request a lead writes to hosts/<h>/spawn: exactly one JSON object
 * {"profile","name","dir"?,"brief"?}; any other key is refused with its
 * name (a "command" must not look accepted). Strings are UTF-8 with no
 * NUL; profile, name and dir hold no control character; the brief is at
 * most max_brief bytes. 0 and the fields filled into out (out->brief
 * malloc'd), or -1 with the reason. */
int ctl_request_parse(const char *json, size_t len, size_t max_brief, ctl_env *out, char *why,
                      size_t whylen);

/* Empties e, then ctl_address. */
void ctl_init(ctl_env *e, const char *type, const char *from, const char *to, int64_t now_ms,
              int64_t ttl_ms);
/* Sets only the header: v, type, a fresh msgId, from, to, sentAt = now
 * and expiresAt = now + ttl_ms (clamped to 1..CTL_MAX_TTL_MS); the other
 * fields stay, so a request read by ctl_request_parse becomes the
 * envelope to sign and send. */
void ctl_address(ctl_env *e, const char *type, const char *from, const char *to, int64_t now_ms,
                 int64_t ttl_ms);

/* Compact JSON, malloc'd; NULL when a field cannot be encoded. */
char *ctl_encode(const ctl_env *e, size_t *len);
/* Strict decode of untrusted bytes (max_brief as above). 0 ok, -1 with a
 * short reason; out is then empty (brief NULL). */
int ctl_decode(const char *json, size_t len, size_t max_brief, ctl_env *out, char *why,
               size_t whylen);
void ctl_free(ctl_env *e);

/* The length-prefixed fields a signature covers: v, type, msgId, from, to,
 * sentAt, expiresAt, then spawn: profile, name, dir, brief; stop: gid;
 * spawned: requestId, state, detail, gid. 0 ok (*buf malloc'd), -1. */
int ctl_signing_fields(const ctl_env *e, unsigned char **buf, size_t *len);
int ctl_sign(const sig_key *k, ctl_env *e);

/* Everything a receiver checks before acting, in this order: the
 * signature by the key trusted for `from`, `to` is me, sentAt not more
 * than CTL_SKEW_MS ahead, not expired, and an expiry no further than
 * CTL_MAX_TTL_MS after sentAt. Replay (a msgId seen before) is the
 * caller's, with its seen store. 0 ok, -1 with the reason. */
int ctl_accept(const ctl_env *e, const sig_trust *trust, const char *me, int64_t now_ms, char *why,
               size_t whylen);

/* ready, refused, failed, stopped */
bool ctl_state_valid(const char *s);

#endif
