/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux_int.h — inside herdr/, not for other users: the one way
 * fleetfs runs tmux (tmux_run.c), used by the injector's tmux backend
 * (tmux.c), what it reads off a pane (tmux_look.c) and the spawn
 * primitives (tmux_spawn.c); and what tmux_look.c reads, used by tmux.c
 * alone.  tmux.c -> tmux_look.c -> tmux_run.c: no file calls back. */
#ifndef FLEETFS_HERDR_TMUX_INT_H
#define FLEETFS_HERDR_TMUX_INT_H

#include <stdbool.h>
#include <stddef.h>

#define TMUX_TIMEOUT_MS 5000

/* Runs tmux ARGS (NULL-terminated, without "tmux"; an argv, never a
 * shell), with input on its stdin when not NULL (load-buffer -); its
 * stdout in *out (g_free) when out is not NULL and it succeeded. false
 * with why on failure, including a tmux that did not finish within
 * TMUX_TIMEOUT_MS (then killed). TMUX_TMPDIR picks the server. */
bool tb_run(const char *const *args, const char *input, char **out, char *why, size_t n);

/* herdr/tmux_look.c: what is read off a pane around typing.
 * tl_person: 1 when a client whose current pane is PANE read a key from
 * its terminal less than quiet_ms ago (*ago_s: how long ago), 0 when not,
 * -1 when tmux cannot tell.  tl_draft: 1 when text follows the input
 * line's prompt marker before the cursor, 0 when none does, -1 when no
 * marker is seen.  tl_waits: 1 when TYPED still waits unsubmitted at the
 * cursor, 0 when not seen there, -1 when tmux cannot tell.
 * tl_carriage_return: one literal carriage return into PANE. */
int tl_person(const char *pane, int quiet_ms, int *ago_s);
int tl_draft(const char *pane);
int tl_waits(const char *pane, const char *typed);
bool tl_carriage_return(const char *pane, char *why, size_t n);

#endif
