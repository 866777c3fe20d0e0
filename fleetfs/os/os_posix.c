/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/os_posix.c — the seam's portable fallbacks (design in os.h):
 * built on macOS and other systems, and on Linux by `make
 * PLATFORM=portable`, so that CI runs them.  What only macOS has (kqueue,
 * F_FULLFSYNC, f_fstypename) is here under __APPLE__: compiled for macOS
 * in CI (scripts/cross-macos), not yet run on a Mac. */
#include "fleetfs/os/os.h"

#if !OS_LINUX_NATIVE

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef __APPLE__
#include <sys/event.h>
#include <sys/mount.h>
#include <sys/param.h>
#endif

const char *os_build_name(void)
{
#if defined(__APPLE__)
    return "macos";
#elif defined(__linux__)
    return "linux-portable";
#else
    return "posix";
#endif
}

/* close-on-exec, and non-blocking when asked; 0 or -1 and errno */
static int fd_flags(int fd, int flags)
{
    int fl;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -1;
    if (!(flags & OS_NONBLOCK))
        return 0;
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    return 0;
}

/* Between socket() and fcntl() a fork+exec of another thread could inherit
 * the descriptor; fleetfs's children (the poker, the probe, tmux and herdr
 * commands) close every descriptor above their own first, so none is kept. */
int os_socket(int domain, int type, int protocol, int flags)
{
    int fd = socket(domain, type, protocol), e;
    if (fd < 0)
        return -1;
    if (fd_flags(fd, flags) < 0) {
        e = errno;
        close(fd);
        errno = e;
        return -1;
    }
#ifdef SO_NOSIGPIPE
    /* macOS: a write to a closed peer is EPIPE here, not SIGPIPE */
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &(int){1}, sizeof(int));
#endif
    return fd;
}

int os_pipe(int fds[2], int flags)
{
    int e;
    if (pipe(fds) < 0)
        return -1;
    if (fd_flags(fds[0], flags) < 0 || fd_flags(fds[1], flags) < 0) {
        e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    return 0;
}

int os_wake_open(os_wake *w)
{
    int p[2];
    if (os_pipe(p, OS_NONBLOCK) < 0) {
        w->rfd = w->wfd = -1;
        return -1;
    }
    w->rfd = p[0];
    w->wfd = p[1];
    return 0;
}

/* one byte; a full pipe already holds a wake-up (EAGAIN) */
int os_wake_fire(os_wake *w)
{
    return write(w->wfd, "", 1) < 0 ? -1 : 0;
}

/* every byte written so far: one drain answers every fire, as an eventfd's read does */
int os_wake_drain(os_wake *w)
{
    char buf[256];
    ssize_t n, got = 0;
    while ((n = read(w->rfd, buf, sizeof buf)) > 0)
        got += n;
    if (got > 0)
        return 0;
    return n < 0 ? -1 : 0;
}

void os_wake_close(os_wake *w)
{
    if (w->rfd >= 0)
        close(w->rfd);
    if (w->wfd >= 0)
        close(w->wfd);
    w->rfd = w->wfd = -1;
}

/* up to the descriptor limit, at most 65536 of them (a limit of
 * "unlimited" would loop for ever; fleetfs opens far fewer) */
void os_close_from(int lowfd)
{
    struct rlimit rl;
    long top = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)top)
        top = (long)rl.rlim_cur;
    for (long fd = lowfd; fd < top; fd++)
        close((int)fd);
}

int os_datasync(int fd)
{
#ifdef F_FULLFSYNC
    if (fcntl(fd, F_FULLFSYNC) == 0)
        return 0;
        /* a file system without it (some network or FUSE ones): fsync */
#endif
    return fsync(fd);
}

void os_heap_trim(void)
{
}

#ifdef __APPLE__
/* ---- the trust directory: kqueue EVFILT_VNODE ------------------------------
 * A kqueue sees a change to a vnode it holds a descriptor of: the
 * directory (an entry added, removed or renamed: NOTE_WRITE) and each
 * entry ending in suffix (written in place, its mode changed, removed).
 * An entry added later has no descriptor yet, so any change to the
 * directory ends the watch (*ended): the caller opens a new one, which
 * covers the new entry. */
#define DW_MAX 4096 /* descriptors per watch; more: no watch (the caller polls) */
#define DW_VNODE (NOTE_WRITE | NOTE_EXTEND | NOTE_ATTRIB | NOTE_DELETE | NOTE_RENAME | NOTE_REVOKE)

struct os_dirwatch {
    int kq;
    int n, fds[];
};

static int dw_add(os_dirwatch *w, int fd)
{
    struct kevent ev;
    EV_SET(&ev, (uintptr_t)fd, EVFILT_VNODE, EV_ADD | EV_CLEAR, DW_VNODE, 0, NULL);
    w->fds[w->n++] = fd;
    return kevent(w->kq, &ev, 1, NULL, 0, NULL);
}

os_dirwatch *os_dirwatch_open(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    os_dirwatch *w = NULL;
    size_t sl = strlen(suffix);
    int fd;

    if (!d)
        return NULL;
    if (!(w = malloc(sizeof *w + DW_MAX * sizeof(int))))
        goto fail;
    w->n = 0;
    if ((w->kq = kqueue()) < 0)
        goto fail;
    fcntl(w->kq, F_SETFD, FD_CLOEXEC);
    if ((fd = open(dir, O_EVTONLY | O_CLOEXEC | O_DIRECTORY)) < 0 || dw_add(w, fd) < 0)
        goto fail;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < sl || strcmp(de->d_name + l - sl, suffix) != 0)
            continue;
        if (w->n == DW_MAX) {
            errno = EMFILE;
            goto fail;
        }
        if ((fd = openat(dirfd(d), de->d_name, O_EVTONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
            dw_add(w, fd) < 0)
            goto fail;
    }
    closedir(d);
    return w;
fail:
    closedir(d);
    os_dirwatch_close(w);
    return NULL;
}

int os_dirwatch_read(os_dirwatch *w, bool *ended)
{
    struct kevent ev[16];
    struct timespec zero = {0, 0};
    int n, changes = 0;

    *ended = false;
    while ((n = kevent(w->kq, NULL, 0, ev, 16, &zero)) > 0) {
        changes += n;
        for (int i = 0; i < n; i++)
            if ((int)ev[i].ident == w->fds[0] || (ev[i].fflags & (NOTE_DELETE | NOTE_RENAME)))
                *ended = true;
    }
    if (n < 0 && errno != EINTR)
        *ended = true;
    return changes;
}

void os_dirwatch_close(os_dirwatch *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++)
        close(w->fds[i]);
    if (w->kq >= 0)
        close(w->kq);
    free(w);
}

bool os_dir_local(const char *dir)
{
    struct statfs fs;
    if (statfs(dir, &fs) < 0)
        return false;
    return !strcmp(fs.f_fstypename, "apfs") || !strcmp(fs.f_fstypename, "hfs");
}

#else /* the portable build on Linux, and other systems: no watch */

struct os_dirwatch {
    int unused;
};

os_dirwatch *os_dirwatch_open(const char *dir, const char *suffix)
{
    (void)dir;
    (void)suffix;
    errno = ENOSYS;
    return NULL;
}

int os_dirwatch_read(os_dirwatch *w, bool *ended)
{
    (void)w;
    *ended = true;
    return 0;
}

void os_dirwatch_close(os_dirwatch *w)
{
    (void)w;
}

bool os_dir_local(const char *dir)
{
    (void)dir;
    return false;
}
#endif

#endif
