/* SPDX-License-Identifier: Apache-2.0 */
/* asked.h — the requester's side of the control plane: what this host has
 * asked other hosts to start or stop, and what became of it (SPEC section
 * 11: the content of hosts/<h>/spawns). Kept across restarts in
 * state_dir (spawns.jsonl), one line per change, the last line of a
 * requestId wins; at most AK_KEEP requests are kept (the oldest go).
 *
 * A request's state moves once: requested → ready | refused | failed |
 * stopped. An answer is believed only for a request this host sent, from
 * the host it was sent to, and only while the request is `requested`: a
 * second answer (a redelivery, a replay) changes nothing. A request with
 * no answer by its expiry (plus AK_GRACE_MS for the far host's start,
 * which may take the profile's ready_timeout) becomes `failed`.
 *
 * Each line of hosts/<h>/spawns (ak_render):
 *   {"requestId","request":"spawn"|"stop","profile","name","gid",
 *    "state","stateAt","detail"}
 * Not thread-safe: the owner calls it under its own lock. */
#ifndef FLEETFS_SPAWN_ASKED_H
#define FLEETFS_SPAWN_ASKED_H

#include <stddef.h>
#include <stdint.h>

#include "fleetfs/wire/control.h"

#define AK_KEEP 1000
/* the far host may take up to a profile's longest ready_timeout (5 min) */
#define AK_GRACE_MS (5 * 60 * 1000 + 30 * 1000)

typedef struct ak_book ak_book;

/* Opens (creating) the book at path and replays it. NULL and *err. */
ak_book *ak_open(const char *path, char **err);
void ak_close(ak_book *b);
/* req (a spawn or stop this host signed and is about to send) as
 * `requested`. 0, or -1 with errno. */
int ak_requested(ak_book *b, const ctl_env *req, int64_t now_ms);
/* An answer, already accepted (ctl_accept: signed by its host, to me).
 * 0 applied; -1 and why (not ours, from another host, already answered). */
int ak_answer(ak_book *b, const ctl_env *ans, int64_t now_ms, char *why, size_t n);
/* The grace ak_expire gives (AK_GRACE_MS until set; the option
 * spawn_grace). */
void ak_set_grace(ak_book *b, int64_t grace_ms);
/* Requests past their expiry plus the grace with no answer: failed.
 * How many changed. */
size_t ak_expire(ak_book *b, int64_t now_ms);
/* hosts/<host>/spawns: that host's requests, oldest first, one JSON line
 * each. g_free; *len set; "" when none. */
char *ak_render(const ak_book *b, const char *host, size_t *len);

#endif
