/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/wire/heartbeat.c — the heartbeat envelope (SPEC section 3,
 * doc/protocol.md; envelope.h has its fields), with its agents and groups
 * (SPEC section 10) and profiles (SPEC section 11) extensions: encoding,
 * strict decoding and the byte strings its three signatures cover (sig the
 * core fields, asig groups and agents, psig profiles, gsig the group
 * interval).
 *
 * A file of its own beside envelope.c because only presence speaks it (and
 * sign.c signs it), and its lists are what messages and receipts do not
 * have. The rules are envelope.c's all the same: one strict decoder, the
 * same JSON writers and length-prefixed signing fields, shared through
 * env_int.h. Decoding treats every byte as hostile, as env_decode does
 * (both are fuzzed: tests/fuzz/fuzz_envelope.c).
 *
 * Unknown fields in a heartbeat are ignored (they are not signed, so they
 * cannot carry anything fleetfs believes): a later version may add some. */
#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/env_int.h"
#include "fleetfs/wire/names.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the agents extension (envelope.h) ---- */

static bool env_hb_group_ok(const char *g)
{
    return group_valid(g) && strcmp(g, GROUP_ALL) != 0;
}

static json_t *env_hb_groups_json(char *const *groups, size_t n)
{
    json_t *a = json_array();

    if (a == NULL || n > ENV_HB_MAX_GROUPS)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        if (groups == NULL || !env_hb_group_ok(groups[i]) ||
            json_array_append_new(a, json_string(groups[i])) != 0)
            goto bad;
    }
    return a;
bad:
    json_decref(a);
    return NULL;
}

static json_t *env_hb_agents_json(const env_heartbeat *h)
{
    json_t *a = json_array();

    if (a == NULL || h->n_agents > ENV_HB_MAX_AGENTS)
        goto bad;
    for (size_t i = 0; i < h->n_agents; i++) {
        const env_hb_agent *ag = &h->agents[i];
        json_t *o;

        if (!gid_valid(ag->gid) || !env_text_plain(ag->state, strlen(ag->state)))
            goto bad;
        o = json_pack("{s:s,s:s,s:o*}", "gid", ag->gid, "state", ag->state, "groups",
                      ag->n_groups > 0 ? env_hb_groups_json(ag->groups, ag->n_groups) : NULL);
        if (o == NULL || (ag->n_groups > 0 && json_object_get(o, "groups") == NULL) ||
            json_array_append_new(a, o) != 0)
            goto bad;
    }
    return a;
bad:
    json_decref(a);
    return NULL;
}

static bool env_hb_put_ext(json_t *o, const env_heartbeat *h)
{
    json_t *g = env_hb_groups_json(h->groups, h->n_groups);
    json_t *a = g != NULL ? env_hb_agents_json(h) : NULL;

    if (g == NULL || a == NULL) {
        json_decref(g);
        return false;
    }
    return json_object_set_new(o, "groups", g) == 0 && json_object_set_new(o, "agents", a) == 0;
}

static bool env_hb_put_profiles(json_t *o, const env_heartbeat *h)
{
    json_t *a = json_array();

    if (a == NULL || h->n_profiles > ENV_HB_MAX_PROFILES) {
        json_decref(a);
        return false;
    }
    for (size_t i = 0; i < h->n_profiles; i++) {
        if (h->profiles == NULL || !agent_name_valid(h->profiles[i]) ||
            json_array_append_new(a, json_string(h->profiles[i])) != 0) {
            json_decref(a);
            return false;
        }
    }
    return json_object_set_new(o, "profiles", a) == 0;
}

void env_hb_free(env_heartbeat *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; h->groups != NULL && h->groups[i] != NULL; i++)
        free(h->groups[i]);
    free(h->groups);
    for (size_t i = 0; h->agents != NULL && i < h->n_agents; i++) {
        for (size_t j = 0; h->agents[i].groups != NULL && h->agents[i].groups[j] != NULL; j++)
            free(h->agents[i].groups[j]);
        free(h->agents[i].groups);
    }
    free(h->agents);
    for (size_t i = 0; h->profiles != NULL && h->profiles[i] != NULL; i++)
        free(h->profiles[i]);
    free(h->profiles);
    h->groups = NULL;
    h->n_groups = 0;
    h->agents = NULL;
    h->n_agents = 0;
    h->profiles = NULL;
    h->n_profiles = 0;
}

char *env_hb_encode(const env_heartbeat *h, size_t *len)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    char *s = NULL;
    size_t n = 0;

    ok = ok && env_text_plain(h->host, strlen(h->host)) &&
         env_text_plain(h->version, strlen(h->version)) &&
         env_text_plain(h->agent, strlen(h->agent));
    ok = ok && json_object_set_new(o, "v", json_integer(h->v)) == 0;
    ok = ok && env_put(o, "type", ENV_TYPE_HEARTBEAT) && env_put(o, "from", h->from);
    ok = ok && env_put(o, "host", h->host) && env_put(o, "version", h->version);
    ok = ok && env_put(o, "sentAt", h->sentAt) && env_put(o, "expiresAt", h->expiresAt);
    ok = ok && env_put(o, "startedAt", h->startedAt);
    ok = ok && json_object_set_new(o, "interval", json_integer(h->interval_ms)) == 0;
    ok = ok && env_put(o, "agent", h->agent);
    ok = ok && json_object_set_new(o, "leaving", json_boolean(h->leaving)) == 0;
    ok = ok && (!h->ext || env_hb_put_ext(o, h));
    ok = ok && env_put_opt(o, "sig", h->sig);
    ok = ok && (!h->ext || env_put_opt(o, "asig", h->asig));
    ok = ok && (!h->has_profiles || env_hb_put_profiles(o, h));
    ok = ok && (!h->has_profiles || env_put_opt(o, "psig", h->psig));
    ok = ok && (!h->has_group_iv ||
                (h->group_interval_ms >= h->interval_ms && h->group_interval_ms <= 3600000 &&
                 json_object_set_new(o, "groupInterval", json_integer(h->group_interval_ms)) == 0 &&
                 env_put_opt(o, "gsig", h->gsig)));
    if (ok)
        s = env_dump_line(o, false, &n);
    json_decref(o);
    if (s != NULL && n > ENV_HB_MAX_LEN) {
        free(s);
        return NULL;
    }
    if (s != NULL && len != NULL)
        *len = n;
    return s;
}

static int env_get_plain(struct env_dec *dc, const char *key, char *dst, size_t dstsz)
{
    if (env_get_str(dc, key, true, dst, dstsz) < 0)
        return -1;
    if (!env_text_plain(dst, strlen(dst)))
        return env_failk(dc, "%s holds control characters or bad UTF-8", key);
    return 0;
}

static int env_hb_fields(struct env_dec *dc, env_heartbeat *out)
{
    json_t *v = json_object_get(dc->root, "v");
    json_t *lv = json_object_get(dc->root, "leaving");
    json_t *iv = json_object_get(dc->root, "interval");
    char type[16];

    if (v == NULL || !json_is_integer(v) || json_integer_value(v) != 1)
        return env_fail(dc, "unsupported version (v must be 1)");
    out->v = 1;
    if (env_get_str(dc, "type", true, type, sizeof(type)) < 0)
        return -1;
    if (strcmp(type, ENV_TYPE_HEARTBEAT) != 0)
        return env_fail(dc, "type is not heartbeat");
    if (env_get_name(dc, "from", out->from) < 0 ||
        env_get_plain(dc, "host", out->host, sizeof(out->host)) < 0 ||
        env_get_plain(dc, "version", out->version, sizeof(out->version)) < 0 ||
        env_get_time(dc, "sentAt", out->sentAt) < 0 ||
        env_get_time(dc, "expiresAt", out->expiresAt) < 0 ||
        env_get_time(dc, "startedAt", out->startedAt) < 0 ||
        env_get_plain(dc, "agent", out->agent, sizeof(out->agent)) < 0)
        return -1;
    if (iv == NULL || !json_is_integer(iv) || json_integer_value(iv) < 1 ||
        json_integer_value(iv) > 3600000)
        return env_fail(dc, "interval is not an integer 1..3600000 (ms)");
    out->interval_ms = json_integer_value(iv);
    if (lv == NULL || !json_is_boolean(lv))
        return env_fail(dc, "leaving is not true or false");
    out->leaving = json_is_true(lv);
    if (env_get_str(dc, "sig", false, out->sig, sizeof(out->sig)) < 0)
        return -1;
    if (!env_base64_ok(out->sig))
        return env_fail(dc, "sig is not base64");
    return 0;
}

/* A copy of string member key of obj into dst[dstsz]; why prefixed. */
static int env_obj_str(struct env_dec *dc, json_t *obj, const char *key, char *dst, size_t dstsz)
{
    json_t *j = json_object_get(obj, key);
    size_t n;

    if (j == NULL)
        return env_failk(dc, "agents: missing %s", key);
    if (!json_is_string(j))
        return env_failk(dc, "agents: %s is not a string", key);
    n = json_string_length(j);
    if (n >= dstsz)
        return env_failk(dc, "agents: %s is too long", key);
    if (memchr(json_string_value(j), '\0', n) != NULL)
        return env_failk(dc, "agents: %s contains a NUL character", key);
    memcpy(dst, json_string_value(j), n + 1);
    return 0;
}

/* A group list (absent: none); *out malloc'd, NULL-terminated. */
static int env_hb_get_groups(struct env_dec *dc, json_t *j, const char *who, char ***out, size_t *n)
{
    size_t i, k = j != NULL ? json_array_size(j) : 0;

    *out = NULL;
    *n = 0;
    if (j == NULL)
        return 0; /* nothing allocated: an old heartbeat needs no env_hb_free */
    if (!json_is_array(j))
        return env_failk(dc, "%sgroups is not a list", who);
    if (k > ENV_HB_MAX_GROUPS)
        return env_failk(dc, "%sgroups: more than 16", who);
    *out = calloc(k + 1, sizeof(char *));
    if (*out == NULL)
        return env_fail(dc, "out of memory");
    for (i = 0; i < k; i++) {
        const char *g = json_string_value(json_array_get(j, i));

        if (g == NULL || strlen(g) != json_string_length(json_array_get(j, i)) || !group_valid(g))
            return env_failk(dc, "%sgroups: not a group name", who);
        if (strcmp(g, GROUP_ALL) == 0)
            return env_failk(dc, "%sgroups: 'all' is implied, never listed", who);
        (*out)[i] = strdup(g);
        if ((*out)[i] == NULL)
            return env_fail(dc, "out of memory");
        (*n)++;
    }
    return 0;
}

static int env_hb_get_agent(struct env_dec *dc, json_t *o, env_hb_agent *a)
{
    if (!json_is_object(o))
        return env_fail(dc, "agents: an entry is not an object");
    if (env_obj_str(dc, o, "gid", a->gid, sizeof(a->gid)) < 0)
        return -1;
    if (!gid_valid(a->gid))
        return env_fail(dc, "agents: gid is not an agent id (name@coord_id)");
    if (env_obj_str(dc, o, "state", a->state, sizeof(a->state)) < 0)
        return -1;
    if (!env_text_plain(a->state, strlen(a->state)))
        return env_fail(dc, "agents: state holds control characters or bad UTF-8");
    return env_hb_get_groups(dc, json_object_get(o, "groups"), "agents: ", &a->groups,
                             &a->n_groups);
}

/* groups, agents, asig: all optional; any of them makes ext. */
static int env_hb_ext(struct env_dec *dc, env_heartbeat *out)
{
    json_t *g = json_object_get(dc->root, "groups");
    json_t *a = json_object_get(dc->root, "agents");
    size_t i, n;

    out->ext = g != NULL || a != NULL || json_object_get(dc->root, "asig") != NULL;
    if (env_get_str(dc, "asig", false, out->asig, sizeof(out->asig)) < 0)
        return -1;
    if (!env_base64_ok(out->asig))
        return env_fail(dc, "asig is not base64");
    if (env_hb_get_groups(dc, g, "", &out->groups, &out->n_groups) < 0)
        return -1;
    if (a != NULL && !json_is_array(a))
        return env_fail(dc, "agents is not a list");
    n = a != NULL ? json_array_size(a) : 0;
    if (n > ENV_HB_MAX_AGENTS)
        return env_fail(dc, "agents: more than 1024");
    if (n == 0)
        return 0;
    out->agents = calloc(n, sizeof(env_hb_agent));
    if (out->agents == NULL)
        return env_fail(dc, "out of memory");
    for (i = 0; i < n; i++) {
        out->n_agents = i + 1; /* what env_hb_free must look at */
        if (env_hb_get_agent(dc, json_array_get(a, i), &out->agents[i]) < 0)
            return -1;
    }
    return 0;
}

/* profiles, psig: optional; either makes has_profiles. */
static int env_hb_profiles(struct env_dec *dc, env_heartbeat *out)
{
    json_t *p = json_object_get(dc->root, "profiles");
    size_t i, n = p != NULL && json_is_array(p) ? json_array_size(p) : 0;

    out->has_profiles = p != NULL || json_object_get(dc->root, "psig") != NULL;
    if (env_get_str(dc, "psig", false, out->psig, sizeof(out->psig)) < 0)
        return -1;
    if (!env_base64_ok(out->psig))
        return env_fail(dc, "psig is not base64");
    if (p != NULL && !json_is_array(p))
        return env_fail(dc, "profiles is not a list");
    if (n > ENV_HB_MAX_PROFILES)
        return env_fail(dc, "profiles: more than 64");
    if (n == 0)
        return 0;
    out->profiles = calloc(n + 1, sizeof(char *));
    if (out->profiles == NULL)
        return env_fail(dc, "out of memory");
    for (i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(p, i));

        if (s == NULL || strlen(s) != json_string_length(json_array_get(p, i)) ||
            !agent_name_valid(s))
            return env_fail(dc, "profiles: not a profile name");
        out->profiles[i] = strdup(s);
        if (out->profiles[i] == NULL)
            return env_fail(dc, "out of memory");
        out->n_profiles = i + 1;
    }
    return 0;
}

/* groupInterval, gsig: optional; either makes has_group_iv. */
static int env_hb_group_iv(struct env_dec *dc, env_heartbeat *out)
{
    json_t *g = json_object_get(dc->root, "groupInterval");

    out->has_group_iv = g != NULL || json_object_get(dc->root, "gsig") != NULL;
    if (env_get_str(dc, "gsig", false, out->gsig, sizeof(out->gsig)) < 0)
        return -1;
    if (!env_base64_ok(out->gsig))
        return env_fail(dc, "gsig is not base64");
    if (!out->has_group_iv)
        return 0;
    if (g == NULL || !json_is_integer(g) || json_integer_value(g) < out->interval_ms ||
        json_integer_value(g) > 3600000)
        return env_fail(dc, "groupInterval is not an integer from interval to 3600000 (ms)");
    out->group_interval_ms = json_integer_value(g);
    return 0;
}

int env_hb_decode(const char *json, size_t len, env_heartbeat *out, char *why, size_t whylen)
{
    struct env_dec dc = {NULL, why, whylen};
    json_error_t jerr;
    int r;

    memset(out, 0, sizeof(*out));
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (json == NULL)
        return env_fail(&dc, "not JSON");
    if (len > ENV_HB_MAX_LEN)
        return env_fail(&dc, "heartbeat larger than 131072 bytes");
    dc.root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (dc.root == NULL)
        return env_fail(&dc, "not JSON");
    r = json_is_object(dc.root) ? env_hb_fields(&dc, out) : env_fail(&dc, "not a JSON object");
    if (r == 0)
        r = env_hb_ext(&dc, out);
    if (r == 0)
        r = env_hb_profiles(&dc, out);
    if (r == 0)
        r = env_hb_group_iv(&dc, out);
    json_decref(dc.root);
    if (r < 0) {
        env_hb_free(out);
        memset(out, 0, sizeof(*out));
    }
    return r;
}

int env_hb_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len)
{
    char v[16], iv[24];
    const char *f[] = {v,
                       ENV_TYPE_HEARTBEAT,
                       h->from,
                       h->host,
                       h->version,
                       h->sentAt,
                       h->expiresAt,
                       h->startedAt,
                       iv,
                       h->agent,
                       h->leaving ? "true" : "false"};
    size_t i, total = 0;
    unsigned char *p;

    snprintf(v, sizeof(v), "%d", h->v);
    snprintf(iv, sizeof(iv), "%lld", (long long)h->interval_ms);
    for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        total += 8 + strlen(f[i]);
    *buf = malloc(total);
    if (*buf == NULL)
        return -1;
    p = *buf;
    for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        p = env_put_field(p, f[i], strlen(f[i]));
    *len = total;
    return 0;
}

/* Appends the fields f[0..n) (length-prefixed) to *buf of *len bytes. */
static int env_append_fields(unsigned char **buf, size_t *len, const char *const *f, size_t n)
{
    size_t add = 0;
    unsigned char *grown, *p;

    for (size_t i = 0; i < n; i++)
        add += 8 + strlen(f[i]);
    grown = realloc(*buf, *len + add);
    if (grown == NULL)
        return -1;
    p = grown + *len;
    for (size_t i = 0; i < n; i++)
        p = env_put_field(p, f[i], strlen(f[i]));
    *buf = grown;
    *len += add;
    return 0;
}

static int env_append_groups(unsigned char **buf, size_t *len, char *const *groups, size_t n)
{
    char count[24];
    const char *f[1] = {count};

    snprintf(count, sizeof(count), "%zu", n);
    if (env_append_fields(buf, len, f, 1) < 0)
        return -1;
    return n == 0 ? 0 : env_append_fields(buf, len, (const char *const *)groups, n);
}

int env_hb_agents_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len)
{
    char count[24];
    const char *f[1] = {count};
    int rc;

    if (env_hb_signing_fields(h, buf, len) < 0)
        return -1;
    snprintf(count, sizeof(count), "%zu", h->n_agents);
    rc = env_append_groups(buf, len, h->groups, h->n_groups);
    rc = rc < 0 ? -1 : env_append_fields(buf, len, f, 1);
    for (size_t i = 0; rc == 0 && i < h->n_agents; i++) {
        const char *a[2] = {h->agents[i].gid, h->agents[i].state};

        rc = env_append_fields(buf, len, a, 2);
        if (rc == 0)
            rc = env_append_groups(buf, len, h->agents[i].groups, h->agents[i].n_groups);
    }
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

int env_hb_profiles_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len)
{
    char count[24];
    const char *f[2] = {"profiles", count};
    int rc;

    if (env_hb_signing_fields(h, buf, len) < 0)
        return -1;
    snprintf(count, sizeof(count), "%zu", h->n_profiles);
    rc = env_append_fields(buf, len, f, 2);
    if (rc == 0 && h->n_profiles > 0)
        rc = env_append_fields(buf, len, (const char *const *)h->profiles, h->n_profiles);
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}
int env_hb_group_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len)
{
    char v[24];
    const char *f[2] = {"groupInterval", v};

    if (env_hb_signing_fields(h, buf, len) < 0)
        return -1;
    snprintf(v, sizeof(v), "%lld", (long long)h->group_interval_ms);
    if (env_append_fields(buf, len, f, 2) < 0) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}
