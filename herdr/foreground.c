/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/foreground.c — what runs in a terminal's foreground (design in
 * foreground.h). */
#include "herdr/foreground.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>

#include "fleetfs/os/os.h"

/* How deep a chain of waiting shells and launchers is followed. */
#define FG_MAX_DEPTH 8

/* Shells, and what relays typed text to one or to a password prompt
 * (terminal multiplexers, sudo, ssh): never typed into. */
static const char *const shells[] = {
    "sh",    "ash",     "bash",        "dash",       "zsh",    "fish",   "ksh",  "ksh93", "mksh",
    "pdksh", "oksh",    "lksh",        "yash",       "posh",   "tcsh",   "csh",  "rc",    "es",
    "nu",    "nushell", "pwsh",        "powershell", "xonsh",  "elvish", "ion",  "osh",   "ysh",
    "oil",   "murex",   "busybox",     "toybox",     "screen", "tmux",   "sudo", "su",    "doas",
    "login", "ssh",     "mosh-client", "script",     NULL,
};

static const char *const interpreters[] = {
    "node", "nodejs", "bun", "deno", "ruby", "perl", "php", "lua", "luajit", NULL,
};

static bool in_list(const char *name, const char *const *list)
{
    for (; list && *list; list++)
        if (!strcmp(name, *list))
            return true;
    return false;
}

/* "-bash" and "/usr/bin/bash" are bash. */
static const char *bare(const char *name, char buf[FG_NAME_MAX])
{
    while (*name == '-')
        name++;
    const char *slash = strrchr(name, '/');
    g_strlcpy(buf, slash ? slash + 1 : name, FG_NAME_MAX);
    return buf;
}

bool fg_is_shell(const char *name)
{
    char b[FG_NAME_MAX];
    return in_list(bare(name, b), shells);
}

bool fg_is_interpreter(const char *name)
{
    char b[FG_NAME_MAX];
    const char *n = bare(name, b);
    if (in_list(n, interpreters))
        return true;
    /* python, python3, python3.12, pypy3, ipython3 */
    static const char *const families[] = {"python", "pypy", "ipython", NULL};
    for (const char *const *f = families; *f; f++)
        if (g_str_has_prefix(n, *f)) {
            const char *p = n + strlen(*f);
            while (g_ascii_isdigit(*p) || *p == '.')
                p++;
            if (!*p)
                return true;
        }
    return false;
}

bool fg_command_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= FG_NAME_MAX || fg_is_shell(name))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!g_ascii_isalnum(name[i]) && !strchr("._+-", name[i]))
            return false;
    return true;
}

/* tmux 3.x parse_window_name, in our words: the first word, without a
 * leading "exec ", spaces or '-', and only the last component of an
 * absolute path. */
void fg_tmux_name(const char *argv0, char out[FG_NAME_MAX])
{
    char buf[256];
    char *s = buf, *sp;

    g_strlcpy(buf, argv0 ? argv0 : "", sizeof buf);
    if (*s == '"')
        s++;
    s[strcspn(s, "\"")] = '\0';
    if (g_str_has_prefix(s, "exec "))
        s += 5;
    while (*s == ' ' || *s == '-')
        s++;
    if ((sp = strchr(s, ' ')))
        *sp = '\0';
    if (*s == '/' && strrchr(s, '/')[1])
        s = strrchr(s, '/') + 1;
    g_strlcpy(out, s, FG_NAME_MAX);
}

/* The program an interpreter runs: the first argument that is not an
 * option ("-m mod" gives mod; deno/bun's "run" and "x" are skipped), as a
 * bare name without .js/.py/... ; "" for a prompt (no program, -c, -e). */
static void script_of(char *const *argv, char out[FG_NAME_MAX])
{
    static const char *const takes_value[] = {
        "-r",         "--require", "--import", "--loader", "--experimental-loader",
        "-W",         "-X",        "--title",  "-I",       "--inspect-port",
        "--env-file", NULL,
    };
    static const char *const subcommands[] = {"run", "x", "exec", NULL};
    static const char *const exts[] = {".js", ".mjs", ".cjs", ".ts",  ".py",
                                       ".rb", ".pl",  ".php", ".lua", NULL};

    out[0] = '\0';
    for (size_t i = 1; argv[0] && argv[i]; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c") || !strcmp(a, "-e") || !strcmp(a, "--eval") || !strcmp(a, "-p") ||
            !strcmp(a, "--print") || !strcmp(a, "-i") || !strcmp(a, "--interactive"))
            return;
        if (!strcmp(a, "-m")) {
            if (argv[i + 1])
                bare(argv[i + 1], out);
            return;
        }
        if (in_list(a, takes_value)) {
            if (argv[i + 1])
                i++;
            continue;
        }
        if (a[0] == '-')
            continue;
        if (in_list(a, subcommands) && argv[i + 1])
            continue;
        bare(a, out);
        for (const char *const *e = exts; *e; e++)
            if (g_str_has_suffix(out, *e) && strlen(out) > strlen(*e)) {
                out[strlen(out) - strlen(*e)] = '\0';
                break;
            }
        return;
    }
}

static const fg_proc *find(const fg_proc *procs, size_t n, int pid)
{
    for (size_t i = 0; i < n; i++)
        if (procs[i].pid == pid)
            return &procs[i];
    return NULL;
}

/* The one child of p in the group, or NULL (none, or several). */
static const fg_proc *only_child(const fg_proc *procs, size_t n, const fg_proc *p)
{
    const fg_proc *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (procs[i].ppid == p->pid && procs[i].pid != p->pid) {
            if (c)
                return NULL;
            c = &procs[i];
        }
    return c;
}

/* Judge one name (no /proc): interpreters cannot be looked into. */
static fg_verdict judge_name(const char *name, const char *const *allow)
{
    fg_verdict v = {.kind = FG_UNLISTED};
    char b[FG_NAME_MAX];
    g_strlcpy(v.name, bare(name, b), sizeof v.name);
    if (!v.name[0])
        v.kind = FG_NOTHING;
    else if (fg_is_shell(v.name))
        v.kind = FG_SHELL;
    else if (fg_is_interpreter(v.name) && !in_list(v.name, allow))
        v.kind = FG_INTERPRETER;
    else if (in_list(v.name, allow))
        v.kind = FG_AGENT;
    return v;
}

fg_verdict fg_judge(const char *tmux_cmd, const fg_proc *procs, size_t n, int leader,
                    const char *const *allow)
{
    const fg_proc *p = n ? find(procs, n, leader) : NULL;
    fg_verdict v = {.kind = FG_NOTHING};
    char tname[FG_NAME_MAX], via[FG_NAME_MAX] = "";

    if (!tmux_cmd)
        tmux_cmd = "";
    if (!p)
        return judge_name(tmux_cmd, allow);
    fg_tmux_name(p->argv[0] ? p->argv[0] : "", tname);
    if (tmux_cmd[0] && strcmp(tname, tmux_cmd) != 0) {
        v.kind = FG_UNSURE;
        g_strlcpy(v.name, tmux_cmd, sizeof v.name);
        g_strlcpy(v.other, tname[0] ? tname : "nothing", sizeof v.other);
        return v;
    }
    for (int depth = 0; p && depth < FG_MAX_DEPTH; depth++) {
        char name[FG_NAME_MAX], script[FG_NAME_MAX] = "";
        const fg_proc *child = only_child(procs, n, p);
        bool shell, interp;

        fg_tmux_name(p->argv[0] ? p->argv[0] : "", tname);
        bare(tname, name);
        if (!name[0]) {
            v.kind = FG_NOTHING;
            return v;
        }
        /* a shell started under another name (exec -a) is still a shell */
        shell = fg_is_shell(name) || (p->comm[0] && fg_is_shell(p->comm));
        interp = fg_is_interpreter(name);
        if (interp)
            script_of(p->argv, script);
        g_strlcpy(v.name,
                  script[0]                     ? script
                  : shell && !fg_is_shell(name) ? p->comm
                                                : name,
                  sizeof v.name);
        g_strlcpy(v.via, via, sizeof v.via);
        /* whoever is blocked in wait(2) for its only child in the
         * foreground reads nothing from the terminal: the child does (a
         * wrapper script running the agent; an agent running a shell) */
        /* so does bubblewrap, the spawn sandbox (fleetfs/spawn/sandbox.h),
         * whatever it sleeps in: looked through to the agent it runs */
        if (child && (!strcmp(p->wchan, "do_wait") || !strcmp(name, "bwrap"))) {
            g_strlcpy(via, v.name, sizeof via);
            p = child;
            continue;
        }
        if (shell)
            v.kind = FG_SHELL;
        else if (interp && !script[0])
            v.kind = FG_INTERPRETER;
        else if (in_list(script, allow) || in_list(name, allow))
            v.kind = FG_AGENT;
        else
            v.kind = FG_UNLISTED;
        return v;
    }
    v.kind = FG_UNLISTED; /* deeper than FG_MAX_DEPTH: not worth guessing */
    return v;
}

void fg_explain(const fg_verdict *v, const char *pane, char *why, size_t n)
{
    char via[FG_NAME_MAX + 20] = "";
    if (v->via[0])
        snprintf(via, sizeof via, " (under %s)", v->via);
    switch (v->kind) {
    case FG_AGENT:
        snprintf(why, n, "ready: %s runs %s%s", pane, v->name, via);
        break;
    case FG_SHELL:
        snprintf(why, n,
                 "stalled: %s runs %s%s, not an agent: start the agent there, or list its "
                 "command in inject_commands",
                 pane, v->name, via);
        break;
    case FG_INTERPRETER:
        snprintf(why, n,
                 "stalled: %s runs %s%s with no program (an interpreter's prompt), not an "
                 "agent: start the agent there, or list its command in inject_commands",
                 pane, v->name, via);
        break;
    case FG_UNLISTED:
        snprintf(why, n,
                 "stalled: %s runs %s%s, which is not in inject_commands: start the agent "
                 "there, or add %s to inject_commands if it is one",
                 pane, v->name, via, v->name);
        break;
    case FG_NOTHING:
        snprintf(why, n, "stalled: %s runs nothing (no foreground program): start the agent there",
                 pane);
        break;
    case FG_UNSURE:
        snprintf(why, n,
                 "stalled: %s: tmux says it runs %s but " OS_PROC_TABLE
                 " shows %s; nothing is typed until they agree (is the tmux server in another "
                 "pid namespace?)",
                 pane, v->name, v->other);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* the processes (fleetfs/os/os.h: /proc on Linux, sysctl on macOS)    */

int fg_read(int pane_pid, const char *tty, fg_proc **procs, size_t *n, int *leader)
{
    os_proc_facts pane, f;
    GArray *a;
    int *pids;
    size_t np;

    *procs = NULL;
    *n = 0;
    if (pane_pid <= 0 || os_proc_facts_of(pane_pid, &pane) < 0 || pane.tpgid <= 0 || pane.tty == 0)
        return -1;
    if (tty && *tty) {
        struct stat st;
        if (stat(tty, &st) < 0 || st.st_rdev != pane.tty)
            return -1; /* not the pane's terminal: another pid namespace */
    }
    if (!(pids = os_proc_list(&np)))
        return -1;
    a = g_array_new(FALSE, TRUE, sizeof(fg_proc));
    for (size_t i = 0; i < np; i++) {
        if (os_proc_facts_of(pids[i], &f) < 0 || f.pgrp != pane.tpgid ||
            f.session != pane.session || f.tty != pane.tty)
            continue;
        fg_proc p = {.pid = pids[i], .ppid = f.ppid, .pgrp = f.pgrp};
        p.argv = os_proc_argv(pids[i]);
        /* the judge's one wait channel: "do_wait", blocked in wait(2) */
        if (os_proc_waits_for_child(pids[i]))
            g_strlcpy(p.wchan, "do_wait", sizeof p.wchan);
        os_proc_comm(pids[i], p.comm, sizeof p.comm);
        g_array_append_val(a, p);
    }
    g_free(pids);
    *leader = pane.tpgid;
    *n = a->len;
    *procs = (fg_proc *)g_array_free(a, FALSE);
    return 0;
}

void fg_free(fg_proc *procs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g_strfreev(procs[i].argv);
    g_free(procs);
}
