/* SPDX-License-Identifier: Apache-2.0 */
/* tmux_run.h — for unit tests: a tmux server of the test's own
 * (TMUX_TMPDIR in a fresh temp dir, one session "base") and the path of
 * BUILD/tools/fake-agent. Include after cmocka.h. Without tmux, tr_start
 * leaves dir empty and each test skips (TR_NEED_TMUX). */
#ifndef FLEETFS_TESTS_TMUX_RUN_H
#define FLEETFS_TESTS_TMUX_RUN_H

#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herdr/tmux_int.h"

#define TR_NEED_TMUX(dir) \
    do {                  \
        (void)state;      \
        if (!(dir)[0])    \
            skip();       \
    } while (0)

/* dir: the temp dir (realpath'd; the server's TMUX_TMPDIR); agent: the
 * test agent. */
static inline void tr_start(char dir[PATH_MAX], char agent[PATH_MAX])
{
    char exe[PATH_MAX], *t;
    ssize_t n = readlink("/proc/self/exe", exe, PATH_MAX - 1);

    dir[0] = '\0';
    if (system("command -v tmux >/dev/null 2>&1") != 0)
        return;
    assert_true(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0'; /* BUILD/tests */
    *strrchr(exe, '/') = '\0'; /* BUILD */
    snprintf(agent, PATH_MAX, "%s/tools/fake-agent", exe);
    assert_int_equal(access(agent, X_OK), 0);
    t = g_dir_make_tmp("fleetfs-tmux-XXXXXX", NULL);
    assert_non_null(realpath(t, dir));
    g_free(t);
    g_setenv("TMUX_TMPDIR", dir, TRUE);
    g_unsetenv("TMUX");
    assert_int_equal(system("tmux -f /dev/null new-session -d -s base -x 120 -y 40"), 0);
}

static inline void tr_stop(const char *dir)
{
    char *cmd;

    if (!dir[0])
        return;
    cmd = g_strdup_printf("tmux kill-server 2>/dev/null; rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
}

/* How many windows the server has (-1: tmux failed). */
static inline int tr_windows(void)
{
    const char *a[] = {"list-windows", "-a", "-F", "#{window_id}", NULL};
    char *out = NULL, why[200];
    int n = 0;

    if (!tb_run(a, NULL, &out, why, sizeof why))
        return -1;
    for (char *p = out; *p; p++)
        n += *p == '\n';
    g_free(out);
    return n;
}

#endif
