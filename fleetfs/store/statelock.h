/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/store/statelock.h — one daemon per state directory.
 *
 * Two fleetfs writing the same history, sent, seen, outbox and journal
 * files (an overlapping takeover, or a second mount given the same
 * state_dir) would interleave their appends and rewrites.  So a daemon
 * holds an exclusive lock on STATE_DIR/lock (flock) for its whole life,
 * taken before any state is loaded; the file holds the holder's pid, for
 * the refusal message.  A second daemon waits for it up to takeover_grace
 * (the old one of a quick remount is still shutting down), then refuses,
 * naming the lock file and the holder's pid.
 *
 * The lock belongs to the open file, not to the process: it survives the
 * fork into the background (sl_note_pid then records the daemon's pid) and
 * is let go when the daemon exits, however it exits.
 */
#ifndef FLEETFS_STATELOCK_H
#define FLEETFS_STATELOCK_H

#include <stdint.h>

typedef struct state_lock state_lock;

/* Lock dir/lock, waiting up to wait_ms for a holder to let go.  NULL and
 * *err (g_free) when it is still held then, or cannot be opened. */
state_lock *sl_acquire(const char *dir, int64_t wait_ms, char **err);
/* Record the calling process as the holder (after a fork). */
void sl_note_pid(state_lock *l);
void sl_release(state_lock *l);

#endif
