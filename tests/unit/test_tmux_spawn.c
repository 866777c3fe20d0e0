/* SPDX-License-Identifier: Apache-2.0 */
/* test_tmux_spawn.c — starting an agent in a new tmux window and closing
 * it (herdr/spawn.h), against a real tmux server of its own (TMUX_TMPDIR
 * in a temp dir) and the test agent BUILD/tools/fake-agent. What is
 * checked is what tmux itself reports afterwards: which windows exist,
 * the pane's title, its directory, its program; and that nothing a
 * directory's name holds is run. Skipped when tmux is not installed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herdr/spawn.h"
#include "herdr/tmux_int.h"
#include "tests/unit/tmux_run.h"

static char tmp[PATH_MAX], agent[PATH_MAX], odd_agent[PATH_MAX];

/* tmux's stdout for args, chomped (g_free); NULL when tmux failed. */
static char *tmux_out(const char *const *args)
{
    char *out = NULL, why[256];

    if (!tb_run(args, NULL, &out, why, sizeof why))
        return NULL;
    return g_strchomp(out);
}

static char *pane_fmt(const char *pane, const char *fmt)
{
    const char *a[] = {"display-message", "-p", "-t", pane, fmt, NULL};

    return tmux_out(a);
}

static int setup(void **state)
{
    char *cmd;

    (void)state;
    tr_start(tmp, agent);
    if (!tmp[0])
        return 0;                    /* each test skips */
    assert_int_equal(chdir(tmp), 0); /* where a format's #(...) would run */
    /* a program whose name a shell would expand: sh -c would not find it
     * (cat: it waits on its terminal without arguments) */
    snprintf(odd_agent, sizeof odd_agent, "%s/ca$t", tmp);
    cmd = g_strdup_printf("cp /bin/cat '%s'", odd_agent);
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tr_stop(tmp);
    return 0;
}

#define NEED_TMUX() TR_NEED_TMUX(tmp)

static sp_request rq_for(const char *const *argv, const char *program)
{
    sp_request rq = {.name = "w1",
                     .ready_ms = 5000,
                     .argv = argv,
                     .program = program,
                     .tag = "w1@beta",
                     .quiet_ms = 300};

    return rq;
}

static void ready_titled_marked_closed(void **state)
{
    char typed[PATH_MAX + 8], why[300];
    const char *argv[] = {agent, typed, NULL};
    sp_request rq = rq_for(argv, "fake-agent");
    sp_result out;
    char *s;

    NEED_TMUX();
    snprintf(typed, sizeof typed, "%s/typed", tmp);
    assert_int_equal(tr_windows(), 1);
    if (sp_tmux_start(&rq, &out) != 0)
        fail_msg("not started: %s", out.why);
    assert_int_equal(tr_windows(), 2);
    assert_true(out.window_id[0] == '@' && out.pane_id[0] == '%');
    s = pane_fmt(out.pane_id, "#{pane_title}\t#{pane_current_command}\t#{window_name}");
    assert_string_equal(s, "w1\tfake-agent\tw1");
    g_free(s);
    /* somebody else's tag: refused, the window stays */
    assert_int_equal(sp_tmux_close(out.window_id, "w2@beta", why, sizeof why), -1);
    assert_non_null(strstr(why, "not one this fleetfs started"));
    assert_int_equal(tr_windows(), 2);
    /* a restarted fleetfs finds it by its mark (and not the base window) */
    {
        char **marked = sp_tmux_marked(why, sizeof why), *want;

        assert_non_null(marked);
        assert_int_equal(g_strv_length(marked), 1);
        want = g_strdup_printf("%s\tw1@beta", out.window_id);
        assert_string_equal(marked[0], want);
        g_free(want);
        g_strfreev(marked);
    }
    assert_int_equal(sp_tmux_close(out.window_id, "w1@beta", why, sizeof why), 0);
    assert_int_equal(tr_windows(), 1);
    {
        char **marked = sp_tmux_marked(why, sizeof why);

        assert_non_null(marked);
        assert_null(marked[0]);
        g_strfreev(marked);
    }
    /* no tmux server at all: no window, not an error */
    {
        char *none = g_strdup_printf("%s/no-server", tmp), **marked;

        assert_int_equal(mkdir(none, 0700), 0);
        g_setenv("TMUX_TMPDIR", none, TRUE);
        marked = sp_tmux_marked(why, sizeof why);
        g_setenv("TMUX_TMPDIR", tmp, TRUE);
        if (!marked)
            fail_msg("no server: %s", why);
        assert_null(marked[0]);
        g_strfreev(marked);
        g_free(none);
    }
    if (sp_tmux_close(out.window_id, "w1@beta", why, sizeof why) != 0) /* gone: fine */
        fail_msg("closing a closed window: %s", why);
}

/* A window this fleetfs did not make is never closed. */
static void close_refuses_a_strangers_window(void **state)
{
    const char *mk[] = {"new-window", "-d",         "-P", "-F", "#{window_id}",
                        "--",         "/bin/sleep", "60", NULL};
    char *w, why[300];

    NEED_TMUX();
    w = tmux_out(mk);
    assert_non_null(w);
    assert_int_equal(sp_tmux_close(w, "w1@beta", why, sizeof why), -1);
    assert_non_null(strstr(why, "its mark is ''"));
    assert_int_equal(tr_windows(), 2);
    {
        const char *k[] = {"kill-window", "-t", w, NULL};

        g_free(tmux_out(k));
    }
    g_free(w);
}

/* Each way of not becoming ready fails with its reason and leaves no
 * window behind. */
static void not_ready_leaves_no_window(void **state)
{
    const char *seq[] = {"/usr/bin/seq", "inf", NULL}; /* draws for ever */
    const char *sleeper[] = {"/bin/sleep", "30", NULL};
    const char *falls[] = {"/bin/false", NULL};
    const char *sh[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    const struct {
        const char *const *argv;
        const char *program, *words;
    } cases[] = {
        {seq, "seq", "not ready within 1000 ms: seq was still drawing"},
        {sleeper, "fake-agent", "the pane runs sleep, not fake-agent"},
        {falls, "false", "false exited"},
        {sh, "sh", "not ready within 1000 ms"},
    };

    NEED_TMUX();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sp_request rq = rq_for(cases[i].argv, cases[i].program);
        sp_result out;

        rq.ready_ms = 1000;
        if (sp_tmux_start(&rq, &out) != -1)
            fail_msg("case %zu started", i);
        if (!strstr(out.why, cases[i].words))
            fail_msg("case %zu: '%s' does not say '%s'", i, out.why, cases[i].words);
        assert_non_null(strstr(out.why, "closed"));
        assert_string_equal(out.window_id, "");
        assert_int_equal(tr_windows(), 1);
    }
}

/* A directory's name is never run: not by tmux's formats (#(...)), not as
 * a tmux command separator (a trailing ';'); and a one-word command never
 * goes through a shell ($ in its name is not expanded). */
static void names_are_not_run(void **state)
{
    const char *dirs[] = {"#(touch PWNED)", "semi;", "#{pane_id}"};
    char typed[PATH_MAX + 8], why[300];
    const char *argv[] = {agent, typed, NULL};
    const char *odd[] = {odd_agent, NULL};

    NEED_TMUX();
    snprintf(typed, sizeof typed, "%s/typed", tmp);
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char dir[PATH_MAX + 64], *cwd;
        sp_request rq = rq_for(argv, "fake-agent");
        sp_result out;

        snprintf(dir, sizeof dir, "%s/%s", tmp, dirs[i]);
        assert_int_equal(mkdir(dir, 0755), 0);
        rq.dir = dir;
        if (sp_tmux_start(&rq, &out) != 0)
            fail_msg("%s: not started: %s", dirs[i], out.why);
        cwd = pane_fmt(out.pane_id, "#{pane_current_path}");
        assert_string_equal(cwd, dir);
        g_free(cwd);
        assert_int_equal(sp_tmux_close(out.window_id, "w1@beta", why, sizeof why), 0);
    }
    assert_int_equal(access("PWNED", F_OK), -1);
    assert_int_equal(access("/PWNED", F_OK), -1);
    {
        sp_request rq = rq_for(odd, "ca$t");
        sp_result out;

        if (sp_tmux_start(&rq, &out) != 0)
            fail_msg("one-word command: %s", out.why);
        assert_int_equal(sp_tmux_close(out.window_id, "w1@beta", why, sizeof why), 0);
    }
    assert_int_equal(tr_windows(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ready_titled_marked_closed),
        cmocka_unit_test(close_refuses_a_strangers_window),
        cmocka_unit_test(not_ready_leaves_no_window),
        cmocka_unit_test(names_are_not_run),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
