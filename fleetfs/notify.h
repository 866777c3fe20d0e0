/* fleetfs/notify.h — the notifier thread.
 *
 * inotify has no kernel hook for changes that start inside a FUSE daemon,
 * so this thread, which is not a FUSE thread, performs a real operation on
 * the changed file through the mount: truncate(path, current size), which
 * the kernel reports as IN_MODIFY and which the tree recognises (by the
 * caller's thread id) as ours and ignores.  It also wakes poll() waiters
 * (fuse_notify_poll).  Doing either from inside a FUSE handler could
 * deadlock, which is why changes are queued here.
 *
 * Once a second it also refreshes the status probes of the own mailbox and
 * the configured peers and reports the status files whose content changed.
 */
#ifndef FLEETFS_NOTIFY_H
#define FLEETFS_NOTIFY_H

#include <stdbool.h>
#include <sys/types.h>

struct fuse_pollhandle;
struct fleet;
typedef struct notifier notifier;

notifier *nt_start(struct fleet *f);
void nt_stop(notifier *nt);
/* Both only enqueue: safe from any thread, under any lock. */
void nt_changed(notifier *nt, const char *relpath);
void nt_poll_wake(notifier *nt, struct fuse_pollhandle *ph);
/* The notifier's thread id: a truncate from it is a notification. */
bool nt_is_self(notifier *nt, pid_t tid);

#endif
