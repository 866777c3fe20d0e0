/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/store/applog.c — see applog.h for the durability rules. */
#include "fleetfs/store/applog.h"
#include "fleetfs/os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct applog {
    char *path;
    applog_sync sync;
    int fd;        /* O_APPEND */
    size_t lines;  /* lines the file holds, skipped ones included */
    int err;       /* errno of the last failed write, 0 after one that worked */
    bool open_end; /* the file ends inside a line we could neither close nor
                    * cut off: the next append starts with a newline */
};

/* *done: how much reached the file, also when it fails part way. */
static int write_all(int fd, const char *buf, size_t len, size_t *done)
{
    *done = 0;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
        *done += (size_t)n;
    }
    return 0;
}

/* Cut the file back to `size` (the end of its last whole line); when even
 * that fails, the next append closes the fragment with a newline first. */
static void cut_to(applog *a, off_t size)
{
    int saved = errno;
    if (ftruncate(a->fd, size) < 0)
        a->open_end = true;
    errno = saved;
}

/* Streams the file; complete lines of at most max_line bytes go to out. */
static int load(applog *a, size_t max_line, GPtrArray *out)
{
    GString *line = g_string_new(NULL);
    bool overlong = false, nul = false;
    char buf[65536];
    int rc = 0;
    off_t pos = 0, whole = 0; /* bytes read; bytes up to the last newline */
    size_t done;

    for (;;) {
        ssize_t n = read(a->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++, pos++) {
            if (buf[i] != '\n') {
                nul = nul || buf[i] == '\0';
                if (line->len < max_line)
                    g_string_append_c(line, buf[i]);
                else
                    overlong = true;
                continue;
            }
            if (!overlong && !nul && line->len > 0)
                g_ptr_array_add(out, g_strndup(line->str, line->len));
            a->lines++;
            whole = pos + 1;
            g_string_truncate(line, 0);
            overlong = nul = false;
        }
    }
    /* a torn last line: closed off, or on a full disk cut off; either way
     * every whole line is loaded and the log opens (degraded: err says the
     * disk refused a write) */
    if (rc == 0 && (line->len > 0 || overlong)) {
        if (write_all(a->fd, " \n", 2, &done) == 0) {
            a->lines++;
        } else {
            a->err = errno;
            cut_to(a, whole);
        }
    }
    g_string_free(line, TRUE);
    return rc;
}

/* A new PATH.tmp.XXXXXXXX, created exclusively (O_EXCL): never a file
 * someone else made or still writes.  *tmp: its name (g_free). */
static int open_tmp(const applog *a, char **tmp)
{
    for (int i = 0; i < 16; i++) {
        int fd;
        *tmp = g_strdup_printf("%s.tmp.%08x", a->path, g_random_int());
        fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        g_free(*tmp);
    }
    *tmp = NULL;
    return -1;
}

/* Leftovers of a rewrite that a crash interrupted (PATH.tmp.*, and the
 * PATH.tmp of older versions): under the state_dir lock nobody else is
 * writing them. */
static void remove_stale_tmp(const char *path)
{
    char *dir = g_path_get_dirname(path), *base = g_path_get_basename(path);
    char *prefix = g_strconcat(base, ".tmp", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (g_str_has_prefix(name, prefix) &&
            (name[strlen(prefix)] == '\0' || name[strlen(prefix)] == '.')) {
            char *p = g_build_filename(dir, name, NULL);
            unlink(p);
            g_free(p);
        }
    }
    if (d)
        g_dir_close(d);
    g_free(prefix);
    g_free(base);
    g_free(dir);
}

applog *applog_open(const char *path, applog_sync sync, size_t max_line, GPtrArray **lines,
                    char **err)
{
    applog *a = g_new0(applog, 1);
    a->path = g_strdup(path);
    a->sync = sync;
    *lines = g_ptr_array_new_with_free_func(g_free);
    remove_stale_tmp(path);
    a->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (a->fd < 0 || load(a, max_line, *lines) < 0) {
        *err = g_strdup_printf("%s: %s", path, g_strerror(errno));
        g_ptr_array_free(*lines, TRUE);
        *lines = NULL;
        applog_close(a);
        return NULL;
    }
    return a;
}

int applog_append(applog *a, const char *line)
{
    size_t len = strlen(line), lead = a->open_end ? 1 : 0, done;
    char *buf = g_malloc(lead + len + 1);
    struct stat st;
    int rc;
    buf[0] = '\n';
    memcpy(buf + lead, line, len);
    buf[lead + len] = '\n';
    /* one write: a line is never torn by us, short of a full disk (ENOSPC,
     * EDQUOT, EFBIG), whose fragment is cut off again at once */
    rc = write_all(a->fd, buf, lead + len + 1, &done);
    g_free(buf);
    if (rc < 0 && done > 0 && fstat(a->fd, &st) == 0 && (size_t)st.st_size >= done)
        cut_to(a, st.st_size - (off_t)done);
    else if (rc < 0 && done > 0)
        a->open_end = true;
    if (rc == 0 && a->sync == APPLOG_FSYNC && os_datasync(a->fd) < 0)
        rc = -1;
    if (done == lead + len + 1) { /* whole in the file, synced or not */
        a->lines += lead + 1;
        a->open_end = false;
    }
    a->err = rc < 0 ? errno : 0;
    return rc;
}

bool applog_wants_compact(const applog *a, size_t live)
{
    return a->lines > 64 && a->lines >= 2 * live;
}

static int sync_dir(const char *path)
{
    char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
    g_free(dir);
    if (fd >= 0) {
        rc = fsync(fd);
        close(fd);
    }
    return rc;
}

int applog_rewrite(applog *a, const GString *content, size_t live)
{
    char *tmp = NULL;
    int fd = open_tmp(a, &tmp), nfd, saved;
    size_t done;
    if (fd < 0)
        goto fail;
    if (write_all(fd, content->str, content->len, &done) < 0 || os_datasync(fd) < 0) {
        saved = errno;
        close(fd);
        errno = saved;
        goto fail;
    }
    if (close(fd) < 0 || rename(tmp, a->path) < 0)
        goto fail;
    /* the rename itself must be durable before the old lines are gone */
    sync_dir(a->path);
    nfd = open(a->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (nfd < 0)
        goto fail;
    close(a->fd);
    a->fd = nfd;
    a->lines = live;
    a->open_end = false;
    g_free(tmp);
    return 0;
fail:
    saved = errno;
    if (tmp)
        unlink(tmp);
    g_free(tmp);
    errno = saved;
    return -1;
}

int applog_add(applog *a, const char *line, size_t live, GString *(*render)(void *ud), void *ud)
{
    GString *all;
    if (applog_append(a, line) < 0)
        return -1;
    if (!applog_wants_compact(a, live))
        return 0;
    /* a rewrite that fails (a full disk) leaves the file as it was, line
     * included: tried again at the next add */
    all = render(ud);
    applog_rewrite(a, all, live);
    g_string_free(all, TRUE);
    return 0;
}

int applog_failed(const applog *a)
{
    return a->err;
}

size_t applog_lines(const applog *a)
{
    return a->lines;
}

const char *applog_path(const applog *a)
{
    return a->path;
}

void applog_close(applog *a)
{
    if (!a)
        return;
    if (a->fd >= 0)
        close(a->fd);
    g_free(a->path);
    g_free(a);
}
