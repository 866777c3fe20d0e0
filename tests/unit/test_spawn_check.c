/* SPDX-License-Identifier: Apache-2.0 */
/* test_spawn_check.c — the far host's decision on a spawn or stop request
 * (fleetfs/spawn/check.h), against real directories and symlinks in a
 * temp dir: every refusal with its reason, the order in which they are
 * given, and that an approved request hands on the resolved directory,
 * never the request's text. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/spawn/check.h"

static char base[PATH_MAX], root[PATH_MAX];
static prof profs[2];
static prof_set set = {profs, 2};
static const char *const from_alpha[] = {"alpha", "gamma", NULL};
static unsigned running_now;
static const char *taken_name, *spawned_gid;

static bool taken(const char *name, void *arg)
{
    (void)arg;
    return taken_name && !strcmp(name, taken_name);
}

static unsigned running(const prof *p, void *arg)
{
    (void)arg;
    (void)p;
    return running_now;
}

static bool spawned(const char *gid, void *arg)
{
    (void)arg;
    return spawned_gid && !strcmp(gid, spawned_gid);
}

static sc_host host = {"beta", from_alpha, &set, taken, running, spawned, NULL};

static void mk(const char *rel)
{
    char *p = g_strdup_printf("%s/%s", base, rel);

    assert_int_equal(g_mkdir_with_parents(p, 0755), 0);
    g_free(p);
}

static void ln(const char *target, const char *rel)
{
    char *p = g_strdup_printf("%s/%s", base, rel);

    assert_int_equal(symlink(target, p), 0);
    g_free(p);
}

static int setup(void **state)
{
    char *t = g_dir_make_tmp("fleetfs-scheck-XXXXXX", NULL), *f;

    (void)state;
    assert_non_null(realpath(t, base)); /* /tmp may itself be a symlink */
    g_free(t);
    mk("root/a/b");
    mk("root/c");
    mk("rootx/secret"); /* shares root's prefix, outside it */
    f = g_strdup_printf("%s/root/file", base);
    assert_true(g_file_set_contents(f, "x", -1, NULL));
    g_free(f);
    ln("a", "root/in");              /* inside, stays inside */
    ln("/etc", "root/out");          /* inside, points out */
    ln("../rootx", "root/sideways"); /* to the prefix twin */
    ln("loop", "root/loop");         /* a loop */
    ln("root", "via");               /* dir_root reached through a link */
    snprintf(root, sizeof root, "%s/root", base);
    profs[0] = (prof){.name = "worker", .kind = "claude", .dir_root = root, .max = 2};
    profs[1] = (prof){.name = "nodir", .kind = "claude", .max = 1};
    return 0;
}

static int teardown(void **state)
{
    char *cmd = g_strdup_printf("rm -rf '%s'", base);

    (void)state;
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    return 0;
}

static ctl_env spawn_req(const char *from, const char *profile, const char *name, const char *dir)
{
    ctl_env e;

    ctl_init(&e, CTL_TYPE_SPAWN, from, "beta", 0, 1000);
    snprintf(e.profile, sizeof e.profile, "%s", profile);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.dir, sizeof e.dir, "%s", dir);
    return e;
}

#define VERDICT(W_, WORDS_, F_, P_, N_, D_)                                                        \
    do {                                                                                           \
        ctl_env e_ = spawn_req(F_, P_, N_, D_);                                                    \
        sc_spawn s_;                                                                               \
        char why_[600];                                                                            \
        sc_verdict v_ = sc_check_spawn(&host, &e_, &s_, why_, sizeof why_);                        \
        if (v_ != (W_) || !strstr(why_, WORDS_))                                                   \
            fail_msg("%s/%s/%s: got %s '%s', want %s '%s'", P_, N_, D_, sc_verdict_name(v_), why_, \
                     sc_verdict_name(W_), WORDS_);                                                 \
        if (v_ != SC_OK) {                                                                         \
            assert_null(s_.profile);                                                               \
            assert_string_equal(s_.dir, "");                                                       \
        }                                                                                          \
    } while (0)

static void approved_requests(void **state)
{
    static const struct {
        const char *dir, *want;
    } ok[] = {
        {"", ""},
        {"a", "/root/a"},
        {"a/b", "/root/a/b"},
        {"./a/./b/", "/root/a/b"},
        {"in", "/root/a"},      /* a symlink that stays inside */
        {"in/../c", "/root/c"}, /* resolved, not read as text */
        {"a/../c", "/root/c"},
        {".", "/root"},             /* dir_root itself */
        {"@ROOT/a/b", "/root/a/b"}, /* absolute, inside */
        {"@BASE/via/c", "/root/c"}, /* absolute through a link to dir_root */
    };

    (void)state;
    running_now = 1;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char dir[PATH_MAX], want[PATH_MAX * 2], why[600];
        ctl_env e;
        sc_spawn s;

        if (!strncmp(ok[i].dir, "@ROOT", 5))
            snprintf(dir, sizeof dir, "%s%s", root, ok[i].dir + 5);
        else if (!strncmp(ok[i].dir, "@BASE", 5))
            snprintf(dir, sizeof dir, "%s%s", base, ok[i].dir + 5);
        else
            snprintf(dir, sizeof dir, "%s", ok[i].dir);
        snprintf(want, sizeof want, "%s%s", ok[i].want[0] ? base : "", ok[i].want);
        e = spawn_req("alpha", "worker", "w1", dir);
        if (sc_check_spawn(&host, &e, &s, why, sizeof why) != SC_OK)
            fail_msg("'%s' refused: %s", dir, why);
        assert_ptr_equal(s.profile, &profs[0]);
        assert_string_equal(s.name, "w1");
        assert_string_equal(s.gid, "w1@beta");
        assert_string_equal(s.dir, want);
    }
    running_now = 0;
    VERDICT(SC_OK, "", "gamma", "nodir", "x-9_z", "");
}

static void refusals(void **state)
{
    char abs_out[PATH_MAX + 20], twin[PATH_MAX + 20];

    (void)state;
    running_now = 0;
    taken_name = "busy";
    snprintf(abs_out, sizeof abs_out, "%s/rootx/secret", base);
    snprintf(twin, sizeof twin, "%s/rootx", base);
    /* who asks comes first: an outsider learns nothing else */
    VERDICT(SC_NOT_ALLOWED, "delta may not start agents here", "delta", "worker", "w1", "");
    VERDICT(SC_NOT_ALLOWED, "requester not in spawn_from", "delta", "nosuch", "BAD", "/etc");
    VERDICT(SC_UNKNOWN_PROFILE, "no profile admin here", "alpha", "admin", "w1", "");
    VERDICT(SC_UNKNOWN_PROFILE, "unknown profile", "alpha", "", "w1", "");
    /* names */
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "W1", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "1w", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "w1@gamma", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "../x", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "a b", "");
    VERDICT(SC_BAD_NAME, "invalid name", "alpha", "worker", "w;rm", "");
    VERDICT(SC_NAME_TAKEN, "busy is in use", "alpha", "worker", "busy", "");
    VERDICT(SC_NAME_TAKEN, "beta is in use", "alpha", "worker", "beta", ""); /* the lead's own */
    /* directories */
    VERDICT(SC_BAD_DIR, "does not exist", "alpha", "worker", "w1", "nope");
    VERDICT(SC_BAD_DIR, "does not exist", "alpha", "worker", "w1", "/no/such/dir");
    VERDICT(SC_BAD_DIR, "does not exist", "alpha", "worker", "w1", "loop");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "..");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "a/../../rootx");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "../rootx/secret");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "out");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "sideways");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "/etc");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", "/");
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", abs_out);
    VERDICT(SC_BAD_DIR, "resolves outside", "alpha", "worker", "w1", twin);
    VERDICT(SC_BAD_DIR, "is not a directory", "alpha", "worker", "w1", "file");
    VERDICT(SC_BAD_DIR, "has no dir_root", "alpha", "nodir", "w1", "/tmp");
    /* the count */
    running_now = 2;
    VERDICT(SC_OVER_MAX, "2 of profile worker run already", "alpha", "worker", "w1", "a");
    running_now = 1;
    VERDICT(SC_OVER_MAX, "over max", "alpha", "nodir", "w1", "");
    /* a stop is not a spawn */
    {
        ctl_env e = spawn_req("alpha", "worker", "w1", "");
        sc_spawn s;
        char why[300];

        strcpy(e.type, CTL_TYPE_STOP);
        assert_int_equal(sc_check_spawn(&host, &e, &s, why, sizeof why), SC_MALFORMED);
    }
    taken_name = NULL;
}

static void nobody_by_default(void **state)
{
    sc_host h = host;
    const char *const none[] = {NULL};
    ctl_env e = spawn_req("alpha", "worker", "w1", "");
    sc_spawn s;
    char why[300];

    (void)state;
    h.spawn_from = NULL;
    assert_int_equal(sc_check_spawn(&h, &e, &s, why, sizeof why), SC_NOT_ALLOWED);
    h.spawn_from = none;
    assert_int_equal(sc_check_spawn(&h, &e, &s, why, sizeof why), SC_NOT_ALLOWED);
    h.name_taken = NULL;
    h.running = NULL;
    h.spawn_from = from_alpha;
    assert_int_equal(sc_check_spawn(&h, &e, &s, why, sizeof why), SC_OK);
}

static void stops(void **state)
{
    ctl_env e;
    char why[300];

    (void)state;
    spawned_gid = "w1@beta";
    ctl_init(&e, CTL_TYPE_STOP, "alpha", "beta", 0, 1000);
    strcpy(e.gid, "w1@beta");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_OK);
    strcpy(e.from, "delta");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_NOT_ALLOWED);
    strcpy(e.from, "alpha");
    strcpy(e.gid, "w2@beta"); /* configured, or someone else's: not ours to stop */
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_NOT_OURS);
    assert_non_null(strstr(why, "w2@beta was not started by this fleetfs"));
    strcpy(e.gid, "w1@gamma");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_NOT_OURS);
    strcpy(e.gid, "w1");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_MALFORMED);
    strcpy(e.gid, "w1@beta@x");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_MALFORMED);
    strcpy(e.type, CTL_TYPE_SPAWN);
    strcpy(e.gid, "w1@beta");
    assert_int_equal(sc_check_stop(&host, &e, why, sizeof why), SC_MALFORMED);
    spawned_gid = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(approved_requests),
        cmocka_unit_test(refusals),
        cmocka_unit_test(nobody_by_default),
        cmocka_unit_test(stops),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
