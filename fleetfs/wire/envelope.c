/* SPDX-License-Identifier: Apache-2.0 */
/* envelope.c — encoding and strict decoding of the SPEC section 4 envelope
 * (messages and receipts), msgIds, RFC 3339 times and the plain-text check.
 * Heartbeats are heartbeat.c's.  The envelope types share one strict
 * decoder and one signing-field layout, defined here and shared through
 * env_int.h: one copy of each is what keeps their rules identical.
 *
 * Decoding treats every byte as hostile: envelopes arrive from the broker,
 * which any host with a login can publish to, and the decoder is fuzzed.
 * So it checks everything a later stage would otherwise have to trust —
 * types, lengths against the fixed buffers, names, ids, times, UTF-8, NUL,
 * size — and explains a refusal in a few words that go to the log and the
 * dead-letter count. jansson parses with JSON_REJECT_DUPLICATES (two "to"
 * keys must not let a checker and a user see different recipients) and
 * JSON_ALLOW_NUL, so "\u0000" reaches us and is refused with its own
 * reason instead of being a generic parse error.
 *
 * Encoding builds the same object with keys in SPEC order. The JSON text is
 * not canonical, which is why env_signing_fields exists: a signature covers
 * length-prefixed field bytes, and any two encoders agree on those.
 *
 * Times are RFC 3339 in UTC with milliseconds. The civil-date arithmetic is
 * done here (days-from-civil, proleptic Gregorian) rather than with timegm
 * and gmtime_r, so it neither depends on TZ nor on the C library's range. */
#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/env_int.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/base/log.h"

#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- ids ---------------------------------------------------------------- */

/* A thread's random bytes for msgIds, drawn 32 ids at a time: one
 * getrandom(2) per id was one system call in every send.  A forked child
 * (the thread that forked) draws afresh, so it never repeats its parent's. */
static _Thread_local unsigned char id_pool[32 * (ENV_ID_LEN / 2)];
static _Thread_local size_t id_used = sizeof id_pool;
static pthread_once_t id_once = PTHREAD_ONCE_INIT;

static void id_pool_forget(void)
{
    id_used = sizeof id_pool;
}

static void id_pool_init(void)
{
    pthread_atfork(NULL, NULL, id_pool_forget);
}

void env_new_msgid(char out[ENV_ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char *raw;
    size_t i;

    pthread_once(&id_once, id_pool_init);
    if (id_used + ENV_ID_LEN / 2 > sizeof id_pool) {
        /* Idempotent and thread-safe; a failure means no entropy source,
         * and predictable ids would defeat the replay check, so stop. */
        if (sodium_init() < 0)
            abort();
        randombytes_buf(id_pool, sizeof id_pool);
        id_used = 0;
    }
    raw = id_pool + id_used;
    id_used += ENV_ID_LEN / 2;
    for (i = 0; i < ENV_ID_LEN / 2; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    sodium_memzero(raw, ENV_ID_LEN / 2); /* each byte serves one id */
    out[ENV_ID_LEN] = '\0';
}

bool env_id_valid(const char *s)
{
    size_t i;

    if (s == NULL)
        return false;
    for (i = 0; i < ENV_ID_LEN; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return s[ENV_ID_LEN] == '\0';
}

const char *env_receipt_recipient(const envelope *e)
{
    return e->recipient[0] != '\0' ? e->recipient : e->from;
}

bool env_receipt_state_valid(const char *s)
{
    static const char *const states[] = {
        "injected", "confirmed", "acked", "uncertain", "rejected", "expired",
    };
    size_t i;

    for (i = 0; s != NULL && i < sizeof(states) / sizeof(states[0]); i++) {
        if (strcmp(s, states[i]) == 0)
            return true;
    }
    return false;
}

/* ---- time --------------------------------------------------------------- */

#define ENV_MS_PER_DAY 86400000LL
#define ENV_MIN_MS (-62135596800000LL) /* 0001-01-01T00:00:00.000Z */
#define ENV_MAX_MS 253402300799999LL   /* 9999-12-31T23:59:59.999Z */

int64_t env_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t env_days_from_civil(int y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void env_civil_from_days(int64_t z, int *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

void env_time_format(int64_t ms, char out[40])
{
    int64_t days, rem;
    int y, mo, d;

    if (ms < ENV_MIN_MS)
        ms = ENV_MIN_MS;
    if (ms > ENV_MAX_MS)
        ms = ENV_MAX_MS;
    days = ms / ENV_MS_PER_DAY;
    rem = ms % ENV_MS_PER_DAY;
    if (rem < 0) {
        rem += ENV_MS_PER_DAY;
        days--;
    }
    env_civil_from_days(days, &y, &mo, &d);
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", y, mo, d, (int)(rem / 3600000),
             (int)(rem / 60000 % 60), (int)(rem / 1000 % 60), (int)(rem % 1000));
}

/* Reads exactly n digits at *p; -1 if any is not a digit. */
static int env_digits(const char **p, int n)
{
    int v = 0;

    for (; n > 0; n--, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        v = v * 10 + (**p - '0');
    }
    return v;
}

static int env_expect(const char **p, const char *chars)
{
    if (**p == '\0' || strchr(chars, **p) == NULL)
        return -1;
    (*p)++;
    return 0;
}

static int env_days_in_month(int y, int m)
{
    static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : dim[m - 1];
}

/* "Z", or "+hh:mm"/"-hh:mm" as signed minutes east of UTC. */
static int env_parse_offset(const char **p, int *minutes)
{
    int sign, oh, om;

    if (**p == 'Z' || **p == 'z') {
        (*p)++;
        *minutes = 0;
        return 0;
    }
    if (**p != '+' && **p != '-')
        return -1;
    sign = **p == '-' ? -1 : 1;
    (*p)++;
    oh = env_digits(p, 2);
    if (oh < 0 || oh > 23 || env_expect(p, ":") < 0)
        return -1;
    om = env_digits(p, 2);
    if (om < 0 || om > 59)
        return -1;
    *minutes = sign * (oh * 60 + om);
    return 0;
}

int env_time_parse(const char *s, int64_t *ms)
{
    const char *p = s;
    int y, mo, d, h, mi, sec, frac = 0, scale = 100, off;

    if (s == NULL)
        return -1;
    if ((y = env_digits(&p, 4)) < 0 || env_expect(&p, "-") < 0 || (mo = env_digits(&p, 2)) < 0 ||
        env_expect(&p, "-") < 0 || (d = env_digits(&p, 2)) < 0 || env_expect(&p, "Tt") < 0 ||
        (h = env_digits(&p, 2)) < 0 || env_expect(&p, ":") < 0 || (mi = env_digits(&p, 2)) < 0 ||
        env_expect(&p, ":") < 0 || (sec = env_digits(&p, 2)) < 0)
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > env_days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
        return -1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        /* Milliseconds from the first three digits; finer ones truncate. */
        for (; *p >= '0' && *p <= '9'; p++) {
            frac += (*p - '0') * scale;
            scale /= 10;
        }
    }
    if (env_parse_offset(&p, &off) < 0 || *p != '\0')
        return -1;
    *ms = env_days_from_civil(y, mo, d) * ENV_MS_PER_DAY +
          ((int64_t)h * 3600 + mi * 60 + sec - (int64_t)off * 60) * 1000 + frac;
    return 0;
}

/* ---- encode ------------------------------------------------------------- */

static bool env_is_receipt(const envelope *e)
{
    return strcmp(e->type, ENV_TYPE_RECEIPT) == 0;
}

/* Adds key = s unless s is empty; false when jansson refuses (bad UTF-8). */
bool env_put_opt(json_t *o, const char *key, const char *s)
{
    return s[0] == '\0' || json_object_set_new(o, key, json_string(s)) == 0;
}

bool env_put(json_t *o, const char *key, const char *s)
{
    return json_object_set_new(o, key, json_string(s)) == 0;
}

static json_t *env_body_json(const envelope *e)
{
    if (e->body == NULL)
        return e->body_len == 0 ? json_string("") : NULL;
    if (memchr(e->body, '\0', e->body_len) != NULL)
        return NULL;
    return json_stringn(e->body, e->body_len);
}

char *env_dump_line(json_t *o, bool newline, size_t *len)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t n;
    char *grown;

    if (s == NULL)
        return NULL;
    n = strlen(s);
    if (newline) {
        grown = realloc(s, n + 2);
        if (grown == NULL) {
            free(s);
            return NULL;
        }
        s = grown;
        s[n++] = '\n';
        s[n] = '\0';
    }
    if (len != NULL)
        *len = n;
    return s;
}

char *env_encode(const envelope *e, size_t *len)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    bool receipt = env_is_receipt(e);
    char *s = NULL;

    ok = ok && json_object_set_new(o, "v", json_integer(e->v)) == 0;
    ok = ok && env_put(o, "type", e->type) && env_put(o, "msgId", e->msgId);
    ok = ok && env_put(o, "from", e->from) && env_put(o, "to", e->to);
    ok = ok && env_put(o, "sentAt", e->sentAt);
    ok = ok && env_put(o, "expiresAt", e->expiresAt);
    ok = ok && env_put_opt(o, "replyTo", e->replyTo);
    if (receipt) {
        ok = ok && env_put_opt(o, "ref", e->ref);
        ok = ok && env_put_opt(o, "state", e->state);
        ok = ok && env_put_opt(o, "recipient", e->recipient);
        ok = ok && env_put_opt(o, "detail", e->detail);
    }
    if (ok && (!receipt || e->body_len > 0))
        ok = json_object_set_new(o, "body", env_body_json(e)) == 0;
    ok = ok && env_put_opt(o, "sig", e->sig);
    if (ok)
        s = env_dump_line(o, false, len);
    json_decref(o);
    return s;
}

char *env_inbox_line(const envelope *e, const char *receivedAt, bool redelivered, size_t *len)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    char *s = NULL;

    ok = ok && env_put(o, "msgId", e->msgId) && env_put(o, "from", e->from);
    ok = ok && env_put(o, "to", e->to) && env_put(o, "sentAt", e->sentAt);
    ok = ok && env_put(o, "expiresAt", e->expiresAt);
    ok = ok && env_put(o, "receivedAt", receivedAt ? receivedAt : "");
    ok = ok && json_object_set_new(o, "redelivered", json_boolean(redelivered)) == 0;
    ok = ok && json_object_set_new(o, "body", env_body_json(e)) == 0;
    ok = ok && env_put_opt(o, "replyTo", e->replyTo);
    if (ok)
        s = env_dump_line(o, true, len);
    json_decref(o);
    return s;
}

void env_peek(const char *json, size_t len, char id[ENV_ID_LEN + 1], char from[64])
{
    json_t *o = json ? json_loadb(json, len, 0, NULL) : NULL;
    const char *i = json_string_value(json_object_get(o, "msgId"));
    const char *f = json_string_value(json_object_get(o, "from"));
    snprintf(id, ENV_ID_LEN + 1, "%s", i && env_id_valid(i) ? i : "?");
    snprintf(from, 64, "%s", f && id_valid(f) && strlen(f) < 64 ? f : "?");
    json_decref(o);
}

/* ---- decode ------------------------------------------------------------- */

/* Records the reason; fmt may hold one %s for key. Always returns -1. */
int env_failk(struct env_dec *dc, const char *fmt, const char *key)
{
    if (dc->why != NULL && dc->whylen > 0)
        snprintf(dc->why, dc->whylen, fmt, key);
    return -1;
}

int env_fail(struct env_dec *dc, const char *msg)
{
    return env_failk(dc, "%s", msg);
}

/* Copies string field key into dst[dstsz]. 1 copied, 0 absent and allowed,
 * -1 refused (reason set). */
int env_get_str(struct env_dec *dc, const char *key, bool required, char *dst, size_t dstsz)
{
    json_t *j = json_object_get(dc->root, key);
    size_t n;

    dst[0] = '\0';
    if (j == NULL)
        return required ? env_failk(dc, "missing field %s", key) : 0;
    if (!json_is_string(j))
        return env_failk(dc, "%s is not a string", key);
    n = json_string_length(j);
    if (memchr(json_string_value(j), '\0', n) != NULL)
        return env_failk(dc, "%s contains a NUL character", key);
    if (n >= dstsz)
        return env_failk(dc, "%s is too long", key);
    memcpy(dst, json_string_value(j), n + 1);
    return 1;
}

int env_get_time(struct env_dec *dc, const char *key, char *dst)
{
    int64_t ms;

    if (env_get_str(dc, key, true, dst, 40) < 0)
        return -1;
    if (env_time_parse(dst, &ms) < 0)
        return env_failk(dc, "%s is not RFC 3339", key);
    return 0;
}

static int env_get_id(struct env_dec *dc, const char *key, bool required, char *dst)
{
    int r = env_get_str(dc, key, required, dst, ENV_ID_LEN + 1);

    if (r == 1 && !env_id_valid(dst))
        return env_failk(dc, "%s is not 32 hex digits", key);
    return r < 0 ? -1 : 0;
}

int env_get_name(struct env_dec *dc, const char *key, char *dst)
{
    if (env_get_str(dc, key, true, dst, 64) < 0)
        return -1;
    if (!name_valid(dst))
        return env_failk(dc, "%s is not a valid lead name", key);
    return 0;
}

/* An id (coord_id or gid) in dst[ADDR_MAX_LEN + 1]. */
static int env_get_id_field(struct env_dec *dc, const char *key, bool required, char *dst)
{
    int r = env_get_str(dc, key, required, dst, ADDR_MAX_LEN + 1);

    if (r == 1 && !id_valid(dst))
        return env_failk(dc, "%s is not a valid lead name or agent id (name@coord_id)", key);
    return r < 0 ? -1 : 0;
}

/* A message's to: an id, or group:<g> (SPEC section 10). */
static int env_get_to(struct env_dec *dc, envelope *out)
{
    addr a;

    if (env_get_str(dc, "to", true, out->to, sizeof(out->to)) < 0)
        return -1;
    if (!addr_parse(out->to, &a))
        return env_fail(dc, "to is not a valid lead name, agent id (name@coord_id) or "
                            "group:<group>");
    return 0;
}

bool env_base64_ok(const char *s)
{
    for (; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '+' || *s == '/' || *s == '='))
            return false;
    }
    return true;
}

static int env_get_header(struct env_dec *dc, envelope *out)
{
    json_t *v = json_object_get(dc->root, "v");

    if (v == NULL)
        return env_failk(dc, "missing field %s", "v");
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        return env_fail(dc, "unsupported version (v must be 1)");
    out->v = 1;
    if (env_get_str(dc, "type", true, out->type, sizeof(out->type)) < 0)
        return -1;
    if (strcmp(out->type, ENV_TYPE_COORD) != 0 && strcmp(out->type, ENV_TYPE_RECEIPT) != 0)
        return env_fail(dc, "type is not coord or receipt");
    if (env_get_id(dc, "msgId", true, out->msgId) < 0 ||
        env_get_id_field(dc, "from", true, out->from) < 0 ||
        (env_is_receipt(out) ? env_get_id_field(dc, "to", true, out->to) : env_get_to(dc, out)) <
            0 ||
        env_get_time(dc, "sentAt", out->sentAt) < 0 ||
        env_get_time(dc, "expiresAt", out->expiresAt) < 0 ||
        env_get_id(dc, "replyTo", false, out->replyTo) < 0)
        return -1;
    if (env_get_str(dc, "sig", false, out->sig, sizeof(out->sig)) < 0)
        return -1;
    if (!env_base64_ok(out->sig))
        return env_fail(dc, "sig is not base64");
    return 0;
}

static int env_get_receipt(struct env_dec *dc, envelope *out)
{
    static const char *const only[] = {"ref", "state", "recipient", "detail"};
    char h1[NAME_MAX_LEN + 1], h2[NAME_MAX_LEN + 1];
    size_t i;

    if (!env_is_receipt(out)) {
        for (i = 0; i < sizeof(only) / sizeof(only[0]); i++) {
            if (json_object_get(dc->root, only[i]) != NULL)
                return env_failk(dc, "%s is only allowed in receipts", only[i]);
        }
        return 0;
    }
    if (env_get_id(dc, "ref", true, out->ref) < 0 ||
        env_get_str(dc, "state", true, out->state, sizeof(out->state)) < 0 ||
        env_get_id_field(dc, "recipient", false, out->recipient) < 0 ||
        env_get_str(dc, "detail", false, out->detail, sizeof(out->detail)) < 0)
        return -1;
    if (!env_receipt_state_valid(out->state))
        return env_fail(dc, "state is not a receipt state");
    /* a host answers for its own entities only: the signature is checked
     * against the key of from's host, so the recipient must live there */
    if (json_object_get(dc->root, "recipient") != NULL &&
        (!id_host(out->recipient, h1) || !id_host(out->from, h2) || strcmp(h1, h2) != 0))
        return env_fail(dc, "recipient does not live on the host of from");
    /* advisory and unsigned: kept, but never with a control character (it
     * reaches the sender's log and sent file) */
    log_clean(out->detail);
    return 0;
}

static int env_get_body(struct env_dec *dc, envelope *out, size_t max_body)
{
    json_t *j = json_object_get(dc->root, "body");
    const char *s = "";
    size_t n = 0;

    if (j == NULL && !env_is_receipt(out))
        return env_failk(dc, "missing field %s", "body");
    if (j != NULL) {
        if (!json_is_string(j))
            return env_fail(dc, "body is not a string");
        s = json_string_value(j);
        n = json_string_length(j);
    }
    if (n == 0 && !env_is_receipt(out))
        return env_fail(dc, "body is empty");
    if (memchr(s, '\0', n) != NULL)
        return env_fail(dc, "body contains a NUL character");
    if (n > max_body)
        return env_fail(dc, "body larger than max_message");
    if (!text_utf8_valid(s, n))
        return env_fail(dc, "body is not valid UTF-8");
    out->body = malloc(n + 1);
    if (out->body == NULL)
        return env_fail(dc, "out of memory");
    memcpy(out->body, s, n + 1);
    out->body_len = n;
    return 0;
}

/* Escaping can grow a body at most sixfold ("\u00XX"); anything longer than
 * that plus generous room for the other fields cannot hold an acceptable
 * body, so it is refused before jansson allocates a tree for it. */
static bool env_too_long(size_t len, size_t max_body)
{
    const size_t room = 16384;

    if (max_body > (SIZE_MAX - room) / 6)
        return false;
    return len > max_body * 6 + room;
}

int env_decode(const char *json, size_t len, size_t max_body, envelope *out, char *why,
               size_t whylen)
{
    struct env_dec dc = {NULL, why, whylen};
    json_error_t jerr;
    int r;

    memset(out, 0, sizeof(*out));
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (json == NULL)
        return env_fail(&dc, "not JSON");
    if (env_too_long(len, max_body))
        return env_fail(&dc, "envelope larger than max_message allows");
    dc.root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (dc.root == NULL) {
        if (!text_utf8_valid(json, len))
            return env_fail(&dc, "not JSON (invalid UTF-8 or NUL bytes)");
        if (strstr(jerr.text, "duplicate"))
            return env_failk(&dc, "a JSON object with a key given twice (%s)", jerr.text);
        return env_fail(&dc, "not JSON");
    }
    if (!json_is_object(dc.root))
        r = env_fail(&dc, "not a JSON object");
    else if (env_get_header(&dc, out) < 0 || env_get_receipt(&dc, out) < 0)
        r = -1;
    else
        r = env_get_body(&dc, out, max_body);
    json_decref(dc.root);
    if (r < 0)
        env_free(out);
    return r;
}

void env_free(envelope *e)
{
    if (e == NULL)
        return;
    free(e->body);
    e->body = NULL;
    e->body_len = 0;
}

/* ---- signing ------------------------------------------------------------ */

unsigned char *env_put_field(unsigned char *p, const void *data, size_t n)
{
    int i;

    for (i = 7; i >= 0; i--)
        *p++ = (unsigned char)((uint64_t)n >> (8 * i));
    if (n > 0)
        memcpy(p, data, n);
    return p + n;
}

int env_signing_fields(const envelope *e, unsigned char **buf, size_t *len)
{
    char v[16];
    const char *body = e->body != NULL ? e->body : "";
    const char *f[] = {v,     e->type,   e->msgId,     e->from,
                       e->to, e->sentAt, e->expiresAt, e->replyTo,
                       body,  e->ref,    e->state,     e->recipient};
    size_t flen[sizeof(f) / sizeof(f[0])];
    /* a receipt's recipient is the twelfth field only when it is set, so
     * every receipt signed before recipients existed verifies as it did */
    size_t nf = !env_is_receipt(e) ? 9 : e->recipient[0] != '\0' ? 12 : 11;
    size_t i, total = 0;
    unsigned char *p;

    snprintf(v, sizeof(v), "%d", e->v);
    for (i = 0; i < nf; i++) {
        flen[i] = f[i] == body ? (e->body != NULL ? e->body_len : 0) : strlen(f[i]);
        total += 8 + flen[i];
    }
    *buf = malloc(total);
    if (*buf == NULL)
        return -1;
    p = *buf;
    for (i = 0; i < nf; i++)
        p = env_put_field(p, f[i], flen[i]);
    *len = total;
    return 0;
}

/* ---- plain text --------------------------------------------------------- */

bool env_text_plain(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i;

    if (!text_utf8_valid(s, n))
        return false;
    for (i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f)
            return false;
        /* C1 controls U+0080..U+009F are 0xC2 0x80..0x9F in UTF-8 */
        if (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            return false;
    }
    return true;
}
