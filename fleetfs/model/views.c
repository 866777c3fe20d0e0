/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/views.c — open inbox readers.
 *
 * An open inbox is a view: a private copy of the pending lines at open, to
 * which every later arrival is appended, so acks never rewrite what a
 * reader was shown and `tail -f inbox` prints each arrival once (SPEC 2).
 * A view that lives long (tail -f for days) must not keep everything it
 * ever showed: once its reader is more than VIEW_KEEP bytes past the start
 * of the copy, the part behind it is dropped.  Offsets stay those of the
 * whole view (base + position in buf); a read behind base finds nothing.
 */
#include "fleetfs/model/mb_int.h"

#include <fuse.h>
#include <poll.h>
#include <string.h>

struct mb_view {
    pid_t pid;
    GString *buf;   /* the view from offset base on */
    size_t base;    /* view offset of buf->str[0] */
    size_t read_hi; /* furthest view offset read */
    struct fuse_pollhandle *ph;
};

static void view_free(mb_view *v)
{
    if (v->ph)
        fuse_pollhandle_destroy(v->ph);
    g_string_free(v->buf, TRUE);
    g_free(v);
}

void views_append_locked(mailbox *mb, const char *line, size_t len)
{
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        g_string_append_len(v->buf, line, (gssize)len);
        if (v->ph && mb->hooks.poll_wake) {
            mb->hooks.poll_wake(mb->hooks.ud, v->ph);
            v->ph = NULL;
        }
    }
}

void views_free_all(mailbox *mb)
{
    g_list_free_full(mb->views, (GDestroyNotify)view_free);
    mb->views = NULL;
}

mb_view *mb_view_open(mailbox *mb, pid_t pid)
{
    mb_view *v = g_new0(mb_view, 1);
    int64_t now = env_now_ms();
    v->pid = pid;
    g_mutex_lock(mb->lock);
    v->buf = g_string_sized_new(mb->held_bytes + 1);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        if (m->expires_ms <= now || m->owner == HELD_ASKED)
            continue; /* past its expiresAt: never shown (the sweeper drops it); an
                         asker's answer: its asker's alone */
        g_string_append_len(v->buf, m->line, (gssize)m->line_len);
    }
    mb->views = g_list_prepend(mb->views, v);
    g_mutex_unlock(mb->lock);
    return v;
}

/* Drop what the reader left VIEW_KEEP bytes behind (lock held). */
static void view_trim(mb_view *v)
{
    size_t behind = v->read_hi - v->base;
    if (behind <= 2 * VIEW_KEEP)
        return;
    g_string_erase(v->buf, 0, (gssize)(behind - VIEW_KEEP));
    v->base += behind - VIEW_KEEP;
}

size_t mb_view_read(mailbox *mb, mb_view *v, char *buf, size_t size, off_t off)
{
    size_t n = 0, end;
    g_mutex_lock(mb->lock);
    end = v->base + v->buf->len;
    if (off >= 0 && (size_t)off >= v->base && (size_t)off < end) {
        n = MIN(size, end - (size_t)off);
        memcpy(buf, v->buf->str + ((size_t)off - v->base), n);
    }
    if (off >= 0 && (size_t)off + n > v->read_hi) {
        v->read_hi = MIN((size_t)off + n, end);
        view_trim(v);
    }
    g_mutex_unlock(mb->lock);
    return n;
}

unsigned mb_view_poll(mailbox *mb, mb_view *v, struct fuse_pollhandle *ph)
{
    unsigned ev = 0;
    g_mutex_lock(mb->lock);
    if (v->read_hi < v->base + v->buf->len)
        ev = POLLIN | POLLRDNORM;
    if (ph) {
        if (v->ph)
            fuse_pollhandle_destroy(v->ph);
        v->ph = ph;
    }
    g_mutex_unlock(mb->lock);
    return ev;
}

void mb_view_close(mailbox *mb, mb_view *v)
{
    g_mutex_lock(mb->lock);
    mb->views = g_list_remove(mb->views, v);
    g_mutex_unlock(mb->lock);
    view_free(v);
}

size_t mb_inbox_size(mailbox *mb, pid_t pid)
{
    size_t size = 0;
    bool own = false;
    g_mutex_lock(mb->lock);
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        if (v->pid == pid) {
            size_t vs = v->base + v->buf->len;
            size = own ? MAX(size, vs) : vs;
            own = true;
        }
    }
    if (!own)
        size = mb->held_bytes;
    g_mutex_unlock(mb->lock);
    return size;
}
