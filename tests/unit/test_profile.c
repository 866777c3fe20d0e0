/* SPDX-License-Identifier: Apache-2.0 */
/* test_profile.c — [profile NAME] sections and spawn_from, read through
 * opts_load_file and opts_finish exactly as the daemon reads its config:
 * what a good profile becomes (absolute program, split argv, resolved
 * dir_root), and every refusal at start with the words that name it. */
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
#include <unistd.h>

#include "fleetfs/config/options.h"

static char *tmp;

static int setup(void **state)
{
    char *agent, *work;

    (void)state;
    tmp = g_dir_make_tmp("fleetfs-prof-XXXXXX", NULL);
    agent = g_strdup_printf("%s/myagent", tmp);
    assert_true(g_file_set_contents(agent, "#!/bin/sh\nexec sleep 100\n", -1, NULL));
    assert_int_equal(chmod(agent, 0755), 0);
    work = g_strdup_printf("%s/work", tmp);
    assert_int_equal(g_mkdir(work, 0755), 0);
    g_free(work);
    work = g_strdup_printf("%s/link", tmp);
    assert_int_equal(symlink("work", work), 0);
    g_free(work);
    g_free(agent);
    return 0;
}

static int teardown(void **state)
{
    char *cmd = g_strdup_printf("rm -rf '%s'", tmp);

    (void)state;
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    g_free(tmp);
    return 0;
}

/* Loads text as a config file, then -o inject=..., then opts_finish. */
static int load(const char *text, const char *inject, fs_opts *o, char **err)
{
    char *path = g_strdup_printf("%s/fleetfs.conf", tmp);
    char *full = g_strdup_printf("[fleetfs]\ncoord_id = beta\nstate_dir = %s/state\n%s", tmp, text);
    int rc;

    assert_true(g_file_set_contents(path, full, -1, NULL));
    opts_init(o);
    *err = NULL;
    rc = opts_load_file(o, path, true, err);
    if (rc == 0 && inject)
        rc = opts_set(o, "inject", inject, err);
    if (rc == 0)
        rc = opts_finish(o, err);
    g_free(full);
    g_free(path);
    return rc;
}

static void good_profiles(void **state)
{
    fs_opts o;
    char *err, *conf, *want;
    const prof *p;

    (void)state;
    conf = g_strdup_printf("inject_commands = claude:myagent\n"
                           "spawn_from = alpha:gamma\n"
                           "[profile worker]\n"
                           "kind = claude\nargs = --model opus 'two words'\n"
                           "command = %s/myagent --flag 'a b'\n"
                           "dir_root = %s/link\nmax = 3\nready_timeout = 10s\n"
                           "[profile tiny]\nkind = codex\n",
                           tmp, tmp);
    assert_int_equal(load(conf, "herdr", &o, &err), 0);
    assert_int_equal(o.profiles.n, 2);
    p = prof_find(&o.profiles, "worker");
    assert_non_null(p);
    assert_string_equal(p->kind, "claude");
    assert_int_equal(g_strv_length(p->args), 3);
    assert_string_equal(p->args[2], "two words");
    want = g_strdup_printf("%s/myagent", tmp);
    assert_string_equal(p->command[0], want);
    assert_string_equal(p->command[2], "a b");
    assert_string_equal(p->program, "myagent");
    g_free(want);
    want = g_strdup_printf("%s/work", tmp); /* the symlink resolved */
    assert_string_equal(p->dir_root, want);
    g_free(want);
    assert_int_equal(p->max, 3);
    assert_int_equal(p->ready_timeout_ms, 10000);
    p = prof_find(&o.profiles, "tiny");
    assert_non_null(p);
    assert_int_equal(p->max, 1); /* defaults */
    assert_int_equal(p->ready_timeout_ms, 30000);
    assert_null(p->dir_root);
    assert_null(p->command);
    assert_non_null(p->args);
    assert_null(p->args[0]);
    assert_null(prof_find(&o.profiles, "nobody"));
    assert_int_equal(g_strv_length(o.spawn_from), 2);
    assert_string_equal(o.spawn_from[1], "gamma");
    opts_free(&o);
    g_free(conf);

    /* a program found in PATH is kept by its absolute path */
    assert_int_equal(
        load("inject_commands = sleep\n[profile s]\ncommand = sleep 100\n", "tmux", &o, &err), 0);
    assert_true(o.profiles.v[0].command[0][0] == '/');
    assert_string_equal(o.profiles.v[0].program, "sleep");
    opts_free(&o);
    /* by default nobody may spawn */
    assert_int_equal(load("", NULL, &o, &err), 0);
    assert_non_null(o.spawn_from);
    assert_null(o.spawn_from[0]);
    assert_int_equal(o.profiles.n, 0);
    opts_free(&o);
}

static void refusals(void **state)
{
    static const struct {
        const char *conf, *inject, *words;
    } cases[] = {
        {"[profile Worker]\nkind = claude\n", NULL, "[profile Worker]: a profile name is"},
        {"[profile ]\nkind = claude\n", NULL, "a profile name is"},
        {"[profile w]\nkind = claude\nshell = yes\n", NULL, "unknown key 'shell'"},
        {"[profile w]\nargs = -x\n", NULL, "args without kind"},
        {"[profile w]\nmax = 2\n", NULL, "neither kind (herdr) nor command (tmux)"},
        {"[profile w]\nkind = Claude Code\n", NULL, "kind: expected a herdr agent kind"},
        {"[profile w]\nkind = c\nargs = 'unclosed\n", NULL, "args:"},
        {"[profile w]\ncommand = no-such-program-here\n", "tmux", "is not an executable program"},
        {"[profile w]\ncommand = /bin/sh -c 'claude'\n", "tmux", "a shell; fleetfs never types"},
        {"[profile w]\ncommand = bash\n", "tmux", "a shell"},
        {"[profile w]\ncommand = python3 -c 'import os'\n", "tmux", "an interpreter's prompt"},
        {"[profile w]\ncommand = /tmp\n", "tmux", "is not an executable program"},
        {"[profile w]\nkind = c\ndir_root = relative/dir\n", NULL,
         "dir_root: expected an absolute"},
        {"[profile w]\nkind = c\ndir_root = /no/such/dir\n", NULL, "not an existing directory"},
        {"[profile w]\nkind = c\ndir_root = /etc/passwd\n", NULL, "not an existing directory"},
        {"[profile w]\nkind = c\nmax = 0\n", NULL, "max: expected a number 1..1000"},
        {"[profile w]\nkind = c\nmax = lots\n", NULL, "max: expected"},
        {"[profile w]\nkind = c\nmax = 1001\n", NULL, "max: expected"},
        {"[profile w]\nkind = c\nready_timeout = 3s\n", NULL, "ready_timeout: expected"},
        {"[profile w]\nkind = c\nready_timeout = 6m\n", NULL, "ready_timeout: expected"},
        {"[profile w]\nkind = c\n", "none", "inject=none: there is no terminal"},
        {"[profile w]\nkind = c\n", "tmux", "inject=tmux starts a command"},
        {"[profile w]\ncommand = sleep 1\n", "herdr", "this profile has no kind"},
        {"[profile w]\ncommand = sleep 1\n", NULL, "inject=auto starts agents through herdr"},
        {"inject_commands = claude\n[profile w]\ncommand = sleep 1\n", "tmux",
         "runs sleep, which is not in inject_commands"},
        {"spawn_from = alpha::beta\n", NULL, "spawn_from: empty name"},
        {"spawn_from = Alpha\n", NULL, "spawn_from: 'Alpha' is not a lead name"},
        {"spawn_from = a:a\n", NULL, "spawn_from: 'a' is listed twice"},
        {"[agentish]\nx = 1\n", NULL, "unknown group [agentish]"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fs_opts o;
        char *err = NULL;

        if (load(cases[i].conf, cases[i].inject, &o, &err) != -1)
            fail_msg("case %zu was accepted: %s", i, cases[i].conf);
        if (!err || !strstr(err, cases[i].words))
            fail_msg("case %zu: '%s' does not say '%s'", i, err ? err : "(null)", cases[i].words);
        g_free(err);
        opts_free(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_profiles),
        cmocka_unit_test(refusals),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
