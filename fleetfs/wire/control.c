/* SPDX-License-Identifier: Apache-2.0 */
/* control.c — the control plane's envelopes: spawn, stop, spawned.
 *
 * Why a file of its own beside envelope.c: a control envelope asks a host
 * to run a program, so its format is closed (an unknown key is refused,
 * not ignored: a request carrying "command" or "env" must fail loudly
 * rather than look accepted), and its lifetime is short (a request held
 * in a queue for an hour must not start an agent when it finally lands).
 * Messages have neither rule. The shapes are shared only where they are
 * the same thing: ids, names and RFC 3339 times come from envelope.h and
 * names.h, signatures from sign.h.
 *
 * Decoding treats every byte as hostile, as env_decode does: duplicate
 * keys, NUL inside strings, control characters in anything that reaches
 * a log, a status file or a terminal title (profile, name, dir, gid,
 * detail), and sizes beyond the fixed buffers are each refused with their
 * own short reason. The brief is message text (typed into the new agent
 * like a message, through the same sanitiser), so it may hold newlines. */
#include "fleetfs/wire/control.h"
#include "fleetfs/wire/names.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    json_t *root;
    char *why;
    size_t whylen;
} ctl_dec;

static int ctl_fail(ctl_dec *d, const char *fmt, const char *key)
{
    if (d->why && d->whylen)
        snprintf(d->why, d->whylen, fmt, key);
    return -1;
}

/* 1 copied, 0 absent and allowed, -1 refused. plain: no control char. */
static int ctl_str(ctl_dec *d, const char *key, bool required, bool plain, char *dst, size_t cap)
{
    json_t *j = json_object_get(d->root, key);
    size_t n;

    dst[0] = '\0';
    if (!j)
        return required ? ctl_fail(d, "missing field %s", key) : 0;
    if (!json_is_string(j))
        return ctl_fail(d, "%s is not a string", key);
    n = json_string_length(j);
    if (memchr(json_string_value(j), '\0', n))
        return ctl_fail(d, "%s contains a NUL character", key);
    if (n >= cap)
        return ctl_fail(d, "%s is too long", key);
    if (plain && !env_text_plain(json_string_value(j), n))
        return ctl_fail(d, "%s holds control characters", key);
    if (required && n == 0)
        return ctl_fail(d, "%s is empty", key);
    memcpy(dst, json_string_value(j), n + 1);
    return 1;
}

static int ctl_id(ctl_dec *d, const char *key, char *dst)
{
    if (ctl_str(d, key, true, true, dst, ENV_ID_LEN + 1) < 0)
        return -1;
    return env_id_valid(dst) ? 0 : ctl_fail(d, "%s is not 32 hex digits", key);
}

static int ctl_host(ctl_dec *d, const char *key, char *dst)
{
    if (ctl_str(d, key, true, true, dst, 64) < 0)
        return -1;
    return name_valid(dst) ? 0 : ctl_fail(d, "%s is not a valid host name", key);
}

static int ctl_time(ctl_dec *d, const char *key, char *dst)
{
    int64_t ms;

    if (ctl_str(d, key, true, true, dst, 40) < 0)
        return -1;
    return env_time_parse(dst, &ms) == 0 ? 0 : ctl_fail(d, "%s is not RFC 3339", key);
}

/* Every key of the object is in the NULL-terminated list. */
static int ctl_only(ctl_dec *d, const char *const *keys)
{
    const char *k;
    json_t *v;

    json_object_foreach(d->root, k, v)
    {
        const char *const *p = keys;

        while (*p && strcmp(*p, k) != 0)
            p++;
        if (!*p) {
            char q[40];

            /* the key is hostile text: quote a safe prefix of it only */
            snprintf(q, sizeof q, "%s", env_text_plain(k, strlen(k)) ? k : "?");
            return ctl_fail(d,
                            "unknown key '%s' (a request carries only profile, name, dir "
                            "and brief; what runs is the far host's profile)",
                            q);
        }
        (void)v;
    }
    return 0;
}

static int ctl_brief(ctl_dec *d, size_t max_brief, ctl_env *out)
{
    json_t *j = json_object_get(d->root, "brief");
    size_t n;

    if (!j)
        return 0;
    if (!json_is_string(j))
        return ctl_fail(d, "%s is not a string", "brief");
    n = json_string_length(j);
    if (memchr(json_string_value(j), '\0', n))
        return ctl_fail(d, "%s contains a NUL character", "brief");
    if (n > max_brief)
        return ctl_fail(d, "%s is larger than max_message", "brief");
    if (!text_utf8_valid(json_string_value(j), n))
        return ctl_fail(d, "%s is not valid UTF-8", "brief");
    out->brief = malloc(n + 1);
    if (!out->brief)
        return ctl_fail(d, "%s", "out of memory");
    memcpy(out->brief, json_string_value(j), n + 1);
    out->brief_len = n;
    return 0;
}

static int ctl_spawn_fields(ctl_dec *d, size_t max_brief, ctl_env *out)
{
    if (ctl_str(d, "profile", true, true, out->profile, sizeof out->profile) < 0 ||
        ctl_str(d, "name", true, true, out->name, sizeof out->name) < 0 ||
        ctl_str(d, "dir", false, true, out->dir, sizeof out->dir) < 0)
        return -1;
    if (json_object_get(d->root, "dir") && !out->dir[0])
        return ctl_fail(d, "%s is empty (leave it out for the profile's own)", "dir");
    return ctl_brief(d, max_brief, out);
}

/* The root object, or -1. Bounded before jansson builds a tree: escaping
 * can grow a brief sixfold. */
static int ctl_load(ctl_dec *d, const char *json, size_t len, size_t max_brief)
{
    json_error_t jerr;

    if (!json)
        return ctl_fail(d, "%s", "not JSON");
    if (max_brief < (SIZE_MAX - 16384) / 6 && len > max_brief * 6 + 16384)
        return ctl_fail(d, "%s", "larger than max_message allows");
    d->root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!d->root) {
        if (strstr(jerr.text, "duplicate"))
            return ctl_fail(d, "%s", "a JSON object with a key given twice");
        return ctl_fail(d, "%s", text_utf8_valid(json, len) ? "not JSON" : "not UTF-8 JSON");
    }
    if (!json_is_object(d->root))
        return ctl_fail(d, "%s", "not a JSON object");
    return 0;
}

int ctl_request_parse(const char *json, size_t len, size_t max_brief, ctl_env *out, char *why,
                      size_t whylen)
{
    static const char *const keys[] = {"profile", "name", "dir", "brief", NULL};
    ctl_dec d = {NULL, why, whylen};
    int r;

    memset(out, 0, sizeof *out);
    r = ctl_load(&d, json, len, max_brief);
    if (r == 0)
        r = ctl_only(&d, keys) < 0 ? -1 : ctl_spawn_fields(&d, max_brief, out);
    json_decref(d.root);
    if (r < 0)
        ctl_free(out);
    return r;
}

/* ---- the envelope ------------------------------------------------------- */

static const char *const ctl_header_keys[] = {"v",  "type",   "msgId",     "from",
                                              "to", "sentAt", "expiresAt", "sig"};

static int ctl_keys(ctl_dec *d, const char *type)
{
    static const char *const spawn[] = {"profile", "name", "dir", "brief"};
    static const char *const stop[] = {"gid"};
    static const char *const answer[] = {"requestId", "state", "detail", "gid"};
    const char *keys[16];
    size_t n = 0, i;
    const char *const *extra = !strcmp(type, CTL_TYPE_SPAWN)  ? spawn
                               : !strcmp(type, CTL_TYPE_STOP) ? stop
                                                              : answer;
    size_t ne = extra == spawn ? 4 : extra == stop ? 1 : 4;

    for (i = 0; i < sizeof ctl_header_keys / sizeof *ctl_header_keys; i++)
        keys[n++] = ctl_header_keys[i];
    for (i = 0; i < ne; i++)
        keys[n++] = extra[i];
    keys[n] = NULL;
    return ctl_only(d, keys);
}

static int ctl_header(ctl_dec *d, ctl_env *out)
{
    json_t *v = json_object_get(d->root, "v");

    if (!v || !json_is_integer(v) || json_integer_value(v) != 1)
        return ctl_fail(d, "%s", "unsupported version (v must be 1)");
    out->v = 1;
    if (ctl_str(d, "type", true, true, out->type, sizeof out->type) < 0)
        return -1;
    if (strcmp(out->type, CTL_TYPE_SPAWN) && strcmp(out->type, CTL_TYPE_STOP) &&
        strcmp(out->type, CTL_TYPE_SPAWNED))
        return ctl_fail(d, "%s", "type is not spawn, stop or spawned");
    if (ctl_keys(d, out->type) < 0 || ctl_id(d, "msgId", out->msgId) < 0 ||
        ctl_host(d, "from", out->from) < 0 || ctl_host(d, "to", out->to) < 0 ||
        ctl_time(d, "sentAt", out->sentAt) < 0 || ctl_time(d, "expiresAt", out->expiresAt) < 0 ||
        ctl_str(d, "sig", false, true, out->sig, sizeof out->sig) < 0)
        return -1;
    for (const char *s = out->sig; *s; s++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", *s))
            return ctl_fail(d, "%s", "sig is not base64");
    return 0;
}

static int ctl_body(ctl_dec *d, size_t max_brief, ctl_env *out)
{
    if (!strcmp(out->type, CTL_TYPE_SPAWN))
        return ctl_spawn_fields(d, max_brief, out);
    if (!strcmp(out->type, CTL_TYPE_STOP))
        return ctl_str(d, "gid", true, true, out->gid, sizeof out->gid) < 0 ? -1 : 0;
    if (ctl_id(d, "requestId", out->requestId) < 0 ||
        ctl_str(d, "state", true, true, out->state, sizeof out->state) < 0 ||
        ctl_str(d, "detail", false, true, out->detail, sizeof out->detail) < 0 ||
        ctl_str(d, "gid", false, true, out->gid, sizeof out->gid) < 0)
        return -1;
    return ctl_state_valid(out->state) ? 0
                                       : ctl_fail(d, "%s",
                                                  "state is not ready, refused, failed "
                                                  "or stopped");
}

int ctl_decode(const char *json, size_t len, size_t max_brief, ctl_env *out, char *why,
               size_t whylen)
{
    ctl_dec d = {NULL, why, whylen};
    int r;

    memset(out, 0, sizeof *out);
    if (why && whylen)
        why[0] = '\0';
    r = ctl_load(&d, json, len, max_brief);
    if (r == 0)
        r = ctl_header(&d, out) < 0 ? -1 : ctl_body(&d, max_brief, out);
    json_decref(d.root);
    if (r < 0) {
        ctl_free(out);
        memset(out, 0, sizeof *out);
    }
    return r;
}

void ctl_free(ctl_env *e)
{
    if (!e)
        return;
    free(e->brief);
    e->brief = NULL;
    e->brief_len = 0;
}

bool ctl_state_valid(const char *s)
{
    static const char *const states[] = {"ready", "refused", "failed", "stopped"};

    for (size_t i = 0; s && i < sizeof states / sizeof *states; i++)
        if (!strcmp(s, states[i]))
            return true;
    return false;
}

void ctl_init(ctl_env *e, const char *type, const char *from, const char *to, int64_t now_ms,
              int64_t ttl_ms)
{
    memset(e, 0, sizeof *e);
    ctl_address(e, type, from, to, now_ms, ttl_ms);
}

void ctl_address(ctl_env *e, const char *type, const char *from, const char *to, int64_t now_ms,
                 int64_t ttl_ms)
{
    e->v = 1;
    snprintf(e->type, sizeof e->type, "%s", type);
    env_new_msgid(e->msgId);
    snprintf(e->from, sizeof e->from, "%s", from);
    snprintf(e->to, sizeof e->to, "%s", to);
    if (ttl_ms < 1 || ttl_ms > CTL_MAX_TTL_MS)
        ttl_ms = ttl_ms < 1 ? 1 : CTL_MAX_TTL_MS;
    env_time_format(now_ms, e->sentAt);
    env_time_format(now_ms + ttl_ms, e->expiresAt);
}

/* ---- encode and sign ---------------------------------------------------- */

static bool ctl_put(json_t *o, const char *key, const char *s, bool optional)
{
    if (optional && !s[0])
        return true;
    return json_object_set_new(o, key, json_string(s)) == 0;
}

char *ctl_encode(const ctl_env *e, size_t *len)
{
    json_t *o = json_object();
    bool ok = o && json_object_set_new(o, "v", json_integer(e->v)) == 0;
    char *s = NULL;

    ok = ok && ctl_put(o, "type", e->type, false) && ctl_put(o, "msgId", e->msgId, false) &&
         ctl_put(o, "from", e->from, false) && ctl_put(o, "to", e->to, false) &&
         ctl_put(o, "sentAt", e->sentAt, false) && ctl_put(o, "expiresAt", e->expiresAt, false);
    if (!strcmp(e->type, CTL_TYPE_SPAWN)) {
        ok = ok && ctl_put(o, "profile", e->profile, false) && ctl_put(o, "name", e->name, false) &&
             ctl_put(o, "dir", e->dir, true);
        if (ok && e->brief)
            ok = !memchr(e->brief, '\0', e->brief_len) &&
                 json_object_set_new(o, "brief", json_stringn(e->brief, e->brief_len)) == 0;
    } else if (!strcmp(e->type, CTL_TYPE_STOP)) {
        ok = ok && ctl_put(o, "gid", e->gid, false);
    } else {
        ok = ok && ctl_put(o, "requestId", e->requestId, false) &&
             ctl_put(o, "state", e->state, false) && ctl_put(o, "detail", e->detail, true) &&
             ctl_put(o, "gid", e->gid, true);
    }
    ok = ok && ctl_put(o, "sig", e->sig, true);
    if (ok)
        s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s && len)
        *len = strlen(s);
    json_decref(o);
    return s;
}

static unsigned char *ctl_field(unsigned char *p, const char *s, size_t n)
{
    for (int i = 7; i >= 0; i--)
        *p++ = (unsigned char)((uint64_t)n >> (8 * i));
    if (n)
        memcpy(p, s, n);
    return p + n;
}

int ctl_signing_fields(const ctl_env *e, unsigned char **buf, size_t *len)
{
    char v[16];
    const char *f[12] = {v, e->type, e->msgId, e->from, e->to, e->sentAt, e->expiresAt};
    size_t fl[12], nf = 7, total = 0;
    unsigned char *p;

    snprintf(v, sizeof v, "%d", e->v);
    for (size_t i = 0; i < nf; i++)
        fl[i] = strlen(f[i]);
    if (!strcmp(e->type, CTL_TYPE_SPAWN)) {
        f[nf] = e->profile, fl[nf] = strlen(e->profile), nf++;
        f[nf] = e->name, fl[nf] = strlen(e->name), nf++;
        f[nf] = e->dir, fl[nf] = strlen(e->dir), nf++;
        f[nf] = e->brief ? e->brief : "", fl[nf] = e->brief ? e->brief_len : 0, nf++;
    } else if (!strcmp(e->type, CTL_TYPE_STOP)) {
        f[nf] = e->gid, fl[nf] = strlen(e->gid), nf++;
    } else {
        f[nf] = e->requestId, fl[nf] = strlen(e->requestId), nf++;
        f[nf] = e->state, fl[nf] = strlen(e->state), nf++;
        f[nf] = e->detail, fl[nf] = strlen(e->detail), nf++;
        f[nf] = e->gid, fl[nf] = strlen(e->gid), nf++;
    }
    for (size_t i = 0; i < nf; i++)
        total += 8 + fl[i];
    *buf = p = malloc(total);
    if (!p)
        return -1;
    for (size_t i = 0; i < nf; i++)
        p = ctl_field(p, f[i], fl[i]);
    *len = total;
    return 0;
}

int ctl_sign(const sig_key *k, ctl_env *e)
{
    unsigned char *buf;
    size_t len;
    int rc;

    if (ctl_signing_fields(e, &buf, &len) < 0)
        return -1;
    rc = sig_sign_bytes(k, buf, len, e->sig, sizeof e->sig);
    free(buf);
    return rc;
}

/* ---- what a receiver checks --------------------------------------------- */

static int ctl_why(char *why, size_t n, const char *fmt, const char *arg)
{
    if (why && n)
        snprintf(why, n, fmt, arg);
    return -1;
}

int ctl_accept(const ctl_env *e, const sig_trust *trust, const char *me, int64_t now_ms, char *why,
               size_t whylen)
{
    unsigned char *buf;
    size_t len;
    sig_result r;
    int64_t sent, exp;

    if (ctl_signing_fields(e, &buf, &len) < 0)
        return ctl_why(why, whylen, "%s", "out of memory");
    r = sig_verify_bytes(trust, e->from, e->sig, sizeof e->sig, buf, len);
    free(buf);
    if (r != SIG_OK)
        return ctl_why(why, whylen, "signature: %s", sig_result_name(r));
    if (strcmp(e->to, me) != 0)
        return ctl_why(why, whylen, "addressed to %s, not to this host", e->to);
    if (env_time_parse(e->sentAt, &sent) < 0 || env_time_parse(e->expiresAt, &exp) < 0)
        return ctl_why(why, whylen, "%s", "times are not RFC 3339");
    if (sent > now_ms + CTL_SKEW_MS)
        return ctl_why(why, whylen, "%s", "sent in the future (clocks more than 60 s apart?)");
    if (exp <= now_ms)
        return ctl_why(why, whylen, "%s", "expired before it arrived");
    if (exp - sent > CTL_MAX_TTL_MS)
        return ctl_why(why, whylen, "%s", "an expiry longer than 5 minutes after sentAt");
    return 0;
}
