/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/wire/trustwatch.c — the trust directory's stamp by a watch of
 * the platform seam (fleetfs/os/os.h: inotify on Linux, kqueue on macOS,
 * none in the portable build) (design in trustwatch.h).
 *
 * One entry per directory path asked about (a daemon asks about one, its
 * trusted_keys, from several threads), at most TW_MAX; more fall back to
 * the full stamp.  The watch is added before the directory is scanned, so
 * a change made during the scan is an event the next call sees.  Any event
 * at all moves the stamp (the reader then reads the directory again, as a
 * changed full stamp would have made it); an event that ends the watch
 * (the directory removed or moved, the queue overflowed) also makes the
 * next call start a new one.  The directory's own identity and times are
 * in the stamp too, and a different inode behind the path (a symlink
 * pointed elsewhere, a directory put in its place) starts a new watch.
 */
#include "fleetfs/wire/trustwatch.h"
#include "fleetfs/os/os.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TW_MAX 8
typedef struct {
    char *dir;
    os_dirwatch *w; /* the watch (os.h), NULL none */
    dev_t dev;      /* the directory watched */
    ino_t ino;
    bool exact;      /* the watch sees every change that matters here */
    bool rescan;     /* something changed: look at exactness again */
    uint64_t gen;    /* bumped by every change seen */
    int64_t full;    /* the last full stamp */
    int64_t full_at; /* monotonic ms it was taken */
} tw_dir;

static GMutex tw_lock;
static tw_dir tw[TW_MAX];
static int tw_n;

static int64_t tw_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

/* No .pub in dir is a symlink or has another hard link. */
static bool tw_plain_keys(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    bool plain = d != NULL;

    while (plain && (name = g_dir_read_name(d)) != NULL) {
        struct stat st;
        char *path;
        if (!g_str_has_suffix(name, ".pub"))
            continue;
        path = g_build_filename(dir, name, NULL);
        if (lstat(path, &st) == 0 && (S_ISLNK(st.st_mode) || st.st_nlink > 1))
            plain = false;
        g_free(path);
    }
    if (d)
        g_dir_close(d);
    return plain;
}

static void tw_unwatch(tw_dir *e)
{
    os_dirwatch_close(e->w);
    e->w = NULL;
    e->dev = 0;
    e->ino = 0;
}

/* A new watch on dir (whose stat is st); false when none can be had. */
static bool tw_watch(tw_dir *e, const struct stat *st)
{
    tw_unwatch(e);
    e->gen++;
    e->rescan = true;
    if (!os_dir_local(e->dir))
        return false;
    /* none in the portable build, or out of inotify instances
     * (fs.inotify.max_user_instances): full stamps */
    if (!(e->w = os_dirwatch_open(e->dir, ".pub")))
        return false;
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    return true;
}

/* Reads what the watch has seen: any change counts; one that ends the
 * watch, or an overflow, makes the next call start a new one. */
static void tw_drain(tw_dir *e)
{
    bool ended = false;

    if (os_dirwatch_read(e->w, &ended) > 0) {
        e->gen++;
        e->rescan = true;
    }
    if (ended)
        tw_unwatch(e);
}

static tw_dir *tw_find_locked(const char *dir)
{
    for (int i = 0; i < tw_n; i++)
        if (strcmp(tw[i].dir, dir) == 0)
            return &tw[i];
    if (tw_n == TW_MAX) {
        /* full: a slot whose directory is gone (a test's, a moved one) is
         * taken over; else the caller takes the full stamp */
        struct stat st;
        for (int i = 0; i < tw_n; i++)
            if (stat(tw[i].dir, &st) < 0) {
                tw_unwatch(&tw[i]);
                g_free(tw[i].dir);
                tw[i] = (tw_dir){.dir = g_strdup(dir)};
                return &tw[i];
            }
        return NULL;
    }
    tw[tw_n] = (tw_dir){.dir = g_strdup(dir)};
    return &tw[tw_n++];
}

static int64_t tw_mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211u;
    }
    return (int64_t)(h >> 1); /* never -1 */
}

int64_t tw_stamp(const char *dir, int64_t (*full)(const char *dir))
{
    struct stat st;
    tw_dir *e;
    int64_t now = tw_now_ms(), out;

    if (!dir || stat(dir, &st) < 0)
        return -1;
    g_mutex_lock(&tw_lock);
    e = tw_find_locked(dir);
    if (!e) {
        g_mutex_unlock(&tw_lock);
        return full(dir);
    }
    if (e->w)
        tw_drain(e);
    if ((!e->w || e->dev != st.st_dev || e->ino != st.st_ino) && !tw_watch(e, &st)) {
        e->exact = false;
        g_mutex_unlock(&tw_lock);
        return full(dir);
    }
    if (e->rescan) {
        e->rescan = false;
        e->exact = tw_plain_keys(dir);
        e->full = full(dir);
        e->full_at = now;
    }
    if (!e->exact) {
        g_mutex_unlock(&tw_lock);
        return full(dir);
    }
    if (now - e->full_at >= TW_FULL_MS) {
        int64_t f = full(dir); /* the safety net: a change the watch did not report */
        if (f != e->full)
            e->gen++;
        e->full = f;
        e->full_at = now;
    }
    {
        int64_t v[] = {(int64_t)e->gen,
                       (int64_t)st.st_dev,
                       (int64_t)st.st_ino,
                       (int64_t)st.st_mode,
                       (int64_t)st.st_uid,
                       (int64_t)os_st_mtime(&st).tv_sec,
                       (int64_t)os_st_mtime(&st).tv_nsec,
                       (int64_t)os_st_ctime(&st).tv_sec,
                       (int64_t)os_st_ctime(&st).tv_nsec};
        out = tw_mix(14695981039346656037u, v, sizeof v);
    }
    g_mutex_unlock(&tw_lock);
    return out;
}

bool tw_watching(const char *dir)
{
    bool yes = false;
    g_mutex_lock(&tw_lock);
    for (int i = 0; i < tw_n; i++)
        if (strcmp(tw[i].dir, dir) == 0)
            yes = tw[i].w && tw[i].exact;
    g_mutex_unlock(&tw_lock);
    return yes;
}
