/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/os.h — the platform seam: every call that differs between
 * Linux, macOS and plain POSIX is behind this header, and nowhere else
 * (scripts/check-layers' "portable" check fails on a Linux-only name
 * outside fleetfs/os/).  The folder is the bottom of the layers: every
 * part, broker/ and herdr/ included, may use it; it uses no part.
 *
 * Which implementation is built:
 *   - Linux, the default build: eventfd, inotify, SOCK_CLOEXEC and pipe2,
 *     close_range, fdatasync, malloc_trim (os_linux.c);
 *   - the portable fallbacks (os_posix.c): a pipe for the wake-up fd, no
 *     trust-directory watch (the stamp is a stat of every key each time, a
 *     poll bounded by the askers' once-a-second rounds), socket+fcntl,
 *     a close() loop, fsync; chosen on macOS and other systems, and on
 *     Linux by `make PLATFORM=portable` (FLEETFS_PORTABLE, build/portable)
 *     so that CI runs the code a Mac runs;
 *   - what only macOS has, in os_posix.c under __APPLE__: kqueue
 *     EVFILT_VNODE for the trust directory, fcntl(F_FULLFSYNC),
 *     st_mtimespec, getmntinfo (os_mounts.c), sysctl KERN_PROC and
 *     KERN_PROCARGS2 (os_proc.c).  Compiled for aarch64-macos and
 *     x86_64-macos in CI (scripts/cross-macos); not yet run on a Mac.
 * Facts only Linux's kernel gives keep their Linux route in the portable
 * build too, named here: a process's foreground group and wait channel
 * (/proc, os_proc.c), the mount table (/proc/self/mountinfo, os_mounts.c),
 * FUSE's page limit (/proc/sys/fs/fuse, os_fuse_max_pages_limit) and the
 * FUSE open reply's flags (fuseopen.c: Linux's FUSE protocol).
 */
#ifndef FLEETFS_OS_OS_H
#define FLEETFS_OS_OS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#if defined(__linux__) && !defined(FLEETFS_PORTABLE)
#define OS_LINUX_NATIVE 1
#else
#define OS_LINUX_NATIVE 0
#endif

/* "linux", "linux-portable", "macos" or "posix": the build's choice */
const char *os_build_name(void);

/* ---- errnos the contract promises (SPEC section 5, fleetfs(1) ERRORS) ----
 * macOS has every errno fleetfs answers with but ECOMM ("the broker is not
 * connected: nothing was sent").  There it is ENETDOWN ("Network is
 * down"), which nothing else in fleetfs answers, so the meaning stays one
 * errno; base/errors.c gives both the same words (fe_errno_word). */
#ifdef ECOMM
#define OS_ECOMM ECOMM
#else
#define OS_ECOMM ENETDOWN
#endif

/* ---- the wake-up fd: one thread polls rfd, any thread fires it ---------- */
typedef struct {
    int rfd, wfd; /* the same eventfd on Linux; a pipe's two ends elsewhere */
} os_wake;
/* 0, or -1 and errno; both ends non-blocking and close-on-exec */
int os_wake_open(os_wake *w);
/* 0; -1 and errno (EAGAIN: already pending, which is as good) */
int os_wake_fire(os_wake *w);
/* empties it; 0, or -1 and errno (EAGAIN: nothing pending) */
int os_wake_drain(os_wake *w);
void os_wake_close(os_wake *w);

/* ---- descriptors: always close-on-exec ---------------------------------- */
#define OS_NONBLOCK 1
/* socket(2), close-on-exec, non-blocking with OS_NONBLOCK; -1 and errno */
int os_socket(int domain, int type, int protocol, int flags);
/* pipe(2), both ends close-on-exec, non-blocking with OS_NONBLOCK */
int os_pipe(int fds[2], int flags);
/* Closes every descriptor from lowfd up; async-signal-safe (for a child
 * between fork and exec). close_range on Linux; a loop to the descriptor
 * limit elsewhere. */
void os_close_from(int lowfd);

/* ---- file times (st_mtim on Linux, st_mtimespec on macOS) --------------- */
static inline struct timespec os_st_mtime(const struct stat *st)
{
#ifdef __APPLE__
    return st->st_mtimespec;
#else
    return st->st_mtim;
#endif
}
static inline struct timespec os_st_ctime(const struct stat *st)
{
#ifdef __APPLE__
    return st->st_ctimespec;
#else
    return st->st_ctim;
#endif
}
/* st's access, change and modification times all ms (epoch milliseconds) */
static inline void os_st_set_times_ms(struct stat *st, int64_t ms)
{
    struct timespec t = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
#ifdef __APPLE__
    st->st_mtimespec = st->st_ctimespec = st->st_atimespec = t;
#else
    st->st_mtim = st->st_ctim = st->st_atim = t;
#endif
}

/* ---- durable flush ------------------------------------------------------
 * Linux: fdatasync, the data and the metadata needed to read it back
 * written to the device, and the device's write cache flushed (on file
 * systems mounted with barriers, the default): survives a crash and a
 * power cut.  macOS: fcntl(F_FULLFSYNC), the data and the drive's cache
 * flushed to the media (macOS's fsync alone leaves it in the drive's
 * cache: survives a crash of the system, not a power cut); where the file
 * system refuses F_FULLFSYNC, fsync.  Elsewhere (the portable build on
 * Linux too): fsync, data and all metadata.  0, or -1 and errno. */
int os_datasync(int fd);

/* Hands freed heap back to the system where the allocator can (glibc's
 * malloc_trim); nothing elsewhere. */
void os_heap_trim(void);

/* ---- watching a directory (the trust directory) ------------------------
 * A watch that reports every change to dir and to its entries whose name
 * ends in suffix: inotify on Linux; kqueue EVFILT_VNODE on the directory
 * and each such entry on macOS; none in the portable build (NULL, ENOSYS:
 * the caller compares stat stamps instead). */
typedef struct os_dirwatch os_dirwatch;
os_dirwatch *os_dirwatch_open(const char *dir, const char *suffix);
/* Takes what it saw without waiting: how many changes (0: none).  *ended:
 * the watch no longer covers dir (dir removed or moved, an overflow, a new
 * entry a kqueue watch has no descriptor for): close it, open another. */
int os_dirwatch_read(os_dirwatch *w, bool *ended);
void os_dirwatch_close(os_dirwatch *w);
/* Whether every change to dir is made on this machine, where a watch sees
 * it (local file systems: ext2/3/4, xfs, btrfs, tmpfs, zfs, f2fs on Linux;
 * apfs and hfs on macOS); false for NFS, FUSE, SMB. */
bool os_dir_local(const char *dir);

/* ---- the mount table ----------------------------------------------------
 * Linux (both builds): /proc/self/mountinfo; macOS: getmntinfo. */
typedef struct {
    char *dir;  /* the mount point */
    char *type; /* "fuse.fleetfs", "fuse.sshfs", "ext4"; on macOS a macFUSE
                   mount whose fsname is fleetfs reads "fuse.fleetfs", any
                   other macFUSE mount "fuse" */
    long uid;   /* who mounted it (Linux: a FUSE mount's user_id=), -1 unknown */
    char *dev;  /* Linux: the file system's "MAJ:MIN" (a FUSE mount's is its
                   connection's); NULL on macOS */
} os_mount;
/* NULL when the table cannot be read; else *n entries, in mount order */
os_mount *os_mounts(size_t *n);
void os_mounts_free(os_mount *m, size_t n);

/* ---- FUSE ---------------------------------------------------------------- */
/* The kernel's FUSE is Linux's (one write arrives in requests of at most
 * max_pages pages); false on macOS, whose macFUSE splits writes by its
 * own iosize. */
#ifdef __linux__
#define OS_FUSE_LINUX 1
#else
#define OS_FUSE_LINUX 0
#endif
/* fs.fuse.max_pages_limit (/proc/sys/fs/fuse/max_pages_limit), -1 none */
long os_fuse_max_pages_limit(void);
/* The command that unmounts a FUSE mount as its user: "fusermount3 -u"
 * (Linux), "umount" (macOS: macFUSE has no fusermount3; `diskutil unmount`
 * does the same) */
#ifdef __APPLE__
#define OS_UNMOUNT_CMD "umount"
#define OS_UNMOUNT_LAZY_CMD "umount -f"
#else
#define OS_UNMOUNT_CMD "fusermount3 -u"
#define OS_UNMOUNT_LAZY_CMD "fusermount3 -uz"
#endif

/* ---- readiness ------------------------------------------------------------
 * systemd's notify socket ($NOTIFY_SOCKET, start/sdnotify.c) on Linux;
 * launchd has no readiness protocol: nothing is sent on macOS. */
#ifdef __linux__
#define OS_SD_NOTIFY 1
#else
#define OS_SD_NOTIFY 0
#endif

/* ---- processes (herdr/foreground.c: may a pane be typed into?) ----------
 * Linux (both builds): /proc/PID/{stat,cmdline,comm,wchan}; macOS: sysctl
 * KERN_PROC_PID and KERN_PROCARGS2; elsewhere nothing (-1: the caller
 * judges by tmux's word alone). */
typedef struct {
    int ppid, pgrp, session;
    int tpgid; /* the foreground process group of its terminal, <= 0 none */
    dev_t tty; /* its controlling terminal, 0 none */
} os_proc_facts;
int os_proc_facts_of(int pid, os_proc_facts *f);
/* every process id (for the caller to pick a group's); NULL, -1 unknown */
int *os_proc_list(size_t *n);
/* argv, NULL-terminated (g_strfreev); empty when unknown */
char **os_proc_argv(int pid);
/* the kernel's name of it; "" unknown */
void os_proc_comm(int pid, char *out, size_t n);
/* whether it is blocked in wait(2) for a child (Linux: wchan do_wait);
 * false when unknown, as on macOS: the caller then never looks through
 * it to a child, and judges it, a shell, as a shell */
bool os_proc_waits_for_child(int pid);
/* where those facts come from, in the words a log line uses */
#ifdef __linux__
#define OS_PROC_TABLE "/proc"
#else
#define OS_PROC_TABLE "the process table"
#endif

#endif
