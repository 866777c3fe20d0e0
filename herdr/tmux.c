/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux.c — the injector's tmux backend, for hosts without herdr and
 * for end-to-end tests with a real terminal.
 *
 * Target: inject_target as a tmux target (e.g. "work:0.1" or "%3"), else
 * the one pane whose title is the coord_id (printf '\033]2;beta\033\\' in
 * the pane, or `tmux select-pane -T beta`).  tmux knows nothing of agents,
 * so the gate is: the pane exists, is alive, is not in copy mode, and what
 * runs in its foreground is an agent on the allow-list (inject_commands),
 * never a shell (herdr/foreground.h) — checked when deciding, right before
 * typing, and once more between loading the paste buffer and pasting it.
 * Typing is a bracketed paste (the program sees one paste, not
 * keystrokes), then, after inject_settle, one literal carriage return
 * (tmux_look.c); "confirmed" comes only from the agent's own prompt hook
 * (fleetfs/inject/witness.h).  The text reaches
 * tmux on the stdin of `load-buffer -`, never through a file (another
 * process could read or swap a file between write and load).  tmux runs
 * with an argv, never through a shell; TMUX_TMPDIR picks the server.
 *
 * A title is no proof of identity: any program printing to any pane can
 * set its title with an escape sequence (printf '\033]2;beta\033\\'), so a
 * pane found by its title is warned about in the log, once per pane, with
 * the pane id to pin instead (-o inject_target=%N).
 *
 * Each tmux command gets TMUX_TIMEOUT_MS and is killed after it
 * (tmux_run.c): a stopped or wedged tmux server must not hold the injector
 * (and with it the unmount).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib.h>

#include "fleetfs/base/log.h"
#include "herdr/backend.h"
#include "herdr/foreground.h"
#include "herdr/tmux_int.h"

/* The backend's own state: its copy of the config, and the pane last
 * warned about (a pane found by its title is warned about once per pane). */
typedef struct {
    ib_config *cfg;
    char warned[128];
} tb_priv;

#define PRIV(b) ((tb_priv *)(b)->priv)
#define CFG(b) ((const ib_config *)PRIV(b)->cfg)

static bool tmux(const char *const *args, char **out, char *why, size_t n)
{
    return tb_run(args, NULL, out, why, n);
}

static bool tmux_in(const char *const *args, const char *input, char *why, size_t n)
{
    return tb_run(args, input, NULL, why, n);
}

/* Lists the panes as "#{pane_id}\t<fmt>" and counts those whose <fmt>
 * value (or, with id_too, whose pane id) is want; the first goes into
 * t->id.  -1 when there is no tmux server (err says why). */
static int match_panes(const char *fmt, const char *want, bool id_too, ib_target *t, char *err,
                       size_t en)
{
    char *format = g_strdup_printf("#{pane_id}\t%s", fmt);
    const char *args[] = {"list-panes", "-a", "-F", format, NULL};
    char *out = NULL;
    int hits = 0;
    bool ok = tmux(args, &out, err, en);
    g_free(format);
    if (!ok)
        return -1;
    gchar **lines = g_strsplit(out, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        char *tab = strchr(*l, '\t');
        if (!tab)
            continue;
        *tab = '\0';
        if (strcmp(tab + 1, want) != 0 && (!id_too || strcmp(*l, want) != 0))
            continue;
        if (!hits++)
            g_strlcpy(t->id, *l, sizeof t->id);
    }
    g_strfreev(lines);
    g_free(out);
    return hits;
}

/* inject_target names the pane (tmux would resolve a target that names
 * nothing to some other pane, or to nothing, silently: we look it up
 * ourselves and never guess); else the one pane titled coord_id. */
static ib_verdict resolve(inj_backend *b, ib_target *t, char *why, size_t n)
{
    const char *me = CFG(b)->coord_id, *want = CFG(b)->inject_target;
    char err[256];
    int hits = want ? match_panes("#{session_name}:#{window_index}.#{pane_index}", want, true, t,
                                  err, sizeof err)
                    : match_panes("#{pane_title}", me, false, t, err, sizeof err);

    if (hits < 0) {
        snprintf(why, n, "waiting: no tmux server to type into (%s)", err);
        return IB_WAIT;
    }
    if (hits == 1) {
        if (want)
            snprintf(t->name, sizeof t->name, "tmux pane %s (%s)", want, t->id);
        else
            snprintf(t->name, sizeof t->name, "tmux pane titled %s (%s)", me, t->id);
        if (!want && strcmp(PRIV(b)->warned, t->id) != 0) {
            g_strlcpy(PRIV(b)->warned, t->id, sizeof PRIV(b)->warned);
            log_warn("inject: typing into tmux pane %s because its title is %s; any program "
                     "writing to any pane can set a title with an escape sequence and take "
                     "this lead's messages: pin the pane with -o inject_target=%s",
                     t->id, me, t->id);
        }
        return IB_OK;
    }
    if (want)
        snprintf(why, n,
                 "stalled: tmux target '%s' names no pane (use a pane id like %%3 "
                 "or session:window.pane); fix -o inject_target",
                 want);
    else if (hits == 0)
        snprintf(why, n,
                 "stalled: no tmux pane titled %s; set its title (tmux select-pane -T "
                 "%s) or -o inject_target",
                 me, me);
    else
        snprintf(why, n, "stalled: %d tmux panes titled %s; rename one or set -o inject_target",
                 hits, me);
    return IB_STALL;
}

/* The pane for people, by how it was found: "tmux pane %3 titled beta". */
static void describe(inj_backend *b, const ib_target *t, char *out, size_t n)
{
    if (CFG(b)->inject_target)
        snprintf(out, n, "tmux pane %s (inject_target %s)", t->id, CFG(b)->inject_target);
    else
        snprintf(out, n, "tmux pane %s titled %s", t->id, CFG(b)->coord_id);
}

/* What runs in the pane's foreground: IB_OK for an agent on the
 * allow-list, else IB_STALL with the words (herdr/foreground.h). */
static ib_verdict agent_runs(inj_backend *b, const ib_target *t, const char *pid_s, const char *tty,
                             const char *cmd, char *why, size_t n)
{
    fg_proc *procs = NULL;
    size_t np = 0;
    int leader = 0;
    char pane[200];
    fg_verdict v;

    if (fg_read(atoi(pid_s), tty, &procs, &np, &leader) < 0)
        np = 0; /* judge tmux's name alone */
    v = fg_judge(cmd, procs, np, leader, CFG(b)->inject_commands);
    fg_free(procs, np);
    if (v.kind == FG_AGENT)
        return IB_OK;
    describe(b, t, pane, sizeof pane);
    fg_explain(&v, pane, why, n);
    return IB_STALL;
}

/* One look at the pane: alive, not in a mode, an agent in front. */
static ib_verdict look(inj_backend *b, const ib_target *t, char *why, size_t n)
{
    const char *args[] = {"display-message",
                          "-p",
                          "-t",
                          t->id,
                          "#{pane_dead}\t#{pane_in_mode}\t#{pane_pid}\t#{pane_tty}\t"
                          "#{pane_current_command}",
                          NULL};
    char err[256], *out = NULL;
    gchar **f;
    ib_verdict v = IB_WAIT;

    if (!tmux(args, &out, err, sizeof err)) {
        snprintf(why, n, "waiting: %s is gone (%s)", t->name, err);
        return IB_WAIT;
    }
    g_strchomp(out);
    f = g_strsplit(out, "\t", 5);
    if (g_strv_length(f) != 5)
        snprintf(why, n, "waiting: %s is gone", t->name);
    else if (!strcmp(f[0], "1")) {
        char pane[200];
        describe(b, t, pane, sizeof pane);
        snprintf(why, n,
                 "stalled: %s runs nothing (its program exited; the pane stays open): start "
                 "the agent there",
                 pane);
        v = IB_STALL;
    } else if (strcmp(f[1], "0") != 0)
        snprintf(why, n, "waiting: %s is in copy mode", t->name);
    else if (strcmp(f[0], "0") != 0)
        snprintf(why, n, "waiting: %s is gone", t->name);
    else
        v = agent_runs(b, t, f[2], f[3], f[4], why, n);
    g_strfreev(f);
    g_free(out);
    return v;
}

/* Never into a person's way: keys from a client on this pane less than
 * quiet_ms ago, or text in its input line fleetfs did not type, hold it
 * (herdr/tmux_look.c). */
static ib_verdict person(inj_backend *b, const ib_target *t, char *why, size_t n)
{
    int ago = 0, quiet_s = (CFG(b)->quiet_ms + 999) / 1000;
    if (tl_person(t->id, CFG(b)->quiet_ms, &ago) == 1) {
        snprintf(why, n,
                 "waiting: a person is typing on %s (keys in %s %d s ago); typing once it has "
                 "been quiet for %d s",
                 g_get_host_name(), t->name, ago, quiet_s);
        return IB_WAIT;
    }
    if (tl_draft(t->id) == 1) {
        snprintf(why, n,
                 "waiting: a person's draft is in the input line of %s on %s (text fleetfs did "
                 "not type); typing once it is submitted or cleared",
                 t->name, g_get_host_name());
        return IB_WAIT;
    }
    return IB_OK;
}

static ib_verdict status(inj_backend *b, const ib_target *t, hd_status *st, char *why, size_t n)
{
    ib_verdict v = look(b, t, why, n);
    *st = HD_IDLE;
    return v == IB_OK ? person(b, t, why, n) : v;
}

/* Load, look, paste; let the paste settle (settle_ms: a TUI that still
 * takes its input as a paste turns a carriage return into a newline);
 * look again; then one literal carriage return. */
static ib_typed type(inj_backend *b, const ib_target *t, const char *text, char *why, size_t n)
{
    char buf[64], err[256], words[512];

    snprintf(buf, sizeof buf, "fleetfs-%ld", (long)getpid());
    const char *load[] = {"load-buffer", "-b", buf, "-", NULL};
    const char *paste[] = {"paste-buffer", "-p", "-d", "-b", buf, "-t", t->id, NULL};
    if (!tmux_in(load, text, err, sizeof err)) {
        snprintf(why, n, "tmux refused the paste into %s: %s", t->name, err);
        return IT_REFUSED;
    }
    if (look(b, t, words, sizeof words) != IB_OK) {
        /* the last moment: the agent may have exited since the gate */
        const char *delete[] = {"delete-buffer", "-b", buf, NULL};
        tmux(delete, NULL, err, sizeof err);
        snprintf(why, n, "%s", strchr(words, ' ') ? strchr(words, ' ') + 1 : words);
        return IT_REFUSED;
    }
    if (!tmux(paste, NULL, err, sizeof err)) {
        snprintf(why, n, "tmux refused the paste into %s: %s", t->name, err);
        return IT_REFUSED;
    }
    g_usleep((gulong)CFG(b)->settle_ms * 1000);
    if (look(b, t, words, sizeof words) != IB_OK) {
        /* the agent left while the paste went in: whatever now reads the
         * terminal (a shell) must not get a carriage return that submits
         * the text */
        snprintf(why, n,
                 "pasted into %s, but it stopped running an agent before Enter (%s); Enter "
                 "was not pressed and the text may sit unsubmitted in the pane",
                 t->name, strchr(words, ' ') ? strchr(words, ' ') + 1 : words);
        return IT_UNKNOWN;
    }
    if (!tl_carriage_return(t->id, err, sizeof err))
        log_warn("inject: pasted into %s but its carriage return failed: %s", t->name, err);
    return IT_TYPED;
}

static int waits(inj_backend *b, const ib_target *t, const char *text)
{
    (void)b;
    return tl_waits(t->id, text);
}

static bool submit(inj_backend *b, const ib_target *t, char *why, size_t n)
{
    char words[512];
    /* only into the agent still there: never a carriage return to a shell */
    if (look(b, t, words, sizeof words) != IB_OK) {
        snprintf(why, n, "%s", strchr(words, ' ') ? strchr(words, ' ') + 1 : words);
        return false;
    }
    return tl_carriage_return(t->id, why, n);
}

static void tb_free(inj_backend *b)
{
    ib_config_free(PRIV(b)->cfg);
    g_free(b->priv);
    g_free(b);
}

inj_backend *inj_backend_tmux(const ib_config *cfg)
{
    inj_backend *b = g_new0(inj_backend, 1);
    b->name = "tmux";
    b->has_status = false;
    b->resolve = resolve;
    b->status = status;
    b->type = type;
    b->free = tb_free;
    b->waits = waits;
    b->submit = submit;
    b->priv = g_new0(tb_priv, 1);
    PRIV(b)->cfg = ib_config_copy(cfg);
    return b;
}
