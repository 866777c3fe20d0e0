/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux_int.h — the one way fleetfs runs tmux, shared by the
 * injector's tmux backend (tmux.c) and the spawn primitives
 * (tmux_spawn.c); not for other users. */
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

#endif
