/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux_spawn.c — starting an agent in a new tmux window, and
 * closing it (herdr/spawn.h says what and why).
 *
 * What tmux itself would do with our arguments, and how we stop it:
 *   - a one-word command is run with `sh -c WORD`; more words are exec'd.
 *     So a one-word argv is run through /usr/bin/env: a shell never sees it;
 *   - an argument ending in ';' ends a tmux command (the rest would be read
 *     as another tmux command); every argument we pass that ends in ';' gets
 *     tmux's escape, a backslash before that ';';
 *   - -c (the start directory) is expanded as a tmux format, and a format
 *     can run a shell command (#(...)): a directory named so inside dir_root
 *     would run it. Every '#' in the directory is doubled ('##' is a literal
 *     '#' in a format). The command's own arguments are not expanded.
 * The name is [a-z][a-z0-9_-]{0,31} (check.c), safe in every position.
 *
 * Readiness: tmux knows no agents, so "ready" is what the injector itself
 * would require before typing (herdr/foreground.h: the pane's foreground is
 * the profile's program, not a shell or anything else) and, on top, that
 * the pane has shown nothing new for quiet_ms: an agent drawing its first
 * screen is not yet reading. The window keeps a dead pane
 * (remain-on-exit), so a program that exits early is reported with its
 * status, and the window is then killed: nothing is left behind. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "herdr/foreground.h"
#include "herdr/spawn.h"
#include "herdr/tmux_int.h"

#define SP_MARK "@fleetfs_spawn"
#define SP_POLL_MS 100

/* s as one tmux argument: a trailing ';' escaped. g_free. */
static char *sp_arg(const char *s)
{
    size_t n = strlen(s);

    if (n && s[n - 1] == ';')
        return g_strdup_printf("%.*s\\;", (int)(n - 1), s);
    return g_strdup(s);
}

/* A directory for -c: every '#' doubled, then as sp_arg. g_free. */
static char *sp_dir_arg(const char *dir)
{
    GString *g = g_string_new(NULL);
    char *out;

    for (const char *p = dir; *p; p++) {
        if (*p == '#')
            g_string_append_c(g, '#');
        g_string_append_c(g, *p);
    }
    out = sp_arg(g->str);
    g_string_free(g, TRUE);
    return out;
}

static long long sp_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

/* new-window; fills out->window_id, out->pane_id. */
static int sp_new_window(const sp_request *rq, sp_result *out)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
    char *text = NULL, err[256];
    gchar **f;
    int rc = -1;

    g_ptr_array_add(a, g_strdup("new-window"));
    g_ptr_array_add(a, g_strdup("-d"));
    g_ptr_array_add(a, g_strdup("-P"));
    g_ptr_array_add(a, g_strdup("-F"));
    g_ptr_array_add(a, g_strdup("#{window_id}\t#{pane_id}"));
    g_ptr_array_add(a, g_strdup("-n"));
    g_ptr_array_add(a, g_strdup(rq->name));
    if (rq->session) {
        g_ptr_array_add(a, g_strdup("-t"));
        g_ptr_array_add(a, g_strdup_printf("%s:", rq->session));
    }
    if (rq->dir) {
        g_ptr_array_add(a, g_strdup("-c"));
        g_ptr_array_add(a, sp_dir_arg(rq->dir));
    }
    g_ptr_array_add(a, g_strdup("--"));
    if (!rq->argv[1]) /* one word: tmux would hand it to sh -c */
        g_ptr_array_add(a, g_strdup("/usr/bin/env"));
    for (const char *const *p = rq->argv; *p; p++)
        g_ptr_array_add(a, sp_arg(*p));
    g_ptr_array_add(a, NULL);
    if (!tb_run((const char *const *)a->pdata, NULL, &text, err, sizeof err)) {
        snprintf(out->why, sizeof out->why, "tmux new-window: %s", err);
    } else if (g_strv_length(f = g_strsplit(g_strchomp(text), "\t", 2)) != 2) {
        g_strfreev(f);
        snprintf(out->why, sizeof out->why, "tmux new-window said '%s', not the new ids", text);
    } else {
        g_strlcpy(out->window_id, f[0], sizeof out->window_id);
        g_strlcpy(out->pane_id, f[1], sizeof out->pane_id);
        g_strfreev(f);
        rc = 0;
    }
    g_free(text);
    g_ptr_array_free(a, TRUE);
    return rc;
}

/* The mark, a dead pane kept, the title: one tmux call. */
static int sp_dress(const sp_request *rq, sp_result *out)
{
    char err[256];
    const char *args[] = {
        "set-option",  "-w", "-t",         out->window_id, SP_MARK,          rq->tag, ";",
        "set-option",  "-w", "-t",         out->window_id, "remain-on-exit", "on",    ";",
        "select-pane", "-t", out->pane_id, "-T",           rq->name,         NULL};

    if (tb_run(args, NULL, NULL, err, sizeof err))
        return 0;
    /* tmux cannot keep a dead pane for a window before it exists (an
     * option set in the same call lands on the current window), so a
     * program that ends at once takes its window with it */
    if (strstr(err, "no such window") || strstr(err, "can't find"))
        snprintf(out->why, sizeof out->why,
                 "%s exited at once (its window closed before it could be watched)", rq->program);
    else
        snprintf(out->why, sizeof out->why, "tmux could not mark window %s: %s", out->window_id,
                 err);
    return -1;
}

typedef enum { LOOK_GONE, LOOK_DEAD, LOOK_NOT_YET, LOOK_OWNS } sp_look;

/* One look at the pane: what runs in front, and what it shows. */
static sp_look sp_look_once(const sp_request *rq, const sp_result *out, char **screen, char *why,
                            size_t n)
{
    /* display-message answers for a target that is gone too, with empty
     * values (tmux 3.3): the pane's own id in the answer tells */
    const char *disp[] = {"display-message",
                          "-p",
                          "-t",
                          out->pane_id,
                          "#{pane_dead}\t#{pane_dead_status}\t#{pane_pid}\t#{pane_tty}\t"
                          "#{pane_current_command}\t#{cursor_x},#{cursor_y}\t#{pane_id}",
                          NULL};
    const char *cap[] = {"capture-pane", "-p", "-e", "-t", out->pane_id, NULL};
    const char *allow[] = {rq->program, NULL};
    char err[256], *text = NULL;
    gchar **f;
    sp_look r = LOOK_NOT_YET;
    fg_proc *procs = NULL;
    size_t np = 0;
    int leader = 0;
    fg_verdict v;

    if (!tb_run(disp, NULL, &text, err, sizeof err)) {
        snprintf(why, n, "its window is gone (%s)", err);
        return LOOK_GONE;
    }
    f = g_strsplit(g_strchomp(text), "\t", 7);
    g_free(text);
    if (g_strv_length(f) != 7 || strcmp(f[6], out->pane_id) != 0) {
        snprintf(why, n, "its window is gone");
        r = LOOK_GONE;
    } else if (!strcmp(f[0], "1")) {
        snprintf(why, n, "%s exited (status %s) before it was ready", rq->program,
                 f[1][0] ? f[1] : "?");
        r = LOOK_DEAD;
    } else {
        if (fg_read(atoi(f[2]), f[3], &procs, &np, &leader) < 0)
            np = 0;
        v = fg_judge(f[4], procs, np, leader, allow);
        fg_free(procs, np);
        if (v.kind == FG_AGENT)
            r = LOOK_OWNS;
        else
            snprintf(why, n, "the pane runs %s, not %s", v.name[0] ? v.name : "nothing",
                     rq->program);
        if (tb_run(cap, NULL, &text, err, sizeof err)) {
            *screen = g_strdup_printf("%s\n%s", f[5], text); /* the cursor counts too */
            g_free(text);
        }
    }
    g_strfreev(f);
    return r;
}

/* Until ready, dead, gone, or the deadline. 0 ready, -1 with out->why. */
static int sp_wait_ready(const sp_request *rq, sp_result *out)
{
    long long deadline = sp_now_ms() + rq->ready_ms, quiet_since = sp_now_ms();
    int quiet_ms = rq->quiet_ms > 0 ? rq->quiet_ms : 500;
    char *last = NULL, why[300] = "nothing seen yet";

    for (;;) {
        char *screen = NULL;
        sp_look l = sp_look_once(rq, out, &screen, why, sizeof why);
        long long now = sp_now_ms();

        if (!screen || !last || strcmp(screen, last) != 0)
            quiet_since = now;
        g_free(last);
        last = screen;
        if (l == LOOK_OWNS && now - quiet_since >= quiet_ms) {
            g_free(last);
            return 0;
        }
        if (l == LOOK_OWNS)
            snprintf(why, sizeof why, "%s was still drawing", rq->program);
        if (l == LOOK_GONE || l == LOOK_DEAD || now >= deadline) {
            g_free(last);
            if (l == LOOK_GONE || l == LOOK_DEAD)
                snprintf(out->why, sizeof out->why, "%s", why);
            else
                snprintf(out->why, sizeof out->why, "not ready within %d ms: %s", rq->ready_ms,
                         why);
            return -1;
        }
        poll(NULL, 0, SP_POLL_MS);
    }
}

/* Kills the window we made; says what became of it in out->why. */
static int sp_fail(sp_result *out)
{
    const char *kill[] = {"kill-window", "-t", out->window_id, NULL};
    char err[256];
    size_t len = strlen(out->why);

    if (tb_run(kill, NULL, NULL, err, sizeof err))
        snprintf(out->why + len, sizeof out->why - len, "; window %s closed", out->window_id);
    else if (strstr(err, "can't find") || strstr(err, "no such window"))
        snprintf(out->why + len, sizeof out->why - len, "; window %s is gone", out->window_id);
    else
        snprintf(out->why + len, sizeof out->why - len,
                 "; window %s may remain (%s): close it by hand", out->window_id, err);
    out->pane_id[0] = out->window_id[0] = '\0';
    return -1;
}

int sp_tmux_start(const sp_request *rq, sp_result *out)
{
    memset(out, 0, sizeof *out);
    if (!rq->argv || !rq->argv[0] || !rq->program || !rq->tag || !rq->name) {
        snprintf(out->why, sizeof out->why, "no command, program, tag or name to start");
        return -1;
    }
    if (sp_new_window(rq, out) < 0)
        return -1;
    if (rq->made)
        rq->made(out->pane_id, out->window_id, rq->made_arg);
    if (sp_dress(rq, out) < 0 || sp_wait_ready(rq, out) < 0)
        return sp_fail(out);
    return 0;
}

int sp_tmux_close(const char *window_id, const char *tag, char *why, size_t n)
{
    /* display-message answers for a window that is gone too (with empty
     * values): the id in the answer tells */
    const char *ask[] = {
        "display-message", "-p", "-t", window_id, "#{window_id}\t#{" SP_MARK "}", NULL};
    const char *kill[] = {"kill-window", "-t", window_id, NULL};
    char err[256], *mark = NULL;

    if (!tb_run(ask, NULL, &mark, err, sizeof err)) {
        if (strstr(err, "can't find") || strstr(err, "no such window") ||
            strstr(err, "no server running"))
            return 0; /* gone already (with its server): what we wanted */
        snprintf(why, n, "tmux: %s", err);
        return -1;
    }
    mark[strcspn(mark, "\n")] = '\0'; /* not g_strchomp: an empty mark ends in a tab */
    if (strncmp(mark, window_id, strlen(window_id)) != 0 || mark[strlen(window_id)] != '\t') {
        g_free(mark);
        return 0; /* gone already */
    }
    if (strcmp(mark + strlen(window_id) + 1, tag) != 0) {
        snprintf(why, n, "window %s is not one this fleetfs started for %s (its mark is '%s')",
                 window_id, tag, mark + strlen(window_id) + 1);
        g_free(mark);
        return -1;
    }
    g_free(mark);
    if (!tb_run(kill, NULL, NULL, err, sizeof err)) {
        snprintf(why, n, "tmux kill-window %s: %s", window_id, err);
        return -1;
    }
    return 0;
}

char **sp_tmux_marked(char *why, size_t n)
{
    const char *args[] = {"list-windows", "-a", "-F", "#{window_id}\t#{" SP_MARK "}", NULL};
    GPtrArray *hits = g_ptr_array_new();
    char err[256], *out = NULL;
    gchar **lines;

    if (!tb_run(args, NULL, &out, err, sizeof err)) {
        if (!strstr(err, "no server running") && !strstr(err, "error connecting")) {
            snprintf(why, n, "tmux list-windows: %s", err);
            g_ptr_array_free(hits, TRUE);
            return NULL;
        }
        out = g_strdup(""); /* no server: no window */
    }
    lines = g_strsplit(out, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        char *tab = strchr(*l, '\t');

        if (tab && tab[1]) /* unmarked windows end in a tab */
            g_ptr_array_add(hits, g_strdup(*l));
    }
    g_ptr_array_add(hits, NULL);
    g_strfreev(lines);
    g_free(out);
    return (char **)g_ptr_array_free(hits, FALSE);
}
