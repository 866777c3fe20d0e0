/* SPDX-License-Identifier: Apache-2.0 */
/* test_presence.c — heartbeats (envelope.h, sign.h) and the presence table
 * (presence.h): what makes a lead appear, look live, leave, and what never
 * does (forged, unsigned, untrusted, replayed, old, future, mis-routed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/config/options.h"
#include "fleetfs/presence/presence.h"
#include "fleetfs/wire/sign.h"

static env_heartbeat hb_of(const char *from, int64_t offset_ms)
{
    env_heartbeat h;
    int64_t now = env_now_ms() + offset_ms;
    memset(&h, 0, sizeof h);
    h.v = 1;
    g_strlcpy(h.from, from, sizeof h.from);
    g_strlcpy(h.host, "host-1.example", sizeof h.host);
    g_strlcpy(h.version, "0.1.0", sizeof h.version);
    env_time_format(now, h.sentAt);
    env_time_format(now + 3000, h.expiresAt);
    static int64_t started; /* one run of each sender per test program */
    if (!started)
        started = env_now_ms() - 60000;
    env_time_format(started, h.startedAt);
    h.interval_ms = 1000;
    g_strlcpy(h.agent, "waiting: agent beta (w1:p2) is blocked", sizeof h.agent);
    return h;
}

static void test_hb_round_trip(void **state)
{
    env_heartbeat h = hb_of("gamma", 0), d;
    char why[128];
    size_t len;
    char *js;
    unsigned char *a, *b;
    size_t alen, blen;
    (void)state;

    h.leaving = true;
    g_strlcpy(h.sig, "c2ln", sizeof h.sig);
    js = env_hb_encode(&h, &len);
    assert_non_null(js);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_string_equal(d.from, "gamma");
    assert_string_equal(d.host, h.host);
    assert_string_equal(d.agent, h.agent);
    assert_string_equal(d.sentAt, h.sentAt);
    assert_int_equal(d.interval_ms, 1000);
    assert_true(d.leaving);
    assert_string_equal(d.sig, "c2ln");
    assert_int_equal(env_hb_signing_fields(&h, &a, &alen), 0);
    assert_int_equal(env_hb_signing_fields(&d, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    free(a);
    free(b);
    free(js);
}

static void expect_refused(const char *json, const char *reason_part)
{
    env_heartbeat d;
    char why[128];
    assert_int_equal(env_hb_decode(json, strlen(json), &d, why, sizeof why), -1);
    if (!strstr(why, reason_part))
        fail_msg("'%s' refused for '%s', expected '%s'", json, why, reason_part);
}

/* s with the first `from` replaced by `to`; g_free */
static char *swap(const char *s, const char *from, const char *to)
{
    char **parts = g_strsplit(s, from, 2);
    char *out;
    assert_non_null(parts[1]);
    out = g_strjoinv(to, parts);
    g_strfreev(parts);
    return out;
}

static void test_hb_refusals(void **state)
{
    env_heartbeat h = hb_of("gamma", 0);
    envelope e;
    char why[128], *js, *bad;
    size_t len;
    (void)state;

    js = env_hb_encode(&h, &len);
    /* a heartbeat is never a mailbox envelope */
    assert_int_equal(env_decode(js, len, 65536, &e, why, sizeof why), -1);
    bad = swap(js, "\"interval\":1000", "\"interval\":0");
    expect_refused(bad, "interval");
    g_free(bad);
    bad = swap(js, "\"leaving\":false", "\"leaving\":1");
    expect_refused(bad, "leaving");
    g_free(bad);
    bad = swap(js, "\"agent\":\"waiting: agent beta (w1:p2) is blocked\"",
               "\"agent\":\"a\\u001b[2Jb\"");
    expect_refused(bad, "agent");
    g_free(bad);
    bad = swap(js, "\"type\":\"heartbeat\"", "\"type\":\"coord\"");
    expect_refused(bad, "type");
    g_free(bad);
    bad = swap(js, "\"from\":\"gamma\"", "\"from\":\"../x\"");
    expect_refused(bad, "from");
    g_free(bad);
    expect_refused("not json", "not JSON");
    expect_refused("[]", "not a JSON object");
    /* plain text: no C1 controls either */
    assert_false(env_text_plain("a\xc2\x9b"
                                "b",
                                4));
    assert_true(env_text_plain("caf\xc3\xa9", 5));
    /* and the encoder will not write a control character out */
    g_strlcpy(h.agent, "line\nforged: yes", sizeof h.agent);
    assert_null(env_hb_encode(&h, &len));
    free(js);
}

/* ---- the agents extension (SPEC section 10) ------------------------------- */

static char **strv_of(const char *colon_list)
{
    char **v = colon_list[0] ? g_strsplit(colon_list, ":", -1) : g_new0(char *, 1);
    char **out = calloc(g_strv_length(v) + 1, sizeof(char *));
    for (size_t i = 0; v[i]; i++)
        out[i] = strdup(v[i]);
    g_strfreev(v);
    return out;
}

/* h gets the extension: lead groups, and n agents w<i>@<host> */
static void hb_add_agents(env_heartbeat *h, const char *lead_groups, size_t n, const char *host,
                          const char *state, const char *agent_groups)
{
    h->ext = true;
    h->groups = strv_of(lead_groups);
    h->n_groups = g_strv_length(h->groups);
    h->agents = calloc(n ? n : 1, sizeof(env_hb_agent));
    h->n_agents = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(h->agents[i].gid, sizeof h->agents[i].gid, "w%zu@%s", i, host);
        g_strlcpy(h->agents[i].state, state, sizeof h->agents[i].state);
        h->agents[i].groups = strv_of(agent_groups);
        h->agents[i].n_groups = g_strv_length(h->agents[i].groups);
    }
}

static bool same_hb_ext(const env_heartbeat *a, const env_heartbeat *b)
{
    unsigned char *x, *y;
    size_t xl, yl;
    bool same;
    assert_int_equal(env_hb_agents_signing_fields(a, &x, &xl), 0);
    assert_int_equal(env_hb_agents_signing_fields(b, &y, &yl), 0);
    same = xl == yl && memcmp(x, y, xl) == 0;
    free(x);
    free(y);
    return same;
}

static void test_hb_agents_round_trip(void **state)
{
    env_heartbeat h = hb_of("gamma", 0), d;
    char why[128], *js;
    size_t len;
    (void)state;

    hb_add_agents(&h, "build:ops", 2, "gamma", "ready: idle", "build");
    g_strlcpy(h.agents[1].state, "delivering: typing 0123 from alpha", sizeof h.agents[1].state);
    g_strlcpy(h.asig, "YXNpZw==", sizeof h.asig);
    js = env_hb_encode(&h, &len);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"groups\":[\"build\",\"ops\"],\"agents\":[{\"gid\":\"w0@gamma\","
                               "\"state\":\"ready: idle\",\"groups\":[\"build\"]},"));
    assert_non_null(strstr(js, "\"asig\":\"YXNpZw==\""));
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.ext);
    assert_int_equal(d.n_groups, 2);
    assert_string_equal(d.groups[1], "ops");
    assert_null(d.groups[2]);
    assert_int_equal(d.n_agents, 2);
    assert_string_equal(d.agents[1].gid, "w1@gamma");
    assert_string_equal(d.agents[1].state, "delivering: typing 0123 from alpha");
    assert_int_equal(d.agents[1].n_groups, 1);
    assert_string_equal(d.agents[1].groups[0], "build");
    assert_string_equal(d.asig, "YXNpZw==");
    assert_true(same_hb_ext(&h, &d));
    env_hb_free(&d);
    free(js);

    /* an agentless host still says so: empty lists, still ext */
    env_hb_free(&h);
    env_hb_free(&h); /* safe twice */
    hb_add_agents(&h, "", 0, "gamma", "", "");
    js = env_hb_encode(&h, &len);
    assert_non_null(strstr(js, "\"groups\":[],\"agents\":[]"));
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.ext);
    assert_int_equal(d.n_agents, 0);
    env_hb_free(&d);
    env_hb_free(&h);
    free(js);

    /* the extension changes the signed bytes; each part counts */
    {
        env_heartbeat a = hb_of("gamma", 0), b;
        hb_add_agents(&a, "build", 1, "gamma", "idle", "x:y");
        b = a;
        b.groups = strv_of("build");
        b.agents = calloc(1, sizeof(env_hb_agent));
        b.agents[0] = a.agents[0];
        b.agents[0].groups = strv_of("x:y");
        assert_true(same_hb_ext(&a, &b));
        g_strlcpy(b.agents[0].state, "busy", sizeof b.agents[0].state);
        assert_false(same_hb_ext(&a, &b));
        {
            char **keep = b.agents[0].groups;
            b.agents[0] = a.agents[0];
            b.agents[0].groups = keep;
        }
        b.agents[0].gid[1] = '9';
        assert_false(same_hb_ext(&a, &b));
        b.agents[0].gid[1] = '0';
        b.agents[0].n_groups = 1; /* x only */
        assert_false(same_hb_ext(&a, &b));
        b.agents[0].n_groups = 2;
        b.n_groups = 0;
        assert_false(same_hb_ext(&a, &b));
        b.n_groups = 1;
        b.n_agents = 0;
        assert_false(same_hb_ext(&a, &b));
        b.n_agents = 1;
        assert_true(same_hb_ext(&a, &b));
        env_hb_free(&a);
        env_hb_free(&b);
    }
}

/* An old-format heartbeat (no extension) is written exactly as before. */
static void test_hb_without_agents_unchanged(void **state)
{
    env_heartbeat h = hb_of("gamma", 0), d;
    char want[1024], why[128], *js;
    size_t len;
    (void)state;

    g_strlcpy(h.sig, "c2ln", sizeof h.sig);
    snprintf(want, sizeof want,
             "{\"v\":1,\"type\":\"heartbeat\",\"from\":\"gamma\",\"host\":\"host-1.example\","
             "\"version\":\"0.1.0\",\"sentAt\":\"%s\",\"expiresAt\":\"%s\",\"startedAt\":\"%s\","
             "\"interval\":1000,\"agent\":\"waiting: agent beta (w1:p2) is blocked\","
             "\"leaving\":false,\"sig\":\"c2ln\"}",
             h.sentAt, h.expiresAt, h.startedAt);
    js = env_hb_encode(&h, &len);
    assert_string_equal(js, want);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_false(d.ext);
    assert_int_equal(d.n_agents, 0);
    env_hb_free(&d);
    free(js);
}

static void test_hb_agents_refusals(void **state)
{
    env_heartbeat h = hb_of("gamma", 0);
    char *js, *bad;
    size_t len;
    (void)state;

    hb_add_agents(&h, "build", 1, "gamma", "idle", "ops");
    g_strlcpy(h.asig, "YXNpZw==", sizeof h.asig);
    js = env_hb_encode(&h, &len);
    bad = swap(js, "\"gid\":\"w0@gamma\"", "\"gid\":\"W0@gamma\"");
    expect_refused(bad, "agents: gid is not an agent id");
    g_free(bad);
    bad = swap(js, "\"gid\":\"w0@gamma\"", "\"gid\":\"w0@gamma@x\"");
    expect_refused(bad, "agents: gid is not an agent id");
    g_free(bad);
    bad = swap(js, "\"gid\":\"w0@gamma\"", "\"gid\":\"gamma\"");
    expect_refused(bad, "agents: gid is not an agent id");
    g_free(bad);
    bad = swap(js, "\"gid\":\"w0@gamma\",", "");
    expect_refused(bad, "agents: missing gid");
    g_free(bad);
    bad = swap(js, "\"state\":\"idle\"", "\"state\":\"a\\u001b[2J\"");
    expect_refused(bad, "agents: state holds control characters");
    g_free(bad);
    bad = swap(js, "\"state\":\"idle\"", "\"state\":7");
    expect_refused(bad, "agents: state is not a string");
    g_free(bad);
    bad = swap(js, "\"groups\":[\"ops\"]", "\"groups\":[\"all\"]");
    expect_refused(bad, "groups: 'all' is implied");
    g_free(bad);
    bad = swap(js, "\"groups\":[\"ops\"]", "\"groups\":[\"Ops\"]");
    expect_refused(bad, "groups: not a group name");
    g_free(bad);
    bad = swap(js, "\"groups\":[\"ops\"]", "\"groups\":\"ops\"");
    expect_refused(bad, "groups is not a list");
    g_free(bad);
    bad = swap(js, "\"groups\":[\"build\"]",
               "\"groups\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\","
               "\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]");
    expect_refused(bad, "groups: more than 16");
    g_free(bad);
    bad = swap(js, "\"groups\":[\"build\"]", "\"groups\":[1]");
    expect_refused(bad, "groups: not a group name");
    g_free(bad);
    bad = swap(js, "\"agents\":[{", "\"agents\":[7,{");
    expect_refused(bad, "agents: an entry is not an object");
    g_free(bad);
    bad = swap(js, "\"agents\":[", "\"agents\":{\"x\":[");
    expect_refused(bad, "not JSON");
    g_free(bad);
    bad = swap(js, "\"asig\":\"", "\"asig\":\"<");
    expect_refused(bad, "asig is not base64");
    g_free(bad);
    free(js);
    env_hb_free(&h);

    /* too many agents, and too many bytes */
    hb_add_agents(&h, "", ENV_HB_MAX_AGENTS + 1, "gamma", "i", "");
    js = env_hb_encode(&h, &len);
    assert_null(js); /* the encoder will not write what a receiver refuses */
    env_hb_free(&h);
    {
        GString *big = g_string_new("{\"v\":1,\"type\":\"heartbeat\",\"pad\":\"");
        while (big->len <= ENV_HB_MAX_LEN)
            g_string_append(big, "xxxxxxxxxxxxxxxx");
        g_string_append(big, "\"}");
        expect_refused(big->str, "heartbeat larger than 131072 bytes");
        g_string_free(big, TRUE);
    }
}

/* What a heartbeat with agents costs, and what a fleetfs from before
 * agents makes of one: it checks `sig` over the eleven fields it always
 * did, which the extension leaves alone. */
static void test_hb_size_and_old_readers(void **state)
{
    env_heartbeat h = hb_of("fleet-host-01", 0), big, d;
    char why[128], *js, *dir = g_dir_make_tmp("test_hb.XXXXXX", NULL), *err = NULL;
    char *key = g_strdup_printf("%s/fleet-host-01.key", dir), *tdir = g_strdup_printf("%s/t", dir);
    char *pub = g_strdup_printf("%s.pub", key),
         *dst = g_strdup_printf("%s/fleet-host-01.pub", tdir);
    char *text = NULL, *cmd;
    sig_key *k;
    sig_trust *t;
    size_t len, n_old = 0;
    (void)state;

    g_mkdir(tdir, 0700);
    assert_int_equal(sig_keygen(key, &err), 0);
    assert_true(g_file_get_contents(pub, &text, NULL, NULL));
    assert_true(g_file_set_contents(dst, text, -1, NULL));
    k = sig_load_secret(key, &err);
    t = sig_trust_load_quiet(tdir, &err);
    assert_non_null(k);
    assert_non_null(t);

    /* 100 agents as a fleet names them: gid, short state words, two groups */
    hb_add_agents(&h, "build:review", 100, "fleet-host-01", "ready: idle", "build:review");
    assert_int_equal(sig_sign_hb(k, &h), 0);
    js = env_hb_encode(&h, &len);
    assert_non_null(js);
    print_message("heartbeat with 100 agents: %zu bytes\n", len);
    assert_true(len < 16384);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_int_equal(sig_verify_hb(t, &d), SIG_OK);        /* what an old fleetfs checks */
    assert_int_equal(sig_verify_hb_agents(t, &d), SIG_OK); /* and a new one too */
    /* altered agents: sig still verifies (it does not cover them), asig not */
    g_strlcpy(d.agents[7].state, "ready: forged", sizeof d.agents[7].state);
    assert_int_equal(sig_verify_hb(t, &d), SIG_OK);
    assert_int_equal(sig_verify_hb_agents(t, &d), SIG_BAD);
    env_hb_free(&d);
    free(js);
    /* how many such agents still fit what a fleetfs before agents reads */
    while (n_old < 100) {
        size_t keep = h.n_agents;
        h.n_agents = n_old + 1;
        js = env_hb_encode(&h, &len);
        h.n_agents = keep;
        free(js);
        if (len > ENV_HB_OLD_MAX_LEN)
            break;
        n_old++;
    }
    print_message("agents that fit in %d bytes: %zu\n", ENV_HB_OLD_MAX_LEN, n_old);
    assert_true(n_old >= 20);

    /* the worst case of 100 agents: longest gid, state and 16 longest groups */
    big = hb_of("fleet-host-01", 0);
    big.ext = true;
    big.agents = calloc(100, sizeof(env_hb_agent));
    big.n_agents = 100;
    for (size_t i = 0; i < 100; i++) {
        env_hb_agent *a = &big.agents[i];
        snprintf(a->gid, sizeof a->gid, "a%030zu@%s", i,
                 "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0");
        memset(a->state, 's', sizeof a->state - 1);
        a->groups = calloc(ENV_HB_MAX_GROUPS + 1, sizeof(char *));
        for (size_t g = 0; g < ENV_HB_MAX_GROUPS; g++)
            a->groups[g] = g_strdup_printf("g%02zu%060d", g, 0);
        a->n_groups = ENV_HB_MAX_GROUPS;
    }
    js = env_hb_encode(&big, &len);
    /* too big for one: the encoder refuses it (pr_heartbeat then sheds) */
    assert_null(js);
    big.n_agents = 90;
    js = env_hb_encode(&big, &len);
    assert_non_null(js);
    print_message("heartbeat with 90 agents at every limit: %zu bytes\n", len);
    big.n_agents = 100;
    free(js);
    env_hb_free(&big);
    env_hb_free(&h);

    sig_key_free(k);
    sig_trust_free(t);
    cmd = g_strdup_printf("rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    g_free(text);
    g_free(key);
    g_free(tdir);
    g_free(pub);
    g_free(dst);
    g_free(dir);
}

/* ---- a presence table, with keys ----------------------------------------- */

typedef struct {
    char *dir;
    fs_opts o;
    presence *pr;
    sig_key *kg; /* gamma's key, trusted */
    sig_key *kz; /* zeta's key, not trusted */
    GPtrArray *notes;
} fx;

static void hook_changed(void *ud, const char *relpath)
{
    fx *f = ud;
    g_ptr_array_add(f->notes, g_strdup(relpath));
}

static void hook_entry(void *ud, const char *dir, const char *name, bool added)
{
    fx *f = ud;
    g_ptr_array_add(f->notes, g_strdup_printf("%c%s/%s", added ? '+' : '-', dir, name));
}

static bool noted(fx *f, const char *what)
{
    for (guint i = 0; i < f->notes->len; i++)
        if (strcmp(f->notes->pdata[i], what) == 0)
            return true;
    return false;
}

static sig_key *make_key(fx *f, const char *name, bool trusted)
{
    char *path = g_strdup_printf("%s/%s.key", f->dir, name), *pub, *text = NULL, *dst;
    char *err = NULL;
    sig_key *k;
    assert_int_equal(sig_keygen(path, &err), 0);
    if (trusted) {
        pub = g_strdup_printf("%s.pub", path);
        dst = g_strdup_printf("%s/trust/%s.pub", f->dir, name);
        assert_true(g_file_get_contents(pub, &text, NULL, NULL));
        assert_true(g_file_set_contents(dst, text, -1, NULL));
        g_free(text);
        g_free(pub);
        g_free(dst);
    }
    k = sig_load_secret(path, &err);
    assert_non_null(k);
    g_free(path);
    return k;
}

static int fx_setup(void **state)
{
    fx *f = g_new0(fx, 1);
    char *err = NULL, *trust;
    pr_hooks h = {.changed = hook_changed, .entry = hook_entry, .ud = f};
    f->dir = g_dir_make_tmp("test_presence.XXXXXX", NULL);
    trust = g_build_filename(f->dir, "trust", NULL);
    g_mkdir(trust, 0700);
    f->notes = g_ptr_array_new_with_free_func(g_free);
    opts_init(&f->o);
    opts_set(&f->o, "coord_id", "alpha", &err);
    opts_set(&f->o, "peers", "beta", &err);
    opts_set(&f->o, "heartbeat", "1s", &err);
    sig_key_free(make_key(f, "alpha", true));
    f->kg = make_key(f, "gamma", true);
    f->kz = make_key(f, "zeta", false);
    f->o.key = g_strdup_printf("%s/alpha.key", f->dir);
    f->o.trusted_keys = trust;
    f->pr = pr_new(&f->o, "h", &h, &err);
    assert_non_null(f->pr);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);
    pr_free(f->pr);
    sig_key_free(f->kg);
    sig_key_free(f->kz);
    opts_free(&f->o);
    g_ptr_array_free(f->notes, TRUE);
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    g_free(f->dir);
    g_free(f);
    return 0;
}

/* Sign h with k (NULL: unsigned) and hand it to the table. */
static void deliver(fx *f, env_heartbeat *h, const sig_key *k, const char *rk)
{
    char rkey[128], *js;
    size_t len;
    if (k)
        assert_int_equal(sig_sign_hb(k, h), 0);
    js = env_hb_encode(h, &len);
    assert_non_null(js);
    snprintf(rkey, sizeof rkey, "roster.h.%s", h->from);
    pr_received(f->pr, rk ? rk : rkey, js, len);
    free(js);
}

static void test_trusted_heartbeat_makes_a_lead_appear(void **state)
{
    fx *f = *state;
    env_heartbeat h = hb_of("gamma", 0);
    pr_info i;
    char w[80];

    assert_false(pr_is_peer(f->pr, "gamma"));
    assert_true(pr_is_peer(f->pr, "beta")); /* configured */
    deliver(f, &h, f->kg, NULL);
    assert_true(pr_is_peer(f->pr, "gamma"));
    assert_true(noted(f, "+peers/gamma"));
    assert_true(noted(f, "roster"));
    assert_true(noted(f, "peers/gamma/status"));
    assert_true(pr_get(f->pr, "gamma", &i));
    assert_int_equal(i.state, PR_LIVE);
    assert_string_equal(i.agent, "waiting: agent beta (w1:p2) is blocked");
    pr_words(&i, w, sizeof w);
    assert_string_equal(w, "live (0s ago)");
    assert_int_equal(pr_rejected(f->pr), 0);
    {
        char **p = pr_peers(f->pr);
        assert_string_equal(p[0], "beta");
        assert_string_equal(p[1], "gamma");
        assert_null(p[2]);
        g_strfreev(p);
    }
    /* a clean unmount's last word */
    h = hb_of("gamma", 10);
    h.leaving = true;
    deliver(f, &h, f->kg, NULL);
    assert_true(pr_get(f->pr, "gamma", &i));
    assert_int_equal(i.state, PR_LEFT);
    pr_words(&i, w, sizeof w);
    assert_string_equal(w, "left (unmounted 0s ago)");
}

static void test_untrusted_heartbeats_never_appear(void **state)
{
    fx *f = *state;
    env_heartbeat h;

    h = hb_of("gamma", 0); /* forged: altered after signing */
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    g_strlcpy(h.agent, "ready", sizeof h.agent);
    deliver(f, &h, NULL, NULL);
    h = hb_of("gamma", 0); /* another lead's key */
    deliver(f, &h, f->kz, NULL);
    h = hb_of("gamma", 0); /* unsigned */
    deliver(f, &h, NULL, NULL);
    h = hb_of("zeta", 0); /* nobody trusts zeta */
    deliver(f, &h, f->kz, NULL);
    h = hb_of("gamma", 0); /* good, but routed as someone else */
    deliver(f, &h, f->kg, "roster.h.beta");
    pr_received(f->pr, "roster.h.gamma", "{\"v\":1", 6);
    assert_int_equal(pr_rejected(f->pr), 6);
    assert_false(pr_is_peer(f->pr, "gamma"));
    assert_false(pr_is_peer(f->pr, "zeta"));
    assert_int_equal(f->notes->len, 0);
}

static void test_old_future_and_replayed_are_ignored(void **state)
{
    fx *f = *state;
    env_heartbeat h, first;
    pr_info i;
    char *js;
    size_t len;

    h = hb_of("gamma", -3600 * 1000); /* an hour old */
    deliver(f, &h, f->kg, NULL);
    h = hb_of("gamma", 3600 * 1000); /* an hour ahead */
    deliver(f, &h, f->kg, NULL);
    assert_false(pr_is_peer(f->pr, "gamma"));
    assert_int_equal(pr_rejected(f->pr), 0); /* genuine, just out of time */

    first = hb_of("gamma", -500);
    assert_int_equal(sig_sign_hb(f->kg, &first), 0);
    h = hb_of("gamma", 0);
    h.leaving = true;
    deliver(f, &h, f->kg, NULL);
    /* the earlier one, replayed after the leaving one: still left */
    js = env_hb_encode(&first, &len);
    pr_received(f->pr, "roster.h.gamma", js, len);
    free(js);
    assert_true(pr_get(f->pr, "gamma", &i));
    assert_int_equal(i.state, PR_LEFT);
}

static void test_liveness_waits_for_a_settled_link(void **state)
{
    fx *f = *state;
    char why[80] = "";
    /* roster link not up: presence cannot tell, the send says nothing */
    assert_int_equal(pr_liveness(f->pr, "beta", why, sizeof why), -1);
    pr_link(f->pr, true);
    /* just connected: beta may be reconnecting too */
    assert_int_equal(pr_liveness(f->pr, "beta", why, sizeof why), -1);
}

/* ---- agents and groups in the table (SPEC section 10) --------------------- */

static char *joined(char **v)
{
    char *s = v ? g_strjoinv(" ", v) : g_strdup("(null)");
    g_strfreev(v);
    return s;
}

static void strv_is(char **v, const char *want)
{
    char *got = joined(v);
    if (strcmp(got, want) != 0)
        fail_msg("got '%s', want '%s'", got, want);
    g_free(got);
}

static void agents_are(fx *f, const char *want)
{
    GPtrArray *a = pr_agents(f->pr);
    GString *s = g_string_new("");
    for (guint i = 0; i < a->len; i++) {
        pr_agent_info *ai = a->pdata[i];
        g_string_append_printf(s, "%s%s", i ? " " : "", ai->gid);
    }
    if (strcmp(s->str, want) != 0)
        fail_msg("agents '%s', want '%s'", s->str, want);
    g_string_free(s, TRUE);
    g_ptr_array_unref(a);
}

static void clear_notes(fx *f)
{
    g_ptr_array_set_size(f->notes, 0);
}

/* gamma's heartbeat with n agents w<i>@gamma in group build, lead in ops,
 * sent offset_ms from now */
static void deliver_gamma(fx *f, size_t n, const char *state, int64_t offset_ms)
{
    env_heartbeat h = hb_of("gamma", offset_ms);
    hb_add_agents(&h, "ops", n, "gamma", state, "build");
    deliver(f, &h, f->kg, NULL);
    env_hb_free(&h);
}

static void test_heard_agents_and_groups(void **state)
{
    fx *f = *state;
    pr_agent_info a;
    char w[80];

    deliver_gamma(f, 2, "ready: idle", 0);
    assert_true(pr_is_peer(f->pr, "gamma"));
    agents_are(f, "w0@gamma w1@gamma");
    assert_true(noted(f, "+agents/w0@gamma"));
    assert_true(noted(f, "+agents/w1@gamma"));
    assert_true(noted(f, "+groups/build"));
    assert_true(noted(f, "+groups/ops"));
    assert_false(noted(f, "+groups/all"));
    assert_true(noted(f, "groups/all/members"));
    assert_true(pr_agent_get(f->pr, "w1@gamma", &a));
    assert_string_equal(a.gid, "w1@gamma");
    assert_string_equal(a.name, "w1");
    assert_string_equal(a.host, "gamma");
    assert_false(a.local);
    assert_string_equal(a.state, "ready: idle");
    assert_int_equal(a.n_groups, 1);
    assert_string_equal(a.groups[0], "build");
    assert_int_equal(a.presence, PR_LIVE);
    pr_agent_words(&a, w, sizeof w);
    assert_string_equal(w, "live (0s ago)");
    assert_false(pr_agent_get(f->pr, "w2@gamma", &a));
    assert_false(pr_agent_get(f->pr, "gamma", &a));
    strv_is(pr_groups(f->pr), "all build ops");
    strv_is(pr_group_members(f->pr, "build"), "w0@gamma w1@gamma");
    strv_is(pr_group_members(f->pr, "ops"), "gamma");
    strv_is(pr_lead_groups(f->pr, "gamma"), "ops");
    strv_is(pr_lead_groups(f->pr, "alpha"), ""); /* ours: groups= (none here) */
    assert_null(pr_lead_groups(f->pr, "beta"));  /* configured, never heard */
    assert_null(pr_lead_groups(f->pr, "nobody"));
    /* alpha is us: in all, though we announced nothing else */
    strv_is(pr_group_members(f->pr, "all"), "alpha gamma w0@gamma w1@gamma");
    assert_null(pr_group_members(f->pr, "nope"));
    assert_int_equal(pr_rejected(f->pr), 0);

    /* the next heartbeat: w1 gone, w0 busy */
    clear_notes(f);
    deliver_gamma(f, 1, "delivering: typing", 100);
    agents_are(f, "w0@gamma");
    assert_true(noted(f, "-agents/w1@gamma"));
    assert_true(noted(f, "agents/w0@gamma/status"));
    assert_true(noted(f, "groups/build/members"));
    assert_false(noted(f, "-groups/build"));
    assert_true(pr_agent_get(f->pr, "w0@gamma", &a));
    assert_string_equal(a.state, "delivering: typing");
    /* the same again: nothing to tell anyone */
    clear_notes(f);
    deliver_gamma(f, 1, "delivering: typing", 200);
    assert_false(noted(f, "agents/w0@gamma/status"));
    assert_false(noted(f, "groups/build/members"));
    /* and none: the group goes with its last member */
    deliver_gamma(f, 0, "", 300);
    agents_are(f, "");
    assert_true(noted(f, "-agents/w0@gamma"));
    assert_true(noted(f, "-groups/build"));
    strv_is(pr_groups(f->pr), "all ops");
}

static void test_local_agents(void **state)
{
    fx *f = *state;
    const char *const build[] = {"build", NULL};
    const char *const ops[] = {"ops", NULL};
    pr_local_agent la[] = {
        {"w1@alpha", "ready: idle", build},
        {"w2@alpha", NULL, NULL},
        {"w3@beta", "x", NULL},  /* not ours */
        {"W4@alpha", "x", NULL}, /* not an id */
        {"w1@alpha", "x", NULL}, /* twice */
    };
    pr_agent_info a;
    env_heartbeat d;
    char why[128], *js, *err = NULL;
    size_t len;
    sig_trust *t;

    assert_false(pr_set_local(f->pr, ops, la, 5)); /* three left out */
    agents_are(f, "w1@alpha w2@alpha");
    assert_true(noted(f, "+agents/w1@alpha"));
    assert_true(noted(f, "+groups/build"));
    assert_true(noted(f, "+groups/ops"));
    assert_true(pr_agent_get(f->pr, "w2@alpha", &a));
    assert_true(a.local);
    assert_string_equal(a.host, "alpha");
    assert_string_equal(a.state, "starting");
    assert_int_equal(a.n_groups, 0);
    strv_is(pr_groups(f->pr), "all build ops");
    strv_is(pr_group_members(f->pr, "ops"), "alpha");
    strv_is(pr_lead_groups(f->pr, "alpha"), "ops");
    strv_is(pr_group_members(f->pr, "all"), "alpha w1@alpha w2@alpha");

    /* our heartbeat carries them, signed so that gamma can check it */
    js = pr_heartbeat(f->pr, "ready", false, &len);
    assert_non_null(js);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.ext);
    assert_int_equal(d.n_groups, 1);
    assert_string_equal(d.groups[0], "ops");
    assert_int_equal(d.n_agents, 2);
    assert_string_equal(d.agents[0].gid, "w1@alpha");
    assert_string_equal(d.agents[0].state, "ready: idle");
    assert_string_equal(d.agents[0].groups[0], "build");
    t = sig_trust_load_quiet(f->o.trusted_keys, &err);
    assert_int_equal(sig_verify_hb(t, &d), SIG_OK);
    assert_int_equal(sig_verify_hb_agents(t, &d), SIG_OK);
    sig_trust_free(t);
    env_hb_free(&d);
    /* it comes back through the roster: still two agents, nothing new */
    clear_notes(f);
    pr_received(f->pr, "roster.h.alpha", js, len);
    free(js);
    agents_are(f, "w1@alpha w2@alpha");
    assert_false(noted(f, "+agents/w1@alpha"));

    /* a change is announced at the next tick, once */
    assert_false(pr_tick(f->pr, "ready"));
    la[1].state = "delivering";
    assert_true(pr_set_local(f->pr, ops, la, 2));
    assert_true(noted(f, "agents/w2@alpha/status"));
    assert_true(pr_tick(f->pr, "ready"));
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_false(pr_tick(f->pr, "ready"));
    /* the same set again is no change */
    assert_true(pr_set_local(f->pr, ops, la, 2));
    assert_false(pr_tick(f->pr, "ready"));
    /* retired */
    clear_notes(f);
    assert_true(pr_set_local(f->pr, NULL, la, 1));
    agents_are(f, "w1@alpha");
    assert_true(noted(f, "-agents/w2@alpha"));
    assert_true(noted(f, "-groups/ops"));
    assert_true(pr_tick(f->pr, "ready"));
}

/* An agentless host still announces itself, with the extension. */
static void test_agentless_heartbeat(void **state)
{
    fx *f = *state;
    env_heartbeat d;
    char why[128], *js;
    size_t len;

    js = pr_heartbeat(f->pr, NULL, false, &len);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.ext);
    assert_int_equal(d.n_agents, 0);
    assert_int_equal(d.n_groups, 0);
    assert_true(d.asig[0] != '\0');
    env_hb_free(&d);
    free(js);
}

static void test_agents_of_another_host_are_dropped(void **state)
{
    fx *f = *state;
    env_heartbeat h = hb_of("gamma", 0);

    hb_add_agents(&h, "", 3, "gamma", "idle", "build");
    g_strlcpy(h.agents[1].gid, "w9@beta", sizeof h.agents[1].gid); /* gamma speaks for beta */
    deliver(f, &h, f->kg, NULL);
    env_hb_free(&h);
    assert_true(pr_is_peer(f->pr, "gamma")); /* the lead is believed */
    agents_are(f, "w0@gamma w2@gamma");
    assert_int_equal(pr_rejected_agents(f->pr), 1);
    assert_int_equal(pr_rejected(f->pr), 0);
    assert_false(noted(f, "+agents/w9@beta"));
}

static void test_agents_must_be_signed(void **state)
{
    fx *f = *state;
    env_heartbeat h;
    char *js;
    size_t len;

    /* altered after signing: refused whole */
    h = hb_of("gamma", 0);
    hb_add_agents(&h, "", 1, "gamma", "idle", "build");
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    g_strlcpy(h.agents[0].gid, "evil@gamma", sizeof h.agents[0].gid);
    deliver(f, &h, NULL, NULL);
    env_hb_free(&h);
    assert_int_equal(pr_rejected(f->pr), 1);
    assert_false(pr_is_peer(f->pr, "gamma"));
    agents_are(f, "");
    /* without asig: refused whole */
    h = hb_of("gamma", 0);
    hb_add_agents(&h, "", 1, "gamma", "idle", "build");
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    h.asig[0] = '\0';
    deliver(f, &h, NULL, NULL);
    env_hb_free(&h);
    assert_int_equal(pr_rejected(f->pr), 2);
    agents_are(f, "");

    /* a good one, then the next of the same run stripped of its agents */
    deliver_gamma(f, 1, "idle", 0);
    agents_are(f, "w0@gamma");
    h = hb_of("gamma", 100);
    assert_int_equal(sig_sign_hb(f->kg, &h), 0); /* no extension at all */
    deliver(f, &h, NULL, NULL);
    assert_int_equal(pr_rejected(f->pr), 3);
    agents_are(f, "w0@gamma");
    /* a restarted gamma (a new startedAt) that is an old fleetfs: believed,
     * no agents, not a member of all */
    env_time_format(env_now_ms() - 1000, h.startedAt);
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    js = env_hb_encode(&h, &len);
    assert_null(strstr(js, "agents"));
    pr_received(f->pr, "roster.h.gamma", js, len);
    free(js);
    assert_int_equal(pr_rejected(f->pr), 3);
    agents_are(f, "");
    strv_is(pr_group_members(f->pr, "all"), "alpha");
    strv_is(pr_groups(f->pr), "all");
}

/* hosts (SPEC section 11): a host's profiles ride in its heartbeat, signed
 * by psig; one altered after signing is refused whole; one without them (a
 * fleetfs before profiles) leaves them unknown; ours come from the options
 * and go out in our own heartbeat; hosts/ lists every lead known. */
static void test_profiles_in_heartbeats(void **state)
{
    fx *f = *state;
    env_heartbeat h, mine;
    char *js;
    size_t len;
    char *names[] = {"worker", "reviewer", NULL};

    strv_is(pr_hosts(f->pr), "alpha beta");
    assert_null(pr_host_profiles(f->pr, "gamma"));
    assert_null(pr_host_profiles(f->pr, "beta")); /* configured, never heard */
    strv_is(pr_host_profiles(f->pr, "alpha"), "");

    /* altered after signing: refused whole, gamma unknown */
    h = hb_of("gamma", 0);
    h.has_profiles = true;
    h.profiles = calloc(3, sizeof(char *));
    h.profiles[0] = strdup("worker");
    h.n_profiles = 1;
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    h.profiles[1] = strdup("root");
    h.n_profiles = 2;
    deliver(f, &h, NULL, NULL);
    assert_int_equal(pr_rejected(f->pr), 1);
    assert_false(pr_is_host(f->pr, "gamma"));
    /* signed: believed, sorted, a new host announced */
    free(h.profiles[1]);
    h.profiles[1] = strdup("reviewer");
    deliver(f, &h, f->kg, NULL);
    assert_int_equal(pr_rejected(f->pr), 1);
    assert_true(pr_is_host(f->pr, "gamma"));
    assert_true(noted(f, "+hosts/gamma"));
    assert_true(noted(f, "hosts/gamma/status"));
    strv_is(pr_host_profiles(f->pr, "gamma"), "reviewer worker");
    strv_is(pr_hosts(f->pr), "alpha beta gamma");
    env_hb_free(&h);
    /* the next one without the member: unknown again */
    clear_notes(f);
    h = hb_of("gamma", 100);
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    js = env_hb_encode(&h, &len);
    assert_null(strstr(js, "profiles"));
    pr_received(f->pr, "roster.h.gamma", js, len);
    free(js);
    assert_null(pr_host_profiles(f->pr, "gamma"));
    assert_true(noted(f, "hosts/gamma/status"));

    /* ours: [] until profiles are configured, then their names, psig'd */
    f->o.profiles.v = g_new0(prof, 2);
    f->o.profiles.v[0].name = names[0];
    f->o.profiles.v[1].name = names[1];
    f->o.profiles.n = 2;
    strv_is(pr_host_profiles(f->pr, "alpha"), "reviewer worker");
    js = pr_heartbeat(f->pr, NULL, false, &len);
    assert_non_null(js);
    assert_int_equal(env_hb_decode(js, len, &mine, NULL, 0), 0);
    assert_true(mine.has_profiles);
    assert_int_equal(mine.n_profiles, 2);
    {
        char *err = NULL;
        sig_trust *t = sig_trust_load_quiet(f->o.trusted_keys, &err);
        assert_non_null(t);
        assert_int_equal(sig_verify_hb_profiles(t, &mine), SIG_OK);
        mine.profiles[0][0] ^= 1; /* altered: no longer verifies */
        assert_int_equal(sig_verify_hb_profiles(t, &mine), SIG_BAD);
        sig_trust_free(t);
    }
    env_hb_free(&mine);
    free(js);
    g_free(f->o.profiles.v);
    memset(&f->o.profiles, 0, sizeof f->o.profiles);
}

static void test_heard_agents_drop_after_discovery_ttl(void **state)
{
    fx *f = *state;

    deliver_gamma(f, 2, "idle", 0);
    agents_are(f, "w0@gamma w1@gamma");
    f->o.discovery_ttl_ms = 30;
    g_usleep(60 * 1000);
    clear_notes(f);
    pr_tick(f->pr, NULL);
    agents_are(f, "");
    assert_true(noted(f, "-agents/w0@gamma"));
    assert_true(noted(f, "-groups/build"));
    strv_is(pr_groups(f->pr), "all");
}

/* An honest send to an agent asks presence about the agent: its host must
 * be live and list it. */
/* doc/scaling.md, step 3: our interval grows with the leads heard, so
 * that each host hears at most about heartbeat_rate heartbeats a second. */
static void test_interval_grows_with_the_fleet(void **state)
{
    fx *f = *state;
    char *err = NULL, *js, why[200];
    const char *names[] = {"l1", "l2", "l3", "l4"};
    env_heartbeat h, d;
    int64_t sent, exp;
    size_t len;

    assert_int_equal(opts_set(&f->o, "heartbeat_rate", "2", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_interval_ms(f->pr), 1000); /* alone: 1/2 s is under 1 s */
    h = hb_of("gamma", 0);
    deliver(f, &h, f->kg, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        sig_key *k = make_key(f, names[i], true);
        h = hb_of(names[i], 0);
        deliver(f, &h, k, NULL);
        sig_key_free(k);
    }
    /* six leads live, ourselves included, at 2 a second: every 3 s */
    js = pr_heartbeat(f->pr, "ready", false, &len);
    assert_non_null(js);
    assert_int_equal(pr_interval_ms(f->pr), 3000);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_int_equal(d.interval_ms, 3000);
    assert_int_equal(env_time_parse(d.sentAt, &sent), 0);
    assert_int_equal(env_time_parse(d.expiresAt, &exp), 0);
    assert_int_equal(exp - sent, 9000); /* stale after three of them */
    env_hb_free(&d);
    free(js);
    /* 4 a second: 6/4 s, in whole seconds 2 s */
    assert_int_equal(opts_set(&f->o, "heartbeat_rate", "4", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_interval_ms(f->pr), 2000);
    /* 0: the interval is `heartbeat`, whatever the fleet */
    assert_int_equal(opts_set(&f->o, "heartbeat_rate", "0", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_interval_ms(f->pr), 1000);
    assert_int_equal(opts_set(&f->o, "heartbeat_rate", "-1", &err), -1);
    assert_non_null(strstr(err, "0..100000"));
    g_free(err);
}

static void test_liveness_of_agents(void **state)
{
    fx *f = *state;
    char why[120] = "";

    deliver_gamma(f, 1, "idle", 0);
    f->o.heartbeat_ms = 1; /* the roster link settles after three of ours */
    pr_link(f->pr, true);
    g_usleep(10 * 1000);
    assert_int_equal(pr_liveness(f->pr, "gamma", why, sizeof why), 1);
    assert_int_equal(pr_liveness(f->pr, "w0@gamma", why, sizeof why), 1);
    assert_int_equal(pr_liveness(f->pr, "w5@gamma", why, sizeof why), 0);
    assert_string_equal(why, "peer not live (its host gamma does not list it)");
    assert_int_equal(pr_liveness(f->pr, "w0@zeta", why, sizeof why), 0);
    assert_string_equal(why, "peer not live (its host zeta: no heartbeat heard from it)");
    assert_int_equal(pr_liveness(f->pr, "beta", why, sizeof why), 0);
    assert_string_equal(why, "peer not live (no heartbeat heard from it)");
    /* a broadcast has no one host to ask */
    assert_int_equal(pr_liveness(f->pr, "group:build", why, sizeof why), -1);
}

/* More agents than one heartbeat can carry: as many as fit are announced. */
static void test_heartbeat_sheds_what_does_not_fit(void **state)
{
    fx *f = *state;
    enum { N = 120 };
    pr_local_agent la[N];
    char gids[N][GID_MAX_LEN + 1], state_words[ENV_HB_STATE_LEN];
    const char *groups[ENV_HB_MAX_GROUPS + 1];
    char names[ENV_HB_MAX_GROUPS][NAME_MAX_LEN + 1];
    env_heartbeat d;
    char why[128], *js;
    size_t len;

    memset(state_words, 's', sizeof state_words - 1);
    state_words[sizeof state_words - 1] = '\0';
    for (size_t g = 0; g < ENV_HB_MAX_GROUPS; g++) {
        snprintf(names[g], sizeof names[g], "g%02zu%060d", g, 0);
        groups[g] = names[g];
    }
    groups[ENV_HB_MAX_GROUPS] = NULL;
    for (size_t i = 0; i < N; i++) {
        snprintf(gids[i], sizeof gids[i], "a%031zu@alpha", i);
        la[i].gid = gids[i];
        la[i].state = state_words;
        la[i].groups = groups;
    }
    assert_true(pr_set_local(f->pr, NULL, la, N));
    js = pr_heartbeat(f->pr, "ready", false, &len);
    assert_non_null(js);
    assert_true(len <= ENV_HB_MAX_LEN);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.n_agents > 50 && d.n_agents < N);
    print_message("one heartbeat carries %zu of %d agents at every limit (%zu bytes)\n", d.n_agents,
                  N, len);
    env_hb_free(&d);
    free(js);
}

/* gamma's heartbeat: lead groups (':'-separated), one agent w0@gamma in
 * agent_groups, sent offset_ms from now */
static void deliver_gamma_in(fx *f, const char *lead_groups, const char *agent_groups,
                             int64_t offset_ms)
{
    env_heartbeat h = hb_of("gamma", offset_ms);
    hb_add_agents(&h, lead_groups, 1, "gamma", "ready: idle", agent_groups);
    deliver(f, &h, f->kg, NULL);
    env_hb_free(&h);
}

/* fleet_view=groups (doc/presence.md): what to bind; a lead heard through a
 * shared group drops out of view (not stale) when it shares none; its later
 * heartbeats are not taken; addressing it brings it back, bound, and a send
 * does not call it away while its asked-for heartbeat is due. */
static void test_scoped_view(void **state)
{
    fx *f = *state;
    const char *const ops[] = {"ops", NULL};
    char **g, **l, why[120];

    f->o.fleet_view_all = false;
    f->o.fleet_view_auto = false;
    assert_true(pr_scoped(f->pr));
    assert_true(pr_set_local(f->pr, ops, NULL, 0));
    pr_hear_lists(f->pr, &g, &l);
    strv_is(g, "ops");
    strv_is(l, "beta"); /* the configured peer; never us */

    /* gamma in ops through its agent: heard */
    deliver_gamma_in(f, "qa", "ops", 0);
    assert_true(pr_is_peer(f->pr, "gamma"));
    pr_tick(f->pr, NULL);
    assert_true(pr_is_peer(f->pr, "gamma"));

    /* its agent leaves ops: out of view at the next tick, never stale */
    clear_notes(f);
    deliver_gamma_in(f, "qa", "build", 100);
    pr_tick(f->pr, NULL);
    assert_false(pr_is_peer(f->pr, "gamma"));
    assert_false(pr_is_host(f->pr, "gamma"));
    assert_true(noted(f, "-peers/gamma"));
    /* its key still carries ops for a while: those heartbeats are not news */
    clear_notes(f);
    deliver_gamma_in(f, "qa", "build", 200);
    assert_false(pr_is_host(f->pr, "gamma"));
    assert_false(noted(f, "+peers/gamma"));

    /* we write to it: addressed, listed, bound; not called away yet */
    pr_address(f->pr, "w0@gamma");
    assert_true(pr_is_peer(f->pr, "gamma"));
    pr_hear_lists(f->pr, &g, &l);
    strv_is(l, "beta gamma");
    g_strfreev(g); /* strv_is frees what it is given; g is not looked at here */
    pr_link(f->pr, true);
    assert_int_equal(pr_liveness(f->pr, "gamma", why, sizeof why), -1);
    deliver_gamma_in(f, "qa", "build", 300);
    assert_int_equal(pr_liveness(f->pr, "gamma", why, sizeof why), 1);
    pr_tick(f->pr, NULL);
    assert_true(pr_is_peer(f->pr, "gamma")); /* addressed: in view */
    pr_address(f->pr, "alpha");              /* ourselves: nothing */
    pr_hear_lists(f->pr, &g, &l);
    strv_is(l, "beta gamma");
    strv_is(g, "ops");
}

/* gamma's heartbeat every iv ms, in group ops (lead group), announcing the
 * group interval gi (0: none, a fleetfs before group heartbeats), signed
 * with k, sent offset_ms from now */
static void deliver_in_ops(fx *f, const char *from, sig_key *k, int64_t iv, int64_t gi,
                           int64_t offset_ms)
{
    env_heartbeat h = hb_of(from, offset_ms);
    h.interval_ms = iv;
    if (gi > 0) {
        h.has_group_iv = true;
        h.group_interval_ms = gi;
    }
    hb_add_agents(&h, "ops", 0, from, "ready: idle", NULL);
    deliver(f, &h, k, NULL);
    env_hb_free(&h);
}

static pr_state state_of(fx *f, const char *id)
{
    pr_info i;
    assert_true(pr_get(f->pr, id, &i));
    return i.state;
}

/* A lead addressed again and again (every send addresses it) and never
 * heard is called not live three intervals after it was first addressed,
 * not three after the last send (that never came while a script sent
 * every second: t0395 met it with fleet_view=auto). */
static void test_addressed_lead_not_live_after_three_intervals(void **state)
{
    fx *f = *state;
    char why[120] = "";

    f->o.fleet_view_all = false;
    f->o.fleet_view_auto = false;
    pr_link(f->pr, true);
    pr_address(f->pr, "quiet");
    assert_int_equal(pr_liveness(f->pr, "quiet", why, sizeof why), -1); /* asked just now */
    g_usleep(1600 * 1000);
    pr_address(f->pr, "quiet");
    g_usleep(1600 * 1000);
    pr_address(f->pr, "quiet");
    /* 3.2 s (three 1 s intervals) since the first address, 1.6 since the last */
    assert_int_equal(pr_liveness(f->pr, "quiet", why, sizeof why), 0);
    assert_string_equal(why, "peer not live (no heartbeat heard from it)");
}

/* fleet_view=auto (the default, presence/census.c): the whole fleet while
 * it hears at most view_limit leads; one more narrows it for good, what is
 * out of view dropped from peers/ (the configured peer stays), roster.#
 * no longer wanted; a census hears the whole fleet again for a while,
 * keeps who it hears out of every listing, puts them in its text, and may
 * not start again within census_every; a census that hears at most
 * view_limit widens again. */
static void test_auto_view_and_census(void **state)
{
    fx *f = *state;
    char *err = NULL, *text, **peers;
    const char *names[] = {"l1", "l2", "l3"};
    sig_key *k[3];
    int64_t win = -1;

    assert_true(f->o.fleet_view_auto); /* the default */
    assert_true(pr_scoped(f->pr));
    assert_int_equal(opts_set(&f->o, "view_limit", "2", &err), 0);
    assert_true(pr_wide(f->pr));
    /* while wide, a census is the roster now: no window, no limit */
    assert_int_equal(pr_census_begin(f->pr, &win), 1);
    pr_census_end(f->pr, "");
    assert_int_equal(pr_census_begin(f->pr, &win), 1);
    pr_census_end(f->pr, "");
    for (size_t i = 0; i < 2; i++) {
        env_heartbeat h = hb_of(names[i], 0);
        k[i] = make_key(f, names[i], true);
        deliver(f, &h, k[i], NULL);
        env_hb_free(&h);
    }
    assert_false(pr_tick(f->pr, NULL));
    assert_true(pr_wide(f->pr)); /* two heard: not more than 2 */
    assert_true(pr_is_peer(f->pr, "l1"));
    {
        env_heartbeat h = hb_of(names[2], 0);
        k[2] = make_key(f, names[2], true);
        deliver(f, &h, k[2], NULL);
        env_hb_free(&h);
    }
    pr_tick(f->pr, NULL);
    assert_false(pr_wide(f->pr)); /* three: narrowed */
    assert_false(pr_is_peer(f->pr, "l1"));
    assert_true(noted(f, "-peers/l1"));
    assert_true(pr_is_peer(f->pr, "beta")); /* configured: stays */
    /* a heartbeat from l2 now is not ours to hear */
    {
        env_heartbeat h = hb_of("l2", 10);
        deliver(f, &h, k[1], NULL);
        env_hb_free(&h);
    }
    assert_false(pr_is_peer(f->pr, "l2"));
    /* a census: wide for one interval (1 s here) and two seconds */
    assert_int_equal(pr_census_begin(f->pr, &win), 0);
    assert_int_equal(win, 3000);
    assert_true(pr_wide(f->pr));
    assert_int_equal(pr_census_begin(f->pr, &win), 2); /* one is on */
    {
        env_heartbeat h = hb_of("l1", 20);
        deliver(f, &h, k[0], NULL);
        env_hb_free(&h);
    }
    g_ptr_array_set_size(f->notes, 0);
    assert_false(pr_is_peer(f->pr, "l1")); /* heard, but kept apart */
    peers = pr_peers(f->pr);
    assert_false(g_strv_contains((const char *const *)peers, "l1"));
    g_strfreev(peers);
    pr_census_end(f->pr, "{\"coord_id\":\"alpha\"}\n");
    text = pr_census_text(f->pr);
    assert_non_null(strstr(text, "{\"coord_id\":\"alpha\"}\n{\"coord_id\":\"l1\""));
    assert_non_null(strstr(text, "\"inPeers\":false"));
    g_free(text);
    assert_true(noted(f, "census"));
    assert_false(noted(f, "+peers/l1")); /* never announced */
    /* only l1 beat in the window: at most view_limit heard, so wide again */
    assert_true(pr_wide(f->pr));
    for (size_t i = 0; i < 3; i++) {
        env_heartbeat h = hb_of(names[i], 30 + (int64_t)i);
        deliver(f, &h, k[i], NULL);
        env_hb_free(&h);
    }
    pr_tick(f->pr, NULL);
    assert_false(pr_wide(f->pr)); /* narrowed again */
    /* the last census started less than census_every (60 s) ago */
    assert_int_equal(pr_census_begin(f->pr, &win), -EAGAIN);
    assert_false(pr_wide(f->pr));
    for (size_t i = 0; i < 3; i++)
        sig_key_free(k[i]);
}

/* The group interval on the wire (doc/protocol.md section 11): signed by
 * gsig, which an older receiver never looks at (sig is unchanged); one
 * altered after signing is refused whole; one below the interval does not
 * decode; a heartbeat without it has none. */
static void test_group_interval_on_the_wire(void **state)
{
    fx *f = *state;
    env_heartbeat h = hb_of("gamma", 0), d;
    char why[160], *js;
    size_t len;

    h.has_group_iv = true;
    h.group_interval_ms = 25000;
    assert_int_equal(sig_sign_hb(f->kg, &h), 0);
    js = env_hb_encode(&h, &len);
    assert_non_null(strstr(js, "\"groupInterval\":25000"));
    assert_non_null(strstr(js, "\"gsig\":"));
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.has_group_iv);
    assert_int_equal(d.group_interval_ms, 25000);
    {
        /* an older receiver checks sig over the same eleven fields */
        char *err = NULL, *tdir = g_build_filename(f->dir, "trust", NULL);
        sig_trust *t = sig_trust_load_quiet(tdir, &err);
        assert_non_null(t);
        assert_int_equal(sig_verify_hb(t, &d), SIG_OK);
        assert_int_equal(sig_verify_hb_group(t, &d), SIG_OK);
        d.group_interval_ms = 60000; /* altered after signing */
        assert_int_equal(sig_verify_hb(t, &d), SIG_OK);
        assert_int_equal(sig_verify_hb_group(t, &d), SIG_BAD);
        sig_trust_free(t);
        g_free(tdir);
    }
    env_hb_free(&d);
    free(js);
    /* altered in transit: refused whole */
    h.group_interval_ms = 60000;
    deliver(f, &h, NULL, NULL);
    assert_int_equal(pr_rejected(f->pr), 1);
    assert_false(pr_is_host(f->pr, "gamma"));
    /* below the interval: not encoded, and not decoded */
    h.group_interval_ms = 500;
    assert_null(env_hb_encode(&h, &len));
    js = g_strdup_printf("{\"v\":1,\"type\":\"heartbeat\",\"from\":\"gamma\",\"host\":\"h\","
                         "\"version\":\"0\",\"sentAt\":\"%s\",\"expiresAt\":\"%s\","
                         "\"startedAt\":\"%s\",\"interval\":1000,\"agent\":\"x\","
                         "\"leaving\":false,\"groupInterval\":500}",
                         h.sentAt, h.expiresAt, h.startedAt);
    assert_int_equal(env_hb_decode(js, strlen(js), &d, why, sizeof why), -1);
    assert_non_null(strstr(why, "groupInterval"));
    g_free(js);
    /* none: a fleetfs before group heartbeats */
    h.has_group_iv = false;
    js = env_hb_encode(&h, &len);
    assert_null(strstr(js, "groupInterval"));
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_false(d.has_group_iv);
    env_hb_free(&d);
    free(js);
    env_hb_free(&h);
}

/* Our group interval: max(interval, G/group_rate s) in whole seconds, G
 * the members of our groups heard live, ourselves included; the interval
 * with group_rate=0, in no group, or with fleet_view=all (then not
 * announced at all). */
static void test_group_interval_policy(void **state)
{
    fx *f = *state;
    const char *const ops[] = {"ops", NULL};
    const char *names[] = {"l1", "l2"};
    char *err = NULL, *js, why[160];
    env_heartbeat d;
    size_t len;

    f->o.fleet_view_all = false;
    f->o.fleet_view_auto = false;
    assert_int_equal(opts_set(&f->o, "group_rate", "1", &err), 0);
    /* in no group: every heartbeat is a group heartbeat */
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_group_interval_ms(f->pr), 1000);
    assert_true(pr_set_local(f->pr, ops, NULL, 0));
    deliver_in_ops(f, "gamma", f->kg, 1000, 1000, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        sig_key *k = make_key(f, names[i], true);
        deliver_in_ops(f, names[i], k, 1000, 0, 0);
        sig_key_free(k);
    }
    /* four members (gamma, l1, l2 and us) at 1 a second: every 4 s */
    js = pr_heartbeat(f->pr, "ready", false, &len);
    assert_int_equal(pr_group_interval_ms(f->pr), 4000);
    assert_int_equal(pr_interval_ms(f->pr), 1000);
    assert_int_equal(env_hb_decode(js, len, &d, why, sizeof why), 0);
    assert_true(d.has_group_iv);
    assert_int_equal(d.group_interval_ms, 4000);
    assert_int_equal(d.interval_ms, 1000);
    env_hb_free(&d);
    free(js);
    /* 3 a second: 4/3 s, in whole seconds 2 s */
    assert_int_equal(opts_set(&f->o, "group_rate", "3", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_group_interval_ms(f->pr), 2000);
    /* a large rate: never below the interval */
    assert_int_equal(opts_set(&f->o, "group_rate", "100", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_group_interval_ms(f->pr), 1000);
    /* 0: every heartbeat to the groups, as before */
    assert_int_equal(opts_set(&f->o, "group_rate", "0", &err), 0);
    free(pr_heartbeat(f->pr, "ready", false, &len));
    assert_int_equal(pr_group_interval_ms(f->pr), 1000);
    assert_int_equal(opts_set(&f->o, "group_rate", "x", &err), -1);
    assert_non_null(strstr(err, "0..100000"));
    g_free(err);
    /* fleet_view=all: no group words, nothing announced */
    assert_int_equal(opts_set(&f->o, "group_rate", "1", &err), 0);
    f->o.fleet_view_all = true;
    f->o.fleet_view_auto = false;
    js = pr_heartbeat(f->pr, "ready", false, &len);
    assert_int_equal(pr_group_interval_ms(f->pr), 1000);
    assert_null(strstr(js, "groupInterval"));
    free(js);
}

/* Staleness judged truthfully: a lead heard only through a group binding
 * against three of its group intervals; a configured one, an addressed one
 * heard since, ourselves, and everyone with fleet_view=all against three
 * intervals; a lead addressed just now keeps the group judgement until its
 * asked-for heartbeat had three intervals to come. */
static void test_group_staleness(void **state)
{
    fx *f = *state;
    const char *const ops[] = {"ops", NULL};
    sig_key *kb = make_key(f, "beta", true);

    f->o.fleet_view_all = false;
    f->o.fleet_view_auto = false;
    assert_true(pr_set_local(f->pr, ops, NULL, 0));
    /* every 200 ms, to the group every 2 s */
    deliver_in_ops(f, "gamma", f->kg, 200, 2000, 0);
    deliver_in_ops(f, "beta", kb, 200, 2000, 0); /* configured */
    assert_int_equal(state_of(f, "gamma"), PR_LIVE);
    assert_int_equal(state_of(f, "beta"), PR_LIVE);
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "gamma"), PR_LIVE); /* 3 x 2 s */
    assert_int_equal(state_of(f, "beta"), PR_STALE); /* 3 x 200 ms */
    /* ourselves, in a group: our own come back only as group heartbeats */
    {
        env_heartbeat me = hb_of("alpha", 0);
        sig_key *ka;
        char *err = NULL, *path = g_strdup_printf("%s/alpha.key", f->dir);
        ka = sig_load_secret(path, &err);
        assert_non_null(ka);
        me.interval_ms = 200;
        me.has_group_iv = true;
        me.group_interval_ms = 2000;
        hb_add_agents(&me, "ops", 0, "alpha", "ready: idle", NULL);
        deliver(f, &me, ka, NULL);
        env_hb_free(&me);
        sig_key_free(ka);
        g_free(path);
    }
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "alpha"), PR_LIVE);
    assert_int_equal(state_of(f, "gamma"), PR_LIVE);
    /* fleet_view=all hears every heartbeat: 3 x 200 ms for everyone */
    f->o.fleet_view_all = true;
    f->o.fleet_view_auto = false;
    assert_int_equal(state_of(f, "gamma"), PR_STALE);
    assert_int_equal(state_of(f, "alpha"), PR_STALE);
    f->o.fleet_view_all = false;
    f->o.fleet_view_auto = false;
    /* without the member (an older fleetfs): its interval */
    deliver_in_ops(f, "gamma", f->kg, 200, 0, 100);
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "gamma"), PR_STALE);
    deliver_in_ops(f, "gamma", f->kg, 200, 2000, 200);
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "gamma"), PR_LIVE);
    /* addressed now: bound by name, asked for a heartbeat; still live until
     * that one had three intervals to come */
    pr_address(f->pr, "gamma");
    assert_int_equal(state_of(f, "gamma"), PR_LIVE);
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "gamma"), PR_STALE); /* no answer: dead */
    /* it answers: judged by its interval from now on */
    deliver_in_ops(f, "gamma", f->kg, 200, 2000, 300);
    assert_int_equal(state_of(f, "gamma"), PR_LIVE);
    g_usleep(700 * 1000);
    assert_int_equal(state_of(f, "gamma"), PR_STALE);
    sig_key_free(kb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hb_round_trip),
        cmocka_unit_test(test_hb_refusals),
        cmocka_unit_test(test_hb_agents_round_trip),
        cmocka_unit_test(test_hb_without_agents_unchanged),
        cmocka_unit_test(test_hb_agents_refusals),
        cmocka_unit_test(test_hb_size_and_old_readers),
        cmocka_unit_test_setup_teardown(test_trusted_heartbeat_makes_a_lead_appear, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_heartbeats_never_appear, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_old_future_and_replayed_are_ignored, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_liveness_waits_for_a_settled_link, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_heard_agents_and_groups, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_local_agents, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_agentless_heartbeat, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_agents_of_another_host_are_dropped, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_agents_must_be_signed, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_profiles_in_heartbeats, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_heard_agents_drop_after_discovery_ttl, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_sheds_what_does_not_fit, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_liveness_of_agents, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_interval_grows_with_the_fleet, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_scoped_view, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_group_interval_on_the_wire, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_group_interval_policy, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_group_staleness, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_auto_view_and_census, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_addressed_lead_not_live_after_three_intervals,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
