/* SPDX-License-Identifier: Apache-2.0 */
/* ledger.h — what this host has started for remote leads, kept across
 * restarts (state_dir/spawned.jsonl): the far host's own record of its
 * spawned agents (SPEC section 11).
 *
 * Why a file: "stop closes only panes this fleetfs made", `max` counts the
 * agents of a profile that run, and a fleetfs killed in the middle of a
 * start must, once restarted, end that request as failed and close the
 * pane it was making ("never a pane nobody knows of"). All three need to
 * know, after a restart, what was started and where. So a start is
 * written as `starting` before the pane is made (fsync'd: it must outlive
 * a power cut as much as the pane does), `ready` with the pane once it is,
 * and `failed` or `stopped` when it ends; the last line of a gid wins.
 *
 *   {"gid":"w1@beta","name":"w1","profile":"worker","requestId":"<32 hex>",
 *    "requester":"alpha","backend":"tmux","pane":"%3","window":"@2",
 *    "state":"starting"|"ready"|"failed"|"stopped","at":"<RFC 3339>"}
 *
 * Lines that do not parse are skipped on load (and said in the log).
 * Not thread-safe: the owner calls it under its own lock. */
#ifndef FLEETFS_SPAWN_LEDGER_H
#define FLEETFS_SPAWN_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/wire/control.h"

typedef enum { LG_STARTING, LG_READY, LG_FAILED, LG_STOPPED } lg_state;

typedef struct {
    char gid[CTL_GID_MAX + 1];
    char name[CTL_NAME_MAX + 1];
    char profile[CTL_NAME_MAX + 1];
    char request_id[ENV_ID_LEN + 1];
    char requester[64];
    char backend[8]; /* "herdr" | "tmux" */
    char pane[64];   /* "" until known */
    char window[64]; /* tmux only */
    lg_state state;
    int64_t at_ms;
} lg_entry;

typedef struct lg_ledger lg_ledger;

/* Opens (creating) the ledger at path and replays it. NULL and *err. */
lg_ledger *lg_open(const char *path, char **err);
void lg_close(lg_ledger *l);
/* Appends e (fsync'd) and makes it the gid's state. 0, or -1 with errno
 * (then nothing changed in memory either). */
int lg_record(lg_ledger *l, const lg_entry *e);
/* The live entry of gid (starting or ready), or NULL. */
const lg_entry *lg_find(const lg_ledger *l, const char *gid);
/* Live entries of profile (starting and ready both count against max). */
unsigned lg_running(const lg_ledger *l, const char *profile);
/* Live entries, in the order first recorded; *n of them. The array is
 * the ledger's (valid until the next lg_record). */
const lg_entry *const *lg_live(const lg_ledger *l, size_t *n);
const char *lg_state_name(lg_state s);

#endif
