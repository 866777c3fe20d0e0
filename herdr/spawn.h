/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/spawn.h — starting an agent in a new pane, and closing it again
 * (SPEC section 11), for the two terminal backends.
 *
 * What to start comes from the local profile (fleetfs/config/profile.h);
 * the only things a remote request contributes are the validated name and
 * the resolved directory (fleetfs/spawn/check.h). Both functions either
 * end with an agent ready in a pane whose id they return, or fail with
 * the reason and leave no pane behind: a pane they made is closed on every
 * failure path, and if even that fails the reason says which pane may
 * remain, so that nobody is left with a pane no one knows of.
 *
 * herdr: pane.split (with a directory: it is the only call that takes a
 * cwd) or tab.create (without), then agent.start, which herdr answers once
 * it sees the agent ready (HERDR-PROTOCOL.md).
 *
 * tmux: a new window (unfocused, -d) running argv directly — never through
 * a shell: tmux runs a one-word command with `sh -c`, so a one-word argv is
 * run through /usr/bin/env instead — its pane titled name and the window
 * marked with a tmux user option @fleetfs_spawn = tag. Ready when the
 * pane's foreground program is the profile's program (herdr/foreground.h,
 * the injector's own judgement) and the pane has shown nothing new for
 * quiet_ms. Closing checks the mark first: only a window this fleetfs made
 * (with this tag) is ever killed. */
#ifndef FLEETFS_HERDR_SPAWN_H
#define FLEETFS_HERDR_SPAWN_H

#include <stdbool.h>
#include <stddef.h>

#include "herdr/client.h"

typedef struct {
    const char *name; /* validated agent name: herdr agent name, tmux pane title */
    const char *dir;  /* resolved directory, or NULL for the backend's default */
    int ready_ms;     /* how long the agent may take to be ready */
    /* herdr */
    const char *kind;
    const char *const *args; /* NULL-terminated or NULL */
    /* tmux */
    const char *const *argv; /* argv[0] absolute (profile.c) */
    const char *program;     /* what the foreground must be (fg_judge's name) */
    const char *tag;         /* the window's mark, e.g. the gid */
    const char *session;     /* tmux target session, NULL: tmux's current one */
    int quiet_ms;            /* tmux: ready after this long without output (0: 500) */
    /* Called once the pane exists, before the wait for the agent (may be
     * NULL): the caller records it, so that a fleetfs killed during the
     * wait finds the pane again after its restart. window is "" for herdr. */
    void (*made)(const char *pane, const char *window, void *arg);
    void *made_arg;
} sp_request;

typedef struct {
    char pane_id[HD_ID_MAX];   /* herdr "w1:p3", tmux "%7" */
    char window_id[HD_ID_MAX]; /* tmux "@4"; "" for herdr */
    char why[512];             /* on failure: what happened, and what was cleaned up */
} sp_result;

/* 0: ready in out->pane_id. -1: out->why. call_ms bounds each ordinary
 * call (the split, the close). */
int sp_herdr_start(hd_client *c, const sp_request *rq, int call_ms, sp_result *out);
/* 0 closed (or already gone), -1 and why. */
int sp_herdr_close(hd_client *c, const char *pane_id, int call_ms, char *why, size_t n);

int sp_tmux_start(const sp_request *rq, sp_result *out);
/* Kills window_id only if its @fleetfs_spawn mark is tag. 0 closed or
 * already gone; -1 and why (not ours, tmux failed). */
int sp_tmux_close(const char *window_id, const char *tag, char *why, size_t n);

/* Every window of the tmux server that carries a @fleetfs_spawn mark, as
 * "<window_id>\t<tag>" lines (g_strfreev; empty when there is none or no
 * server), so that a fleetfs restarted in the middle of a start can find
 * the windows it made and close those it no longer knows of. NULL and why
 * when tmux fails otherwise. */
char **sp_tmux_marked(char *why, size_t n);

#endif
