/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/hosts.h — hosts/: the requester's side of the control plane
 * (SPEC section 11).
 *
 * hosts/ lists every host presence knows (this one, the configured peers,
 * every lead heard); hosts/<h>/status says whether it is live, when it was
 * last heard, the profiles it offers and the agents running there.  A
 * write to hosts/<h>/spawn (one JSON object {profile, name, dir?, brief?})
 * or hosts/<h>/stop (a gid on h) becomes one signed request published to
 * fleet.control with h as key; the write returns once the broker confirmed
 * it into control.<h>.  What became of each request is the asked book
 * (spawn/asked.h, state_dir/spawns.jsonl), read as hosts/<h>/spawns: the
 * far host's `spawned` answers move it (mb_set_control_answers hands them
 * here once checked), and hs_tick fails those nobody answered.
 *
 * Threads: writes on FUSE threads, answers on the broker thread, hs_tick
 * on the notifier; fleet.hs_lock guards the book.  No lock is held while
 * a request is published. */
#ifndef FLEETFS_HOSTS_H
#define FLEETFS_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

#include "fleetfs/face/fleet.h"

/* Opens the asked book in state_dir and takes the control answers.
 * Before the broker thread runs.  -1 and *err. */
int hs_start(fleet *f, char **err);
/* After the broker thread has stopped. */
void hs_free(fleet *f);
/* h is a host of hosts/. */
bool hs_known(const fleet *f, const char *h);
/* hosts/, sorted; g_strfreev. */
char **hs_list(const fleet *f);
/* hosts/<h>/status and hosts/<h>/spawns. */
GString *hs_status(fleet *f, const char *h);
GString *hs_spawns(fleet *f, const char *h);
/* A write to hosts/<h>/spawn or stop: 0, or a positive errno (EINVAL bad
 * input, nothing published; EPERM no key; ENXIO no control queue takes
 * it; the send errors of SPEC section 5 otherwise). */
int hs_spawn(fleet *f, const char *h, const char *buf, size_t len);
int hs_stop(fleet *f, const char *h, const char *buf, size_t len);
/* Once a second (the notifier): unanswered requests past their time. */
void hs_tick(fleet *f);

#endif
