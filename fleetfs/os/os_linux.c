/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/os_linux.c — the seam on Linux, the default build (design in
 * os.h): eventfd, inotify, SOCK_CLOEXEC and pipe2, close_range, fdatasync,
 * malloc_trim.  `make PLATFORM=portable` builds os_posix.c instead. */
#include "fleetfs/os/os.h"

#if OS_LINUX_NATIVE

#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

const char *os_build_name(void)
{
    return "linux";
}

int os_wake_open(os_wake *w)
{
    w->rfd = w->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return w->rfd < 0 ? -1 : 0;
}

int os_wake_fire(os_wake *w)
{
    uint64_t one = 1;
    return write(w->wfd, &one, sizeof one) < 0 ? -1 : 0;
}

int os_wake_drain(os_wake *w)
{
    uint64_t v;
    return read(w->rfd, &v, sizeof v) < 0 ? -1 : 0;
}

void os_wake_close(os_wake *w)
{
    if (w->rfd >= 0)
        close(w->rfd);
    w->rfd = w->wfd = -1;
}

int os_socket(int domain, int type, int protocol, int flags)
{
    return socket(domain, type | SOCK_CLOEXEC | (flags & OS_NONBLOCK ? SOCK_NONBLOCK : 0),
                  protocol);
}

int os_pipe(int fds[2], int flags)
{
    return pipe2(fds, O_CLOEXEC | (flags & OS_NONBLOCK ? O_NONBLOCK : 0));
}

void os_close_from(int lowfd)
{
    close_range((unsigned)lowfd, ~0U, 0);
}

int os_datasync(int fd)
{
    return fdatasync(fd);
}

void os_heap_trim(void)
{
    malloc_trim(0);
}

/* ---- the trust directory: inotify ---------------------------------------- */

#define DW_MASK                                                                         \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE | \
     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct os_dirwatch {
    int fd; /* the inotify instance */
};

/* inotify reports every entry of the directory: suffix needs no watch of its own */
os_dirwatch *os_dirwatch_open(const char *dir, const char *suffix)
{
    os_dirwatch *w = malloc(sizeof *w);
    (void)suffix;
    if (!w)
        return NULL;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) { /* out of instances (fs.inotify.max_user_instances) */
        free(w);
        return NULL;
    }
    if (inotify_add_watch(w->fd, dir, DW_MASK) < 0) {
        int e = errno;
        close(w->fd);
        free(w);
        errno = e;
        return NULL;
    }
    return w;
}

int os_dirwatch_read(os_dirwatch *w, bool *ended)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int changes = 0;
    ssize_t n;

    *ended = false;
    while ((n = read(w->fd, buf, sizeof buf)) > 0) {
        changes++;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                *ended = true;
            p += sizeof *ev + ev->len;
        }
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        *ended = true;
    return changes;
}

void os_dirwatch_close(os_dirwatch *w)
{
    if (!w)
        return;
    close(w->fd);
    free(w);
}

/* whose every change inotify reports (made on this machine, which for
 * these is the only place a change can be made) */
bool os_dir_local(const char *dir)
{
    struct statfs fs;
    if (statfs(dir, &fs) < 0)
        return false;
    switch ((unsigned long)fs.f_type) {
    case 0xEF53UL:     /* ext2, ext3, ext4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs */
    case 0x01021994UL: /* tmpfs */
    case 0x2FC12FC1UL: /* zfs */
    case 0xF2F52010UL: /* f2fs */
        return true;
    default:
        return false;
    }
}

#endif
