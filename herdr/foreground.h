/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/foreground.h — what runs in a terminal's foreground, and may a
 * message be typed into it (issue 12: never type a message into a shell).
 *
 * A message typed into a shell prompt is run as a command line; typed
 * into an interpreter's prompt (python3, node with no program) it is run
 * as code.  tmux knows no agents, so before typing the tmux backend asks
 * what the pane runs, two ways that must agree:
 *
 *   - tmux's #{pane_current_command}: the first word of the command line
 *     of the terminal's foreground process group leader (what users see
 *     with `tmux display -p -t %3 '#{pane_current_command}'`);
 *   - /proc: from #{pane_pid}, the terminal's foreground process group
 *     (tpgid in /proc/PID/stat) and its processes' command lines, so that
 *       . a program run by an interpreter is known by its script
 *         ("python3 /usr/bin/aider" is aider, "node /usr/bin/gemini" is
 *         gemini; an interpreter with no script is a prompt, never typed into),
 *       . a shell or launcher that only waits for one child (blocked in
 *         wait(2): /proc/PID/wchan is do_wait) is looked through to that
 *         child, e.g. a wrapper script that runs `claude` without exec.
 *
 * The verdict: an agent when the program's name is on the allow-list
 * (option inject_commands); a shell (by its name or by the kernel's name
 * of the process, so `exec -a claude bash` is still bash: never, even
 * when listed), an
 * interpreter's prompt, nothing, or any other program: not typed into.
 * When /proc cannot be read (another pid namespace, hidepid) only tmux's
 * name is judged.  Pure functions apart from fg_read.
 *
 * These rules are the same on every system, here and only here; what
 * differs is where fg_read gets the facts (fleetfs/os/os.h): /proc on
 * Linux (the portable build too), sysctl KERN_PROC and KERN_PROCARGS2 on
 * macOS (compiled for macOS, not yet run on a Mac).  macOS names no wait
 * channel, so there a waiting shell or launcher is never looked through:
 * it is judged itself, a shell, and never typed into (an agent started by
 * a wrapper script that waits for it stalls, saying so, until it is
 * started with exec or directly).
 */
#ifndef FLEETFS_HERDR_FOREGROUND_H
#define FLEETFS_HERDR_FOREGROUND_H

#include <stdbool.h>
#include <stddef.h>

/* Today's terminal coding agents, as their process names appear. */
#define FG_DEFAULT_COMMANDS \
    "claude:codex:aider:gemini:qwen:opencode:goose:cursor-agent:amp:crush:copilot:droid:auggie"

#define FG_NAME_MAX 64

typedef struct {
    int pid, ppid, pgrp;
    char **argv;    /* NULL-terminated (g_strfreev); empty for a zombie */
    char comm[32];  /* the kernel's name of it (/proc/PID/comm), "" unknown */
    char wchan[48]; /* where it sleeps ("do_wait": waiting for a child), "" unknown */
} fg_proc;

typedef enum {
    FG_AGENT,       /* on the allow-list: may be typed into */
    FG_SHELL,       /* a shell: never */
    FG_INTERPRETER, /* an interpreter with no program: its prompt runs what is typed */
    FG_UNLISTED,    /* some other program */
    FG_NOTHING,     /* no foreground program */
    FG_UNSURE,      /* tmux and /proc disagree */
} fg_kind;

typedef struct {
    fg_kind kind;
    char name[FG_NAME_MAX];  /* the program judged: "bash", "fake-agent", "vim" */
    char via[FG_NAME_MAX];   /* the shell or launcher it was found under, or "" */
    char other[FG_NAME_MAX]; /* FG_UNSURE: what /proc shows */
} fg_verdict;

/* sh, bash, dash, zsh, fish, ksh, mksh, tcsh, csh, nu, pwsh, xonsh,
 * elvish, ... (a leading '-' of a login shell and a path are ignored). */
bool fg_is_shell(const char *name);
/* node, python3.12, ruby, ...: programs whose first argument is the program. */
bool fg_is_interpreter(const char *name);
/* A name inject_commands may hold: 1..63 bytes of [A-Za-z0-9._+-], not a shell. */
bool fg_command_ok(const char *name);

/* The name tmux's #{pane_current_command} gives a command line starting
 * with argv0 (first word, leading '-' dropped, basename of an absolute path). */
void fg_tmux_name(const char *argv0, char out[FG_NAME_MAX]);

/* Judge a pane.  tmux_cmd: #{pane_current_command} ("" when unknown).
 * procs/n: the foreground process group (n == 0: /proc unusable, judge
 * tmux_cmd alone); leader: its id.  allow: NULL-terminated, may be NULL. */
fg_verdict fg_judge(const char *tmux_cmd, const fg_proc *procs, size_t n, int leader,
                    const char *const *allow);

/* The injector's words for a verdict other than FG_AGENT about pane
 * ("tmux pane %3 titled beta"): "stalled: ... runs bash, not an agent: ..." */
void fg_explain(const fg_verdict *v, const char *pane, char *why, size_t n);

/* Reads the foreground process group of the terminal whose session leader
 * is pane_pid, after checking that its controlling terminal is tty (the
 * pane's device, e.g. /dev/pts/3; NULL skips the check).  0 and *procs
 * (fg_free) / *n / *leader; -1 when /proc cannot tell (gone, another pid
 * namespace, no permission). */
int fg_read(int pane_pid, const char *tty, fg_proc **procs, size_t *n, int *leader);
void fg_free(fg_proc *procs, size_t n);

#endif
