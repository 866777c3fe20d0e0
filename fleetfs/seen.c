/* seen.c — the persisted, bounded msgId set behind the replay check.
 *
 * Memory holds exactly the newest cap ids: a hash table for the lookup
 * every delivery makes, and a queue in arrival order for eviction. The file
 * is an append-only log of the same ids, which makes an add one small
 * write with O_APPEND (atomic with respect to other appenders, and never a
 * rewrite of what is already there). Letting the log run to 2 x cap lines
 * before compacting makes the rewrite cost amortised O(1) per add.
 *
 * Compaction writes the newest cap ids to PATH.tmp, syncs it, and renames
 * it over PATH, so a crash at any point leaves either the old log or the
 * new one, both complete. The file is our own, but it is still read as
 * untrusted: lines are length-capped while streaming, so a damaged file
 * cannot make loading allocate without bound, and anything that is not an
 * id is skipped rather than trusted or fatal. A torn last line (a crash
 * mid-append) is skipped and closed with " \n" so the next append does not
 * glue onto it and no later load mistakes it for a complete id. */
#include "fleetfs/seen.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct seen_set {
    GMutex lock; /* guards everything below */
    char *path;
    size_t cap;
    GHashTable *set; /* id -> id; keys borrowed from order */
    GQueue order;    /* owned ids, oldest at the head */
    int fd;          /* the log, O_APPEND */
    size_t lines;    /* lines the log holds, corrupt ones included */
};

static bool seen_id_ok(const char *id, size_t n)
{
    size_t i;

    if (n == 0 || n > SEEN_ID_MAX)
        return false;
    for (i = 0; i < n; i++) {
        if ((unsigned char)id[i] <= ' ' || (unsigned char)id[i] >= 0x7f)
            return false;
    }
    return true;
}

/* Takes ownership of id. False (and id freed) when already present. */
static bool seen_remember(seen_set *s, char *id)
{
    char *old;

    if (g_hash_table_contains(s->set, id)) {
        g_free(id);
        return false;
    }
    g_queue_push_tail(&s->order, id);
    g_hash_table_add(s->set, id);
    while (g_queue_get_length(&s->order) > s->cap) {
        old = g_queue_pop_head(&s->order);
        g_hash_table_remove(s->set, old);
        g_free(old);
    }
    return true;
}

static int seen_write_all(int fd, const char *buf, size_t len)
{
    ssize_t n;

    while (len > 0) {
        n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- loading ------------------------------------------------------------ */

struct seen_loader {
    char line[SEEN_ID_MAX + 1];
    size_t len;
    bool overlong;
};

static void seen_end_line(seen_set *s, struct seen_loader *ld)
{
    if (!ld->overlong && seen_id_ok(ld->line, ld->len))
        seen_remember(s, g_strndup(ld->line, ld->len));
    s->lines++;
    ld->len = 0;
    ld->overlong = false;
}

/* Streams the log line by line. 0 ok, -1 with errno on a read error. */
static int seen_load(seen_set *s)
{
    struct seen_loader ld = {.len = 0, .overlong = false};
    char buf[65536];
    ssize_t n, i;

    for (;;) {
        n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        for (i = 0; i < n; i++) {
            if (buf[i] == '\n')
                seen_end_line(s, &ld);
            else if (ld.len < sizeof(ld.line))
                ld.line[ld.len++] = buf[i];
            else
                ld.overlong = true;
        }
    }
    if (ld.len > 0 || ld.overlong) {
        /* Torn last line: never trusted. Closing it with " \n" keeps
		 * the next append off it and, the space being no id byte,
		 * keeps later loads from taking it for a whole id. */
        if (seen_write_all(s->fd, " \n", 2) < 0)
            return -1;
        s->lines++;
    }
    return 0;
}

/* ---- compaction --------------------------------------------------------- */

static int seen_compact(seen_set *s)
{
    GString *text = g_string_sized_new(s->cap * 33);
    char *tmp = g_strdup_printf("%s.tmp", s->path);
    int fd, newfd, saved;
    GList *l;

    for (l = s->order.head; l != NULL; l = l->next) {
        g_string_append(text, l->data);
        g_string_append_c(text, '\n');
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || seen_write_all(fd, text->str, text->len) < 0 || fdatasync(fd) < 0 ||
        close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    if (rename(tmp, s->path) < 0)
        goto fail;
    newfd = open(s->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (newfd < 0)
        goto fail;
    close(s->fd);
    s->fd = newfd;
    s->lines = g_queue_get_length(&s->order);
    g_string_free(text, TRUE);
    g_free(tmp);
    return 0;
fail:
    saved = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    g_string_free(text, TRUE);
    g_free(tmp);
    errno = saved;
    return -1;
}

/* ---- the set ------------------------------------------------------------ */

seen_set *seen_open(const char *path, size_t cap, char **err)
{
    seen_set *s;

    *err = NULL;
    if (cap == 0) {
        *err = g_strdup("seen-set capacity must be at least 1");
        return NULL;
    }
    s = g_new0(seen_set, 1);
    g_mutex_init(&s->lock);
    s->path = g_strdup(path);
    s->cap = cap;
    s->set = g_hash_table_new(g_str_hash, g_str_equal);
    g_queue_init(&s->order);
    s->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (s->fd < 0 || seen_load(s) < 0 || (s->lines >= 2 * cap && seen_compact(s) < 0)) {
        *err = g_strdup_printf("seen-set %s: %s", path, g_strerror(errno));
        seen_close(s);
        return NULL;
    }
    return s;
}

bool seen_contains(seen_set *s, const char *id)
{
    bool r;

    if (id == NULL)
        return false;
    g_mutex_lock(&s->lock);
    r = g_hash_table_contains(s->set, id);
    g_mutex_unlock(&s->lock);
    return r;
}

int seen_add(seen_set *s, const char *id)
{
    size_t n = id != NULL ? strnlen(id, SEEN_ID_MAX + 1) : 0;
    char line[SEEN_ID_MAX + 1];
    int rc = 0;

    if (!seen_id_ok(id, n)) {
        errno = EINVAL;
        return -1;
    }
    g_mutex_lock(&s->lock);
    if (!seen_remember(s, g_strndup(id, n))) {
        g_mutex_unlock(&s->lock);
        return 1;
    }
    memcpy(line, id, n);
    line[n] = '\n';
    if (seen_write_all(s->fd, line, n + 1) < 0)
        rc = -1;
    else if (++s->lines >= 2 * s->cap)
        rc = seen_compact(s);
    g_mutex_unlock(&s->lock);
    return rc;
}

size_t seen_count(seen_set *s)
{
    size_t n;

    g_mutex_lock(&s->lock);
    n = g_queue_get_length(&s->order);
    g_mutex_unlock(&s->lock);
    return n;
}

void seen_close(seen_set *s)
{
    if (s == NULL)
        return;
    if (s->fd >= 0)
        close(s->fd);
    g_hash_table_destroy(s->set);
    g_queue_clear_full(&s->order, g_free);
    g_free(s->path);
    g_mutex_clear(&s->lock);
    g_free(s);
}
