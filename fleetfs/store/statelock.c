/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/store/statelock.c — see statelock.h. */
#include "fleetfs/store/statelock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/base/log.h"

#define SL_POLL_MS 100

struct state_lock {
    int fd;
    char *path;
};

/* The pid the holder wrote, or 0. */
static long sl_holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long pid;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

void sl_note_pid(state_lock *l)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    /* best effort: on a full disk the lock holds all the same, and a
     * refusal then says the pid is unknown */
    if (ftruncate(l->fd, 0) != 0)
        return;
    if (pwrite(l->fd, buf, (size_t)n, 0) == n)
        return;
    /* part of a pid would mislead: leave the file empty if we can (the
     * results are checked: Debian's _FORTIFY_SOURCE refuses a (void) cast) */
    if (ftruncate(l->fd, 0) != 0)
        return;
}

state_lock *sl_acquire(const char *dir, int64_t wait_ms, char **err)
{
    state_lock *l = g_new0(state_lock, 1);
    int64_t end = g_get_monotonic_time() / 1000 + wait_ms;
    bool said = false;
    char who[40];
    l->path = g_build_filename(dir, "lock", NULL);
    l->fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (l->fd < 0) {
        *err = g_strdup_printf("state_dir %s: cannot open %s: %s", dir, l->path, g_strerror(errno));
        sl_release(l);
        return NULL;
    }
    while (flock(l->fd, LOCK_EX | LOCK_NB) < 0) {
        int saved = errno;
        long holder = sl_holder(l->fd);
        if (holder)
            snprintf(who, sizeof who, "pid %ld", holder);
        else
            g_strlcpy(who, "pid unknown", sizeof who);
        if ((saved != EWOULDBLOCK && saved != EINTR) || g_get_monotonic_time() / 1000 >= end) {
            if (saved == EWOULDBLOCK)
                *err = g_strdup_printf(
                    "state_dir %s is in use: another fleetfs (%s) holds the lock %s; waited "
                    "%lld ms (takeover_grace) for it to exit. Stop that one first, or give this "
                    "mount its own -o state_dir",
                    dir, who, l->path, (long long)wait_ms);
            else
                *err = g_strdup_printf("state_dir %s: cannot lock %s: %s", dir, l->path,
                                       g_strerror(saved));
            sl_release(l);
            return NULL;
        }
        if (!said)
            log_info("state_dir %s: another fleetfs (%s) holds %s; waiting up to %lld ms "
                     "(takeover_grace) for it to exit",
                     dir, who, l->path, (long long)wait_ms);
        said = true;
        g_usleep(SL_POLL_MS * 1000);
    }
    sl_note_pid(l);
    return l;
}

void sl_release(state_lock *l)
{
    if (!l)
        return;
    if (l->fd >= 0)
        close(l->fd); /* lets go of the lock; the file stays */
    g_free(l->path);
    g_free(l);
}
