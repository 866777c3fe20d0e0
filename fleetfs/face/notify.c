/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/notify.c — the notifier thread (design in notify.h).
 *
 * Changes are coalesced: sent, history and status changes become one
 * truncate per file per 100 ms batch, and arrivals the poker reads together
 * one truncate per inbox.  Status files are compared by content (without the lines
 * that change every second by themselves) so watchers wake on real
 * changes only.
 *
 * An inbox arrival is handed to the poker by the thread that delivered
 * it (one non-blocking write on the poker's pipe, atomic as it is shorter
 * than PIPE_BUF), not through this thread: a wake-up less on the way from
 * the broker to a reader (doc/benchmarks.md, "One arrival").  Only when
 * the pipe is full does it take the queue, and this thread waits for room.
 *
 * The truncates themselves are made by a small child process (the
 * "poker"), not by a thread of the daemon.  A daemon thread waiting in a
 * request on its own mount cannot be finished when the daemon dies (kill
 * -9, a crash): the kernel waits for the daemon's answer, the daemon
 * waits for that thread, and the process hangs in D state until someone
 * aborts the FUSE connection.  The poker holds no descriptor but its pipe,
 * so the daemon's death closes /dev/fuse, the kernel aborts the pending
 * request, and the poker sees end-of-file and leaves.
 *
 * On macOS (macFUSE) the truncate is made the same way; what it wakes
 * there (a kqueue EVFILT_VNODE watcher or FSEvents on a FUSE file) is not
 * known here: compiled for macOS, not yet run on a Mac.
 */
#include "fleetfs/face/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/face/fleet.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"
#include "fleetfs/face/status.h"

#define TICK_US 1000000
#define BATCH_US 100000
/* Peer status files compared per tick, and configured peers' mailboxes
 * probed: every peer each second in a fleet of up to this many,
 * round-robin beyond (1000 peers: each every 16 s). */
#define PROBES_PER_TICK 64
/* Mailboxes of discovered (listed but not configured) leads probed per
 * tick, in a round of their own.  Every daemon of a fleet probes every lead
 * it lists, so fleet-wide this is N x this many passive declares a second
 * at the broker (doc/scaling.md: at 64 it was the larger part of the
 * broker's work up to about 300 hosts).  A status open still probes
 * afresh; these keep the cached numbers (roster, watchers) current. */
#define DISCOVERED_PROBES_PER_TICK 4

typedef struct {
    char *path;
    struct fuse_pollhandle *ph;
} nt_item;

struct notifier {
    fleet *f;
    nt_tick_fn each_second; /* the daemon's once-a-second work (nt_start) */
    void *each_second_ud;
    GThread *thread;
    GAsyncQueue *q;
    pid_t poker;   /* the child that makes the truncates */
    GMutex fdlock; /* guards poker_fd against nt_stop's close (any thread writes), and poked */
    int poker_fd;  /* its pipe (non-blocking): NUL-terminated relative paths */
    /* inbox paths handed to the poker whose truncate has not reached the
     * tree yet (nt_poked) -> when (mono us): an arrival meanwhile needs
     * no poke of its own (POKE_PENDING_US) */
    GHashTable *poked;
    gint stopping;
    GHashTable *digests; /* status relpath -> last content */
    guint cursor;        /* next peer to compare (and probe, if configured) */
    guint dcursor;       /* next discovered lead to probe */
    gint64 roster_up_us; /* since when the roster link is up; 0 down */
    GHashTable *warned;  /* configured peers already called a typo */
    GMutex plock;        /* guards pending (read by FUSE threads) */
    GHashTable *pending; /* "+path" / "-path" being announced -> deadline (mono us) */
    GMutex llock;        /* guards later and armed (written by any thread) */
    GHashTable *later;   /* batched paths changed since the batch was armed */
    bool armed;          /* a batch is open: the thread flushes later at its end */
};

static void item_free(nt_item *it)
{
    if (it->ph)
        fuse_pollhandle_destroy(it->ph);
    g_free(it->path);
    g_free(it);
}

/* An item with neither path nor poll handle: "a batch is open" (or, from
 * nt_stop, just "wake up"). */
static void push_wake(notifier *nt)
{
    g_async_queue_push(nt->q, g_new0(nt_item, 1));
}

/* An inbox poke still pending after this long is written again (a
 * truncate that never reached the tree: the poker was slow, or the path
 * went away under it). */
#define POKE_PENDING_US 500000

/* Hand relpath (an inbox) to the poker from the calling thread: true when
 * done, false when the pipe is full or gone (then the notifier does it).
 * While an earlier poke of it is pending (its truncate has not reached the
 * tree), nothing is written: that truncate comes after this arrival was
 * added, so the IN_MODIFY it makes wakes readers who then find both.  A
 * burst of arrivals costs one write(2) and one truncate per run, not per
 * message (issue 32: two of the consuming thread's four system calls per
 * arrival were its seen-set line and this write). */
static bool poke_now(notifier *nt, const char *relpath)
{
    size_t len = strlen(relpath) + 1;
    ssize_t n = -1;
    gint64 now = g_get_monotonic_time(), *at;
    if (len > PIPE_BUF)
        return false;
    g_mutex_lock(&nt->fdlock);
    at = g_hash_table_lookup(nt->poked, relpath);
    if (at && now - *at < POKE_PENDING_US) {
        g_mutex_unlock(&nt->fdlock);
        return true;
    }
    if (nt->poker_fd >= 0)
        n = write(nt->poker_fd, relpath, len);
    if (n == (ssize_t)len)
        g_hash_table_replace(nt->poked, g_strdup(relpath), g_memdup2(&now, sizeof now));
    g_mutex_unlock(&nt->fdlock);
    return n == (ssize_t)len;
}

void nt_poked(notifier *nt, const char *relpath)
{
    if (!nt)
        return;
    g_mutex_lock(&nt->fdlock);
    g_hash_table_remove(nt->poked, relpath);
    g_mutex_unlock(&nt->fdlock);
}

/* A batched path (sent, history, status) joins `later`; only the first
 * change of a batch wakes the thread, so a busy writer costs the notifier
 * one wake-up per batch rather than two per message (doc/benchmarks.md).
 * Inbox arrivals and entry announcements go through the queue at once. */
void nt_changed(notifier *nt, const char *relpath)
{
    nt_item *it;
    bool wake;
    if (!nt)
        return;
    if (g_str_has_suffix(relpath, "/inbox") && poke_now(nt, relpath))
        return;
    if (!g_str_has_suffix(relpath, "/inbox") && relpath[0] != '+' && relpath[0] != '-') {
        g_mutex_lock(&nt->llock);
        g_hash_table_add(nt->later, g_strdup(relpath));
        wake = !nt->armed;
        nt->armed = true;
        g_mutex_unlock(&nt->llock);
        if (wake)
            push_wake(nt);
        return;
    }
    it = g_new0(nt_item, 1);
    it->path = g_strdup(relpath);
    g_async_queue_push(nt->q, it);
}

void nt_poll_wake(notifier *nt, struct fuse_pollhandle *ph)
{
    nt_item *it;
    if (!nt) {
        fuse_pollhandle_destroy(ph);
        return;
    }
    it = g_new0(nt_item, 1);
    it->ph = ph;
    g_async_queue_push(nt->q, it);
}

bool nt_is_self(notifier *nt, pid_t tid)
{
    return nt && nt->poker > 0 && nt->poker == tid;
}

/* ---- directory entries (peers/ gaining or losing a lead) ----------------
 * A directory watcher wakes on IN_CREATE / IN_DELETE of a name inside it
 * (or IN_ATTRIB on the directory itself); none of those can start inside
 * the daemon either.  So the poker makes them for real: mkdir(peers/<id>)
 * when a lead appears, rmdir when it goes.  For the poker's pid, and only
 * while the announcement is pending, the tree pretends the name is absent
 * (so the kernel lets the mkdir through to us) or still present (so the
 * rmdir reaches us), and answers the mkdir / rmdir with success.  When the
 * kernel refuses before asking us (a cached entry, or default_permissions
 * on a 0500 directory), the poker touches the directory instead
 * (utimensat: IN_ATTRIB).  A pending announcement lapses after
 * ENTRY_PENDING_US so a lost one cannot leave the poker a wrong view. */
#define ENTRY_PENDING_US 2000000

void nt_entry(notifier *nt, const char *dir, const char *name, bool added)
{
    nt_item *it;
    if (!nt)
        return;
    it = g_new0(nt_item, 1);
    it->path = g_strdup_printf("%c%s/%s", added ? '+' : '-', dir, name);
    g_async_queue_push(nt->q, it);
}

static void pending_add(notifier *nt, const char *op)
{
    gint64 *deadline = g_new(gint64, 1);
    char other[300];
    *deadline = g_get_monotonic_time() + ENTRY_PENDING_US;
    /* a newer announcement of the same name replaces the opposite one */
    snprintf(other, sizeof other, "%c%s", op[0] == '+' ? '-' : '+', op + 1);
    g_mutex_lock(&nt->plock);
    g_hash_table_remove(nt->pending, other);
    g_hash_table_replace(nt->pending, g_strdup(op), deadline);
    g_mutex_unlock(&nt->plock);
}

static bool pending_has(notifier *nt, char op, const char *relpath)
{
    char key[300];
    gint64 *deadline;
    snprintf(key, sizeof key, "%c%s", op, relpath);
    deadline = g_hash_table_lookup(nt->pending, key);
    return deadline && *deadline > g_get_monotonic_time();
}

int nt_pretend(notifier *nt, pid_t tid, const char *relpath)
{
    int r = 0;
    if (!nt_is_self(nt, tid))
        return 0;
    g_mutex_lock(&nt->plock);
    if (pending_has(nt, '+', relpath))
        r = 1;
    else if (pending_has(nt, '-', relpath))
        r = 2;
    g_mutex_unlock(&nt->plock);
    return r;
}

void nt_entry_done(notifier *nt, const char *relpath, bool added)
{
    char key[300];
    if (!nt)
        return;
    snprintf(key, sizeof key, "%c%s", added ? '+' : '-', relpath);
    g_mutex_lock(&nt->plock);
    g_hash_table_remove(nt->pending, key);
    g_mutex_unlock(&nt->plock);
}

/* The poker: read paths, truncate them through the mount.  It runs in a
 * child forked from a threaded process, so it calls only async-signal-safe
 * functions (read, truncate, memcpy-like loops, _exit).  The tree ignores
 * its truncates (they come from this pid), and the kernel keeps the
 * attributes the tree reports in the reply, so the size given does not
 * matter and no stat is needed first. */
/* In the poker: mkdir / rmdir path (see nt_entry); if the kernel refused
 * it before asking the daemon, touch the parent directory instead. */
static void poke_entry(char *path, bool added)
{
    char *slash = path;
    int rc;
    while ((rc = added ? mkdir(path, 0500) : rmdir(path)) < 0 && errno == EINTR)
        ;
    if (rc == 0)
        return;
    for (char *p = path; *p; p++)
        if (*p == '/')
            slash = p;
    *slash = '\0';
    while (utimensat(AT_FDCWD, path, NULL, 0) < 0 && errno == EINTR)
        ;
}

static void poker_main(int fd, const char *mnt)
{
    char buf[8192], path[PATH_MAX + 8];
    size_t mlen = strlen(mnt), have = 0;
    if (mlen + 2 > sizeof path)
        _exit(1);
    memcpy(path, mnt, mlen);
    path[mlen] = '/';
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        size_t start = 0, prev = 0, plen = SIZE_MAX; /* the path before, in this read */
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            _exit(0);
        }
        have += (size_t)n;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\0')
                continue;
            /* the same file as the path before, in this read (a burst of
             * arrivals): the truncate just made for that one covers it, as
             * both were written before that truncate began */
            if (i - start == plen && buf[start] != '+' && buf[start] != '-' &&
                memcmp(buf + prev, buf + start, plen) == 0) {
                start = i + 1;
                continue;
            }
            prev = start;
            plen = i - start;
            if (i - start + mlen + 2 <= sizeof path) {
                char op = buf[start];
                if (op == '+' || op == '-') {
                    memcpy(path + mlen + 1, buf + start + 1, i - start);
                    poke_entry(path, op == '+');
                } else {
                    memcpy(path + mlen + 1, buf + start, i - start + 1);
                    while (truncate(path, 0) < 0 && errno == EINTR)
                        ;
                }
            }
            start = i + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf) /* a path longer than the buffer: drop it */
            have = 0;
    }
}

static pid_t poker_start(const char *mnt, int *wfd)
{
    int p[2];
    pid_t pid;
    if (os_pipe(p, 0) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        /* keep nothing of the daemon's: above all not /dev/fuse */
        if (dup2(p[0], 3) < 0)
            _exit(1);
        os_close_from(4);
        poker_main(3, mnt);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    /* any thread writes to it (poke_now) and must never wait there */
    if (fcntl(p[1], F_SETFL, O_NONBLOCK) < 0)
        log_warn("notify: cannot make the poker's pipe non-blocking: %s", strerror(errno));
    *wfd = p[1];
    return pid;
}

/* IN_MODIFY for watchers of relpath: ask the poker to touch it.  The
 * pipe does not block (poke_now): when it is full, wait here for room (up
 * to a second at a time: a poker stuck in a truncate for longer than that
 * is worth a line in the log, and the wait goes on). */
static void poke(notifier *nt, const char *relpath)
{
    size_t len = strlen(relpath) + 1;
    ssize_t n;
    if (nt->poker_fd < 0) /* only nt_stop changes it, after this thread ended */
        return;
    while ((n = write(nt->poker_fd, relpath, len)) < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (errno == EAGAIN &&
            poll(&(struct pollfd){.fd = nt->poker_fd, .events = POLLOUT}, 1, 1000) == 0)
            log_warn("notify: the poker process has not taken a path for 1 s (a truncate on "
                     "the mount hangs?); inotify watchers wake late meanwhile");
    }
    if (n != (ssize_t)len)
        log_warn("notify: cannot reach the poker process (%s); inotify watchers will not wake",
                 n < 0 ? strerror(errno) : "short write");
}

/* Strip the lines that change with time alone. */
static char *digest(GString *s)
{
    GString *d = g_string_new(NULL);
    gchar **lines = g_strsplit(s->str, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        if (g_str_has_prefix(*l, "probed:") || g_str_has_prefix(*l, "uptime:") ||
            g_str_has_prefix(*l, "last_heartbeat:"))
            continue;
        /* "presence: live (2s ago)": the state counts, the age does not */
        if (g_str_has_prefix(*l, "presence:") && strchr(*l, '('))
            *strchr(*l, '(') = '\0';
        g_string_append_printf(d, "%s\n", *l);
    }
    g_strfreev(lines);
    g_string_free(s, TRUE);
    return g_string_free(d, FALSE);
}

static void compare_status(notifier *nt, GHashTable *dirty, const char *relpath, GString *now)
{
    char *d = digest(now);
    const char *old = g_hash_table_lookup(nt->digests, relpath);
    if (!old || strcmp(old, d) != 0) {
        if (old)
            g_hash_table_add(dirty, g_strdup(relpath));
        g_hash_table_replace(nt->digests, g_strdup(relpath), d);
    } else {
        g_free(d);
    }
}

/* A configured peer that has no mailbox and that presence has never heard
 * of, while our own roster link has been up for three heartbeat intervals
 * (so "never" is not just "not yet"), is most likely a typo in peers=:
 * said once per peer, in the log; its status file already reads absent and
 * never.  Without presence nothing can tell a typo from a host not yet
 * set up, and nothing is said. */
static void warn_unknown_peers(notifier *nt)
{
    fleet *f = nt->f;
    gint64 now = g_get_monotonic_time();
    if (!f->pr || !pr_link_up(f->pr)) {
        nt->roster_up_us = 0;
        return;
    }
    if (!nt->roster_up_us)
        nt->roster_up_us = now;
    if (now - nt->roster_up_us < 3 * f->opts->heartbeat_ms * 1000)
        return;
    for (char **p = f->opts->peers; p && *p; p++) {
        char queue[96];
        br_probe pb;
        pr_info in;
        if (g_hash_table_contains(nt->warned, *p))
            continue;
        br_inbox_queue(*p, queue, sizeof queue);
        if (!br_probe_cached(f->br, queue, &pb) || !pb.valid || pb.present)
            continue;
        if (pr_get(f->pr, *p, &in) && in.state != PR_NEVER)
            continue;
        log_warn("peers: %s has no mailbox (%s) and has never been heard from: a typo in "
                 "peers=? Check the name against that host's coord_id; if it is right, that "
                 "host has not mounted fleetfs yet (its status: peers/%s/status)",
                 *p, queue, *p);
        g_hash_table_add(nt->warned, g_strdup(*p));
    }
}

/* In peers= (as opposed to only discovered through presence). */
static bool is_configured(fleet *f, const char *peer)
{
    for (char **p = f->opts->peers; p && *p; p++)
        if (!strcmp(*p, peer))
            return true;
    return false;
}

static void tick(notifier *nt, GHashTable *dirty)
{
    fleet *f = nt->f;
    char path[160];
    char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
    guint n = g_strv_length(peers), i;
    GPtrArray *discovered = g_ptr_array_new(); /* borrows from peers */
    if (nt->each_second)
        nt->each_second(nt->each_second_ud);
    st_probe(f, f->opts->coord_id);
    snprintf(path, sizeof path, "leads/%s/status", f->opts->coord_id);
    compare_status(nt, dirty, path, st_lead(f, false));
    compare_status(nt, dirty, "status", st_root(f));
    for (i = 0; i < MIN(n, PROBES_PER_TICK); i++) {
        const char *peer = peers[(nt->cursor + i) % n];
        if (is_configured(f, peer))
            st_probe(f, peer);
        snprintf(path, sizeof path, "peers/%s/status", peer);
        compare_status(nt, dirty, path, st_peer(f, peer, false));
    }
    if (n)
        nt->cursor = (nt->cursor + i) % n;
    /* the discovered ones' round (peers is sorted, so the cursor walks them
     * in order while the set changes) */
    for (i = 0; peers[i]; i++)
        if (!is_configured(f, peers[i]))
            g_ptr_array_add(discovered, peers[i]);
    for (i = 0; i < MIN(discovered->len, DISCOVERED_PROBES_PER_TICK); i++)
        st_probe(f, discovered->pdata[(nt->dcursor + i) % discovered->len]);
    if (discovered->len)
        nt->dcursor = (nt->dcursor + i) % discovered->len;
    g_ptr_array_free(discovered, TRUE);
    g_strfreev(peers);
    warn_unknown_peers(nt);
}

static void flush(notifier *nt, GHashTable *dirty)
{
    GHashTableIter iter;
    gpointer key;
    /* the batch closes: what changed from now on opens the next one */
    g_mutex_lock(&nt->llock);
    g_hash_table_iter_init(&iter, nt->later);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        g_hash_table_add(dirty, key);
        g_hash_table_iter_steal(&iter);
    }
    nt->armed = false;
    g_mutex_unlock(&nt->llock);
    g_hash_table_iter_init(&iter, dirty);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        poke(nt, key);
    g_hash_table_remove_all(dirty);
}

/* An arrival wakes inbox watchers at once; the files that change with
 * every send or ack (sent, history, status) are gathered for up to
 * BATCH_US, so a busy writer costs one wake-up per file per batch rather
 * than one per message. */
static gpointer notifier_main(gpointer data)
{
    notifier *nt = data;
    GHashTable *dirty = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    gint64 next_tick = g_get_monotonic_time() + TICK_US, next_flush = 0;

    while (!g_atomic_int_get(&nt->stopping)) {
        gint64 until = next_flush ? MIN(next_tick, next_flush) : next_tick;
        gint64 wait = MAX(until - g_get_monotonic_time(), 1);
        nt_item *it = g_async_queue_timeout_pop(nt->q, (guint64)wait);
        while (it) {
            /* macFUSE: the same libfuse3 call; whether its kernel side
             * wakes poll(2) waiters is not known here (not yet run on a Mac) */
            if (it->ph)
                fuse_lowlevel_notify_poll(it->ph);
            if (it->path && (it->path[0] == '+' || it->path[0] == '-')) {
                pending_add(nt, it->path);
                poke(nt, it->path);
            } else if (it->path && g_str_has_suffix(it->path, "/inbox"))
                poke(nt, it->path);
            else if (it->path)
                g_hash_table_add(dirty, g_strdup(it->path));
            else if (!it->ph && !next_flush)
                next_flush = g_get_monotonic_time() + BATCH_US;
            item_free(it);
            it = g_async_queue_try_pop(nt->q);
        }
        if (g_get_monotonic_time() >= next_tick) {
            tick(nt, dirty);
            next_tick = g_get_monotonic_time() + TICK_US;
        }
        if (g_atomic_int_get(&nt->stopping))
            break;
        if (g_hash_table_size(dirty) && !next_flush)
            next_flush = g_get_monotonic_time() + BATCH_US;
        if (next_flush && g_get_monotonic_time() >= next_flush) {
            flush(nt, dirty);
            next_flush = 0;
        }
    }
    g_hash_table_destroy(dirty);
    return NULL;
}

notifier *nt_start(fleet *f, nt_tick_fn each_second, void *ud)
{
    notifier *nt = g_new0(notifier, 1);
    nt->f = f;
    nt->each_second = each_second;
    nt->each_second_ud = ud;
    nt->q = g_async_queue_new();
    nt->digests = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    nt->warned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&nt->plock);
    nt->pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_mutex_init(&nt->llock);
    nt->later = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&nt->fdlock);
    nt->poked = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    nt->poker_fd = -1;
    nt->poker = poker_start(f->mountpoint, &nt->poker_fd);
    if (nt->poker < 0)
        log_err("notify: cannot start the poker process: %s; inotify watchers will not wake "
                "(poll and tail -f still work)",
                strerror(errno));
    nt->thread = g_thread_new("notifier", notifier_main, nt);
    return nt;
}

void nt_stop(notifier *nt)
{
    nt_item *it;
    if (!nt)
        return;
    g_atomic_int_set(&nt->stopping, 1);
    push_wake(nt);
    g_thread_join(nt->thread);
    if (nt->poker > 0) {
        g_mutex_lock(&nt->fdlock);
        close(nt->poker_fd);
        nt->poker_fd = -1;
        g_mutex_unlock(&nt->fdlock);
        /* end-of-file makes it leave; a truncate it is in returns once the
         * mount is gone.  Do not wait for ever on it all the same. */
        for (int i = 0; i < 40 && waitpid(nt->poker, NULL, WNOHANG) == 0; i++)
            g_usleep(50000);
        if (kill(nt->poker, 0) == 0) {
            log_warn("notify: the poker process did not leave; killing it");
            kill(nt->poker, SIGKILL);
            waitpid(nt->poker, NULL, 0);
        }
    }
    while ((it = g_async_queue_try_pop(nt->q)))
        item_free(it);
    g_async_queue_unref(nt->q);
    g_hash_table_destroy(nt->digests);
    g_hash_table_destroy(nt->warned);
    g_hash_table_destroy(nt->pending);
    g_hash_table_destroy(nt->poked);
    g_mutex_clear(&nt->plock);
    g_hash_table_destroy(nt->later);
    g_mutex_clear(&nt->llock);
    g_mutex_clear(&nt->fdlock);
    g_free(nt);
}
