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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/options.h"
#include "fleetfs/presence.h"
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
    env_time_format(now - 60000, h.startedAt);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hb_round_trip),
        cmocka_unit_test(test_hb_refusals),
        cmocka_unit_test_setup_teardown(test_trusted_heartbeat_makes_a_lead_appear, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_heartbeats_never_appear, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_old_future_and_replayed_are_ignored, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_liveness_waits_for_a_settled_link, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
