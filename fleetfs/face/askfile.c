/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/askfile.c — an open ask file (peers/<x>/ask, ask.json,
 * agents/<gid>/ask, ask.json): its one write is the question, a read
 * waits for the answer (model/ask.c has the rules).
 *
 * A read that must wait is not a FUSE thread that waits: libfuse runs at
 * most ten of them, and ten askers would stop the whole mount.  The read
 * is answered later instead (the low-level API lets any thread reply): its
 * request is kept here, and the model's ready call (the answer came, the
 * question's lifetime ended, it was refused) queues a job for a small
 * pool of our own, which takes the answer (that acks the broker, so never
 * on the broker's thread) and replies.  A signal to the reader (Ctrl-C)
 * interrupts the request: it is answered EINTR and the ask stays open.
 *
 * The write is not a FUSE thread that waits either: like a send's, it is
 * handed to the broker's publishing thread, which registers the question
 * as awaited on the confirm and then answers the write (model/ask.c), or
 * answers ETIMEDOUT at send_timeout; a read after the write returned finds
 * the question registered.
 *
 * The lock is recursive: libfuse may call the interrupt function from
 * inside fuse_req_interrupt_func, which runs under it.  Order: this lock,
 * then the model's (the model's ready call takes no lock of ours).
 */
#include "fleetfs/face/askfile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>

#include "fleetfs/base/log.h"

struct askf {
    gatomicrefcount ref; /* the open file, and each queued job */
    GRecMutex lock;
    mb_ask *ask;        /* NULL once released */
    fuse_req_t pending; /* a read waiting for the answer */
    size_t want;        /* its size */
    GString *answer;    /* the answer, once taken; reads go through it */
    size_t pos;         /* how much of it was read */
    int err;            /* the end without an answer: ETIMEDOUT, ECONNREFUSED */
};

static GThreadPool *pool;

static void askf_unref(askf *a)
{
    if (!g_atomic_ref_count_dec(&a->ref))
        return;
    if (a->answer)
        g_string_free(a->answer, TRUE);
    g_rec_mutex_clear(&a->lock);
    g_free(a);
}

/* Lock held: what a read gets now: 0 and a reply sent, or EAGAIN (it
 * must wait).  A read reply that reaches no reader (interrupted meanwhile)
 * loses nothing: the answer stays here for the next read. */
static int answer_locked(askf *a, fuse_req_t req, size_t size)
{
    char *body = NULL, why[256];
    size_t len = 0, n;

    if (!a->answer && !a->err) {
        switch (mb_ask_take(a->ask, &body, &len, why, sizeof why)) {
        case MB_ASK_NOTHING:
            fuse_reply_err(req, EINVAL); /* nothing asked on this file */
            return 0;
        case MB_ASK_WAITING:
            return EAGAIN;
        case MB_ASK_EXPIRED:
            a->err = ETIMEDOUT;
            break;
        case MB_ASK_REFUSED:
            a->err = ECONNREFUSED;
            break;
        case MB_ASK_ANSWERED:
            a->answer = g_string_new_len(body, (gssize)len);
            g_free(body);
            break;
        case MB_ASK_DONE:
        default:
            a->answer = g_string_new(NULL);
            break;
        }
    }
    if (a->err) {
        fuse_reply_err(req, a->err);
        return 0;
    }
    n = MIN(size, a->answer->len - a->pos);
    if (fuse_reply_buf(req, a->answer->str + a->pos, n) == 0)
        a->pos += n;
    return 0;
}

static void on_interrupt(fuse_req_t req, void *data)
{
    askf *a = data;
    g_rec_mutex_lock(&a->lock);
    if (a->pending == req) {
        a->pending = NULL;
        fuse_reply_err(req, EINTR);
    }
    g_rec_mutex_unlock(&a->lock);
}

/* the pool: a waiting read may have its answer now */
static void run_job(gpointer data, gpointer ud)
{
    askf *a = data;
    (void)ud;
    g_rec_mutex_lock(&a->lock);
    if (a->pending && a->ask && answer_locked(a, a->pending, a->want) == 0)
        a->pending = NULL;
    g_rec_mutex_unlock(&a->lock);
    askf_unref(a);
}

/* the model's ready call (its lock held): only enqueue */
static void on_ready(void *ud)
{
    askf *a = ud;
    g_atomic_ref_count_inc(&a->ref);
    g_thread_pool_push(pool, a, NULL);
}

askf *askf_open(mailbox *mb)
{
    static gsize once;
    askf *a = g_new0(askf, 1);
    if (g_once_init_enter(&once)) {
        /* a few threads: each may wait up to send_timeout for a broker ack */
        pool = g_thread_pool_new(run_job, NULL, 4, FALSE, NULL);
        g_once_init_leave(&once, 1);
    }
    g_atomic_ref_count_init(&a->ref);
    g_rec_mutex_init(&a->lock);
    a->ask = mb_ask_open(mb, on_ready, a);
    return a;
}

int askf_write(askf *a, const char *to, bool json, const char *buf, size_t size, mb_send_done done,
               void *ud)
{
    /* not under our lock: a read waits beside the write */
    return mb_ask_send_start(a->ask, to, json, buf, size, done, ud);
}

void askf_read(askf *a, fuse_req_t req, size_t size, int flags)
{
    g_rec_mutex_lock(&a->lock);
    if (a->pending) {
        fuse_reply_err(req, EBUSY); /* one read at a time waits on an ask */
    } else if (answer_locked(a, req, size) == EAGAIN) {
        if (flags & O_NONBLOCK) {
            fuse_reply_err(req, EAGAIN);
        } else {
            a->pending = req;
            a->want = size;
            /* may call on_interrupt at once (already interrupted) */
            fuse_req_interrupt_func(req, on_interrupt, a);
        }
    }
    g_rec_mutex_unlock(&a->lock);
}

unsigned askf_poll(askf *a, struct fuse_pollhandle *ph)
{
    unsigned ev;
    g_rec_mutex_lock(&a->lock);
    ev = a->answer || a->err ? POLLIN | POLLRDNORM : mb_ask_poll(a->ask, ph);
    if ((a->answer || a->err) && ph)
        fuse_pollhandle_destroy(ph);
    g_rec_mutex_unlock(&a->lock);
    return ev;
}

void askf_release(askf *a)
{
    g_rec_mutex_lock(&a->lock);
    if (a->pending) {
        /* cannot happen: the kernel releases a file no read is in */
        fuse_reply_err(a->pending, EINTR);
        a->pending = NULL;
    }
    mb_ask_close(a->ask);
    a->ask = NULL;
    g_rec_mutex_unlock(&a->lock);
    askf_unref(a);
}
