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
 *
 * Nor must a view whose reader never reads (an open file descriptor left
 * idle) keep everything that arrives: once VIEW_AHEAD bytes wait unread
 * in it, a new line is not added but counted (issue 43); when the reader
 * has read all but VIEW_AHEAD / 2 of them, one line
 * {"fleetfs":"view-overflow","dropped":N,"detail":...} is added, then
 * arrivals again.  The messages stay in the mailbox: a fresh open of the
 * inbox shows those still held.
 *
 * A view also knows which message each of its lines is (marks, in view
 * order): a read that reaches a line marks that message `shown`, so one
 * that expires after its reader saw it is receipted "shown, then expired",
 * not "dropped unread" (issue 43; held.c).  A mark is dropped once read.
 */
#include "fleetfs/model/mb_int.h"

#include <fuse.h>
#include <poll.h>
#include <string.h>

typedef struct {
    size_t start;            /* view offset of the line's first byte */
    char id[ENV_ID_LEN + 1]; /* its message */
} view_mark;

struct mb_view {
    pid_t pid;
    GArray *marks;    /* view_mark, lines not yet reached by a read */
    GString *buf;     /* the view from offset base on */
    size_t base;      /* view offset of buf->str[0] */
    size_t read_hi;   /* furthest view offset read */
    unsigned dropped; /* lines not added since the last view-overflow line */
    struct fuse_pollhandle *ph;
};

static void view_free(mb_view *v)
{
    if (v->ph)
        fuse_pollhandle_destroy(v->ph);
    g_string_free(v->buf, TRUE);
    g_array_free(v->marks, TRUE);
    g_free(v);
}

/* Lock held: m's line goes to the end of v. */
static void view_add(mb_view *v, const held_msg *m)
{
    view_mark k;
    k.start = v->base + v->buf->len;
    g_strlcpy(k.id, m->env.msgId, sizeof k.id);
    g_array_append_val(v->marks, k);
    g_string_append_len(v->buf, m->line, (gssize)m->line_len);
}

/* Lock held: the messages whose lines a read up to read_hi reached are
 * shown (those still held). */
static void view_mark_shown(mailbox *mb, mb_view *v)
{
    guint i = 0;
    for (; i < v->marks->len; i++) {
        view_mark *k = &g_array_index(v->marks, view_mark, i);
        held_msg *m;
        if (k->start >= v->read_hi)
            break;
        m = g_hash_table_lookup(mb->held_ids, k->id);
        if (m)
            m->shown = true;
    }
    if (i)
        g_array_remove_range(v->marks, 0, i);
}

/* Lock held: the view-overflow line, once the reader caught up enough */
static void view_overflow_line(mb_view *v)
{
    size_t ahead = v->base + v->buf->len - v->read_hi;
    if (!v->dropped || ahead > VIEW_AHEAD / 2)
        return;
    g_string_append_printf(v->buf,
                           "{\"fleetfs\":\"view-overflow\",\"dropped\":%u,\"detail\":\"this open "
                           "inbox had more than %d bytes unread, so %u messages that arrived "
                           "meanwhile are not in it; nothing was dropped from the mailbox: open "
                           "the inbox again for those still held (history has those consumed)\"}\n",
                           v->dropped, VIEW_AHEAD, v->dropped);
    v->dropped = 0;
}

void views_append_locked(mailbox *mb, const held_msg *m)
{
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        size_t ahead = v->base + v->buf->len - v->read_hi;
        view_overflow_line(v);
        if (v->dropped || (ahead > 0 && ahead + m->line_len > VIEW_AHEAD)) {
            v->dropped++;
            continue;
        }
        view_add(v, m);
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
    v->marks = g_array_new(FALSE, FALSE, sizeof(view_mark));
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        if (m->expires_ms <= now || m->owner == HELD_ASKED)
            continue; /* past its expiresAt: never shown (the sweeper drops it); an
                         asker's answer: its asker's alone */
        view_add(v, m);
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
    view_overflow_line(v);
    end = v->base + v->buf->len;
    if (off >= 0 && (size_t)off >= v->base && (size_t)off < end) {
        n = MIN(size, end - (size_t)off);
        memcpy(buf, v->buf->str + ((size_t)off - v->base), n);
    }
    if (off >= 0 && (size_t)off + n > v->read_hi) {
        v->read_hi = MIN((size_t)off + n, end);
        view_mark_shown(mb, v);
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
