/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/notify.h — the notifier thread.
 *
 * inotify has no kernel hook for changes that start inside a FUSE daemon,
 * so a real operation on the changed file is made through the mount: a
 * truncate, which the kernel reports as IN_MODIFY and which the tree
 * recognises as ours (it comes from the notifier's child process, the
 * "poker", nt_is_self) and ignores.  An inbox arrival goes to the poker
 * straight from the thread that reports it (nt_changed writes the poker's
 * pipe without waiting); the thread here batches sent/history/status per
 * 100 ms and hands those paths to the poker, takes over an arrival when
 * the pipe is full, and wakes poll() waiters (fuse_lowlevel_notify_poll).
 * Doing either from inside a FUSE handler could deadlock, which is why
 * changes are queued here.
 *
 * Once a second it also asks the broker thread to refresh the status
 * probes of the own mailbox and the configured peers, without waiting for
 * the answers (they land in the probe cache), and reports the status files
 * whose content changed.  It never waits on the broker.
 */
#ifndef FLEETFS_NOTIFY_H
#define FLEETFS_NOTIFY_H

#include <stdbool.h>
#include <sys/types.h>

struct fuse_pollhandle;
struct fleet;
typedef struct notifier notifier;

/* The daemon's own once-a-second work (the model's timers, the agents'
 * and presence's ticks, the control requests nobody answered: main.c),
 * called by the thread at the start of each second's round, before the
 * status files are compared; NULL: none.  So the notifier calls nothing
 * of the parts above it. */
typedef void (*nt_tick_fn)(void *ud);
notifier *nt_start(struct fleet *f, nt_tick_fn each_second, void *ud);
void nt_stop(notifier *nt);
/* Neither waits: they enqueue, nt_changed may take the notifier's own leaf
 * locks and write the poker's non-blocking pipe.  Safe from any thread,
 * under any lock. */
void nt_changed(notifier *nt, const char *relpath);
void nt_poll_wake(notifier *nt, struct fuse_pollhandle *ph);
/* tid is the notifier's poker: a truncate from it is a notification. */
bool nt_is_self(notifier *nt, pid_t tid);
/* The poker's truncate of relpath reached the tree (before its answer,
 * which makes the IN_MODIFY): an inbox arrival from now on pokes again. */
void nt_poked(notifier *nt, const char *relpath);

/* dir/name appeared or went (peers/<id>): directory watchers get IN_CREATE
 * / IN_DELETE through a real mkdir / rmdir by the poker, IN_ATTRIB on dir
 * when the kernel refuses those (notify.c).  Only enqueues. */
void nt_entry(notifier *nt, const char *dir, const char *name, bool added);
/* For the tree: 1 when tid is the poker announcing that relpath appeared
 * (answer "absent" so its mkdir reaches us), 2 when announcing that it
 * went (answer "present" so its rmdir does), else 0. */
int nt_pretend(notifier *nt, pid_t tid, const char *relpath);
/* The poker's mkdir (added) / rmdir of relpath arrived: announcement done. */
void nt_entry_done(notifier *nt, const char *relpath, bool added);

#endif
