/* SPDX-License-Identifier: Apache-2.0 */
/* test_control.c — the control plane's envelopes (fleetfs/wire/control.h):
 * the lead's request object, round trips of spawn/stop/spawned through
 * encode, sign, decode and accept with real keys in a temp directory, a
 * signature that breaks on every signed field, the receiver's checks
 * (signature, to, expiry), and hostile JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/wire/control.h"

struct fx {
    char *dir, *trust;
    sig_key *ka, *kb;
    sig_trust *t;
};

static void keypair(struct fx *f, const char *name)
{
    char *key = g_strdup_printf("%s/%s.key", f->dir, name);
    char *pub = g_strdup_printf("%s.pub", key), *text = NULL;
    char *dst = g_strdup_printf("%s/%s.pub", f->trust, name);
    char *err = NULL;

    assert_int_equal(sig_keygen(key, &err), 0);
    assert_true(g_file_get_contents(pub, &text, NULL, NULL));
    assert_true(g_file_set_contents(dst, text, -1, NULL));
    if (!strcmp(name, "alpha"))
        f->ka = sig_load_secret(key, &err);
    else
        f->kb = sig_load_secret(key, &err);
    g_free(text);
    g_free(dst);
    g_free(pub);
    g_free(key);
}

static int setup(void **state)
{
    struct fx *f = g_new0(struct fx, 1);
    char *err = NULL;

    f->dir = g_dir_make_tmp("fleetfs-ctl-XXXXXX", NULL);
    f->trust = g_strdup_printf("%s/trusted", f->dir);
    assert_int_equal(g_mkdir(f->trust, 0755), 0);
    keypair(f, "alpha");
    keypair(f, "beta");
    assert_non_null(f->ka);
    assert_non_null(f->kb);
    f->t = sig_trust_load_quiet(f->trust, &err);
    assert_non_null(f->t);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);

    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    sig_key_free(f->ka);
    sig_key_free(f->kb);
    sig_trust_free(f->t);
    g_free(f->trust);
    g_free(f->dir);
    g_free(f);
    return 0;
}

/* ------------------------------------------------ the lead's request */

static int req(const char *json, ctl_env *e, char *why)
{
    return ctl_request_parse(json, strlen(json), 1000, e, why, 200);
}

static void request_object(void **state)
{
    ctl_env e;
    char why[200];

    (void)state;
    assert_int_equal(req("{\"profile\":\"worker\",\"name\":\"w1\",\"dir\":\"repo/x\","
                         "\"brief\":\"read the README\\nthen report\"}",
                         &e, why),
                     0);
    assert_string_equal(e.profile, "worker");
    assert_string_equal(e.name, "w1");
    assert_string_equal(e.dir, "repo/x");
    assert_string_equal(e.brief, "read the README\nthen report");
    ctl_free(&e);
    assert_int_equal(req("{\"name\":\"w1\",\"profile\":\"worker\"}", &e, why), 0);
    assert_string_equal(e.dir, "");
    assert_null(e.brief);
    ctl_free(&e);
}

static void request_refusals(void **state)
{
    static const struct {
        const char *json, *why;
    } cases[] = {
        {"{\"profile\":\"w\",\"name\":\"a\",\"command\":\"rm -rf /\"}", "unknown key 'command'"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"env\":{\"LD_PRELOAD\":\"x\"}}", "unknown key 'env'"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"args\":[\"-x\"]}", "unknown key 'args'"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"name\":\"b\"}", "key given twice"},
        {"{\"name\":\"a\"}", "missing field profile"},
        {"{\"profile\":\"w\"}", "missing field name"},
        {"{\"profile\":\"w\",\"name\":7}", "name is not a string"},
        {"{\"profile\":\"w\",\"name\":\"\"}", "name is empty"},
        {"{\"profile\":\"w\",\"name\":\"a\\u0000b\"}", "NUL"},
        {"{\"profile\":\"w\",\"name\":\"a\\u001b]2;x\\u0007\"}", "control characters"},
        {"{\"profile\":\"w\",\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "name is too long"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"dir\":\"\"}", "dir is empty"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"dir\":\"/x\\n/y\"}", "dir holds control"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"brief\":[\"x\"]}", "brief is not a string"},
        {"{\"profile\":\"w\",\"name\":\"a\",\"brief\":\"x\\u0000\"}", "brief contains a NUL"},
        {"[\"profile\",\"name\"]", "not a JSON object"},
        {"{\"profile\":\"w\",\"name\":\"a\"", "not JSON"},
        {"", "not JSON"},
    };
    ctl_env e;
    char why[200];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        why[0] = '\0';
        assert_int_equal(req(cases[i].json, &e, why), -1);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
        assert_null(e.brief);
    }
    /* a brief over max_message */
    {
        char *big = g_strdup_printf("{\"profile\":\"w\",\"name\":\"a\",\"brief\":\"%s\"}",
                                    "0123456789012345678901234567890123456789");
        assert_int_equal(ctl_request_parse(big, strlen(big), 39, &e, why, sizeof why), -1);
        assert_non_null(strstr(why, "brief is larger than max_message"));
        assert_int_equal(ctl_request_parse(big, strlen(big), 40, &e, why, sizeof why), 0);
        ctl_free(&e);
        g_free(big);
    }
    /* invalid UTF-8 bytes */
    assert_int_equal(ctl_request_parse("{\"profile\":\"w\",\"name\":\"\xc0\xaf\"}", 27, 100, &e,
                                       why, sizeof why),
                     -1);
}

/* ------------------------------------------------------ round trips */

static void spawn_env(ctl_env *e, int64_t now)
{
    ctl_init(e, CTL_TYPE_SPAWN, "alpha", "beta", now, CTL_TTL_MS);
    strcpy(e->profile, "worker");
    strcpy(e->name, "w1");
    strcpy(e->dir, "/srv/repo");
    e->brief = strdup("do the thing\nwell");
    e->brief_len = strlen(e->brief);
}

static void round_trip_all_types(void **state)
{
    struct fx *f = *state;
    int64_t now = env_now_ms();
    ctl_env e, d;
    char why[200], *s;
    size_t len;

    spawn_env(&e, now);
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    s = ctl_encode(&e, &len);
    assert_non_null(s);
    assert_null(strchr(s, '\n'));
    assert_int_equal(ctl_decode(s, len, 1000, &d, why, sizeof why), 0);
    assert_string_equal(d.type, "spawn");
    assert_string_equal(d.msgId, e.msgId);
    assert_string_equal(d.profile, "worker");
    assert_string_equal(d.dir, "/srv/repo");
    assert_string_equal(d.brief, "do the thing\nwell");
    assert_int_equal(ctl_accept(&d, f->t, "beta", now, why, sizeof why), 0);
    ctl_free(&d);
    free(s);
    ctl_free(&e);

    ctl_init(&e, CTL_TYPE_STOP, "alpha", "beta", now, CTL_TTL_MS);
    strcpy(e.gid, "w1@beta");
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    s = ctl_encode(&e, &len);
    assert_int_equal(ctl_decode(s, len, 1000, &d, why, sizeof why), 0);
    assert_string_equal(d.gid, "w1@beta");
    assert_int_equal(ctl_accept(&d, f->t, "beta", now, why, sizeof why), 0);
    free(s);

    ctl_init(&e, CTL_TYPE_SPAWNED, "beta", "alpha", now, CTL_TTL_MS);
    strcpy(e.requestId, d.msgId);
    strcpy(e.state, "failed");
    strcpy(e.detail, "the agent did not become ready within 30 s");
    assert_int_equal(ctl_sign(f->kb, &e), 0);
    s = ctl_encode(&e, &len);
    assert_null(strstr(s, "\"gid\"")); /* optional and empty: left out */
    assert_int_equal(ctl_decode(s, len, 1000, &d, why, sizeof why), 0);
    assert_string_equal(d.state, "failed");
    assert_string_equal(d.requestId, e.requestId);
    assert_string_equal(d.detail, e.detail);
    assert_int_equal(ctl_accept(&d, f->t, "alpha", now, why, sizeof why), 0);
    free(s);
}

/* What a lead writes to hosts/beta/spawn becomes the envelope sent. */
static void request_becomes_envelope(void **state)
{
    struct fx *f = *state;
    const char *w = "{\"profile\":\"worker\",\"name\":\"w1\",\"brief\":\"go\"}";
    int64_t now = env_now_ms();
    ctl_env e, d;
    char why[200], *s;
    size_t len;

    assert_int_equal(ctl_request_parse(w, strlen(w), 100, &e, why, sizeof why), 0);
    ctl_address(&e, CTL_TYPE_SPAWN, "alpha", "beta", now, CTL_TTL_MS);
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    s = ctl_encode(&e, &len);
    assert_int_equal(ctl_decode(s, len, 100, &d, why, sizeof why), 0);
    assert_int_equal(ctl_accept(&d, f->t, "beta", now, why, sizeof why), 0);
    assert_string_equal(d.profile, "worker");
    assert_string_equal(d.brief, "go");
    assert_string_equal(d.dir, "");
    free(s);
    ctl_free(&d);
    ctl_free(&e);
}

/* Every signed field, changed after signing, breaks the signature. */
static void every_field_is_signed(void **state)
{
    struct fx *f = *state;
    int64_t now = env_now_ms();
    char why[200];

    for (int i = 0; i < 12; i++) {
        ctl_env e;

        spawn_env(&e, now);
        if (i >= 8) {
            ctl_free(&e);
            ctl_init(&e, CTL_TYPE_SPAWNED, "alpha", "beta", now, CTL_TTL_MS);
            env_new_msgid(e.requestId);
            strcpy(e.state, "ready");
            strcpy(e.gid, "w1@alpha");
            strcpy(e.detail, "ok");
        }
        assert_int_equal(ctl_sign(f->ka, &e), 0);
        assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), 0);
        switch (i) {
        case 0:
            strcpy(e.profile, "admin");
            break;
        case 1:
            strcpy(e.name, "w2");
            break;
        case 2:
            strcpy(e.dir, "/etc");
            break;
        case 3:
            e.brief[0] = 'D';
            break;
        case 4:
            e.brief_len--;
            break;
        case 5:
            e.msgId[0] = e.msgId[0] == 'a' ? 'b' : 'a';
            break;
        case 6:
            strcpy(e.type, CTL_TYPE_STOP);
            break; /* a spawn's sig is no stop's */
        case 7:
            e.expiresAt[3]++;
            break;
        case 8:
            strcpy(e.state, "failed");
            break;
        case 9:
            strcpy(e.gid, "w2@alpha");
            break;
        case 10:
            strcpy(e.detail, "no");
            break;
        case 11:
            e.requestId[0] = e.requestId[0] == 'a' ? 'b' : 'a';
            break;
        }
        if (ctl_accept(&e, f->t, "beta", now, why, sizeof why) != -1)
            fail_msg("field %d is not covered by the signature", i);
        assert_non_null(strstr(why, "signature: bad-signature"));
        ctl_free(&e);
    }
}

static void receiver_checks(void **state)
{
    struct fx *f = *state;
    int64_t now = env_now_ms();
    ctl_env e;
    char why[200];

    /* signed by beta's key, claiming to be alpha */
    spawn_env(&e, now);
    assert_int_equal(ctl_sign(f->kb, &e), 0);
    assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), -1);
    assert_non_null(strstr(why, "bad-signature"));
    /* unsigned; a host nobody trusts */
    e.sig[0] = '\0';
    assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), -1);
    assert_non_null(strstr(why, "unsigned"));
    strcpy(e.from, "gamma");
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), -1);
    assert_non_null(strstr(why, "unknown-key"));
    ctl_free(&e);
    /* to another host */
    spawn_env(&e, now);
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    assert_int_equal(ctl_accept(&e, f->t, "gamma", now, why, sizeof why), -1);
    assert_non_null(strstr(why, "addressed to beta"));
    /* expired: accepted until the moment, refused after */
    assert_int_equal(ctl_accept(&e, f->t, "beta", now + CTL_TTL_MS - 1, why, sizeof why), 0);
    assert_int_equal(ctl_accept(&e, f->t, "beta", now + CTL_TTL_MS, why, sizeof why), -1);
    assert_non_null(strstr(why, "expired"));
    /* from the future */
    assert_int_equal(ctl_accept(&e, f->t, "beta", now - CTL_SKEW_MS - 1000, why, sizeof why), -1);
    assert_non_null(strstr(why, "future"));
    ctl_free(&e);
    /* a long-lived request, properly signed, is still refused */
    spawn_env(&e, now);
    env_time_format(now + CTL_MAX_TTL_MS + 1, e.expiresAt);
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), -1);
    assert_non_null(strstr(why, "longer than 5 minutes"));
    ctl_free(&e);
    /* ctl_init clamps what it is asked for */
    ctl_init(&e, CTL_TYPE_STOP, "alpha", "beta", now, 24LL * 3600 * 1000);
    strcpy(e.gid, "w1@beta");
    assert_int_equal(ctl_sign(f->ka, &e), 0);
    assert_int_equal(ctl_accept(&e, f->t, "beta", now, why, sizeof why), 0);
}

/* --------------------------------------------------- hostile envelopes */

#define HDR                                                                             \
    "\"v\":1,\"msgId\":\"0123456789abcdef0123456789abcdef\",\"from\":\"alpha\",\"to\":" \
    "\"beta\",\"sentAt\":\"2026-12-01T10:00:00.000Z\",\"expiresAt\":"                   \
    "\"2026-12-01T10:01:00.000Z\""

static void hostile_envelopes(void **state)
{
    static const struct {
        const char *json, *why;
    } cases[] = {
        {"{" HDR ",\"type\":\"spawn\",\"profile\":\"w\",\"name\":\"a\",\"command\":\"sh\"}",
         "unknown key 'command'"},
        {"{" HDR ",\"type\":\"spawn\",\"profile\":\"w\",\"name\":\"a\",\"gid\":\"a@b\"}",
         "unknown key 'gid'"},
        {"{" HDR ",\"type\":\"stop\",\"gid\":\"a@b\",\"profile\":\"w\"}", "unknown key 'profile'"},
        {"{" HDR ",\"type\":\"stop\"}", "missing field gid"},
        {"{" HDR ",\"type\":\"coord\",\"body\":\"x\"}", "type is not spawn"},
        {"{" HDR ",\"type\":\"spawned\",\"requestId\":\"0123456789abcdef0123456789abcdef\","
         "\"state\":\"acked\"}",
         "state is not ready"},
        {"{" HDR ",\"type\":\"spawned\",\"requestId\":\"xyz\",\"state\":\"ready\"}",
         "requestId is not 32 hex"},
        {"{" HDR ",\"type\":\"spawned\",\"requestId\":\"0123456789abcdef0123456789abcdef\","
         "\"state\":\"ready\",\"detail\":\"\\u001b[2J\"}",
         "detail holds control"},
        {"{" HDR ",\"type\":\"spawn\",\"profile\":\"w\"}", "missing field name"},
        {"{\"v\":2,\"type\":\"spawn\"}", "unsupported version"},
        {"{" HDR ",\"type\":\"spawn\",\"type\":\"stop\",\"profile\":\"w\",\"name\":\"a\"}",
         "key given twice"},
        {"{\"v\":1,\"type\":\"stop\",\"msgId\":\"0123456789abcdef0123456789abcdef\",\"from\":"
         "\"Alpha\",\"to\":\"beta\",\"sentAt\":\"x\",\"expiresAt\":\"y\",\"gid\":\"a@b\"}",
         "from is not a valid host name"},
        {"{" HDR ",\"type\":\"stop\",\"gid\":\"a@b\",\"sig\":\"not base64!\"}",
         "sig is not base64"},
        {"{\"v\":1,\"type\":\"stop\",\"msgId\":\"0123456789abcdef0123456789abcdef\",\"from\":"
         "\"alpha\",\"to\":\"beta\",\"sentAt\":\"yesterday\",\"expiresAt\":\"y\",\"gid\":\"a\"}",
         "sentAt is not RFC 3339"},
        {"[\"spawn\"]", "not a JSON object"},
        {"{\"v\":1,\"type\":\"spawn\",\"x\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}",
         "unknown key 'x'"},
    };
    ctl_env e;
    char why[200];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        why[0] = '\0';
        assert_int_equal(
            ctl_decode(cases[i].json, strlen(cases[i].json), 1000, &e, why, sizeof why), -1);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
        assert_null(e.brief);
        assert_string_equal(e.type, "");
    }
    /* binary garbage and a size bomb are refused before parsing */
    {
        char junk[64];
        size_t big = 1000 * 6 + 16384 + 1;
        char *huge = malloc(big);

        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (char)(i * 37 + 1);
        assert_int_equal(ctl_decode(junk, sizeof junk, 1000, &e, why, sizeof why), -1);
        memset(huge, ' ', big);
        assert_int_equal(ctl_decode(huge, big, 1000, &e, why, sizeof why), -1);
        assert_non_null(strstr(why, "larger than max_message"));
        free(huge);
        assert_int_equal(ctl_decode(NULL, 0, 1000, &e, why, sizeof why), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_object),
        cmocka_unit_test(request_refusals),
        cmocka_unit_test_setup_teardown(round_trip_all_types, setup, teardown),
        cmocka_unit_test_setup_teardown(request_becomes_envelope, setup, teardown),
        cmocka_unit_test_setup_teardown(every_field_is_signed, setup, teardown),
        cmocka_unit_test_setup_teardown(receiver_checks, setup, teardown),
        cmocka_unit_test(hostile_envelopes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
