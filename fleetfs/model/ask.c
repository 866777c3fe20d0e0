/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/ask.c — ask and answer (issue 36): a question whose answer
 * goes back to the one who asked, not into its inbox or its pane.
 *
 * An ask is one open file (peers/<x>/ask, agents/<gid>/ask).  Its one
 * write is the question, an ordinary message with a short lifetime
 * (ask_timeout, or the expiresIn of ask.json); before it is published its
 * msgId goes into the mailbox's `asks`, so no answer can overtake it.  The
 * answer is the first accepted message from the one asked whose replyTo
 * is that msgId: held.c holds it as HELD_ASKED (not in the inbox, its
 * views or held_bytes, never offered to the injector nor to the ack file)
 * until the asker takes it, which consumes it as `acked` (history, a
 * receipt to the answerer, the broker ack).  The ask then leaves `asks`.
 *
 * Ends other than an answer: the question's expiresAt passes (the tick:
 * MB_ASK_EXPIRED, the read's ETIMEDOUT; the question is expired at the
 * receiver by part 1's rules), its receiver refuses it (a `rejected`
 * receipt: MB_ASK_REFUSED), or the broker gives it back undelivered (its
 * dead letter came home, dead.c: MB_ASK_REFUSED too, at once — a receiver
 * that rejects a verified sender's question also sends the receipt, and
 * either may come first; one that died of expiry is MB_ASK_EXPIRED).
 * Nobody can answer a question in the last two, so the asker is told as
 * soon as its sent entry is (issue 43).  An answer that comes after the ask ended, or
 * after its asker closed, is an ordinary reply: held FREE, shown and
 * typed.  An answer that came and was not read when the asker closed is
 * released the same way (held_release_asked_locked), once.
 *
 * This file is the asker's side (open, the question sent, the answer
 * taken, close), above held.c and send.c; the open questions, which
 * held.c, send.c and sent.c tell what happened, are asks.c's (asks.h).
 * Everything here is under the model's lock (mb_int.h); an mb_ask belongs
 * to its opener, who frees it with mb_ask_close.  ready is called with
 * the lock held and must only enqueue.
 */
#include "fleetfs/model/asks.h"

#include <fuse_lowlevel.h>
#include <poll.h>
#include <string.h>

#include "fleetfs/base/log.h"

mb_ask *mb_ask_open(mailbox *mb, void (*ready)(void *ud), void *ud)
{
    mb_ask *a = g_new0(mb_ask, 1);
    a->mb = mb_ref(mb);
    a->ready = ready;
    a->ud = ud;
    return a;
}

/* A question's lifetime unless ask.json says: ask_timeout (opts_finish
 * resolves its default; 0 here only where nobody did) */
static int64_t ask_life(const mailbox *mb)
{
    return mb->o->ask_timeout_ms > 0 ? mb->o->ask_timeout_ms
                                     : MIN(2 * 60 * 1000, mb->o->message_ttl_ms);
}

/* A question handed over: its write is answered by done once the
 * outcome is known. */
typedef struct {
    mb_ask *a;
    mb_send_done done;
    void *ud;
} ask_job;

/* The question's outcome res (the confirm, or send_timeout's ETIMEDOUT),
 * on the broker's publishing thread, after its `sent` line: the ask goes
 * on waiting for its answer, or (not asked, or not known to be) nothing
 * is awaited and another write may try again.  Then the write is
 * answered: a read after it finds the question registered. */
static void ask_outcome(mb_ask *a, fe_code res)
{
    mailbox *mb = a->mb;
    g_mutex_lock(mb->lock);
    if (res != FE_OK) {
        /* an answer that comes all the same arrives as an ordinary reply */
        ask_unregister_locked(mb, a);
        if (a->state != ASK_ANSWERED)
            a->state = ASK_IDLE;
    } else if (a->state == ASK_SENDING) {
        a->state = ASK_WAITING; /* unless the answer or the end came first */
    }
    g_mutex_unlock(mb->lock);
    if (res == FE_OK)
        log_info("ask %s: question %s published; its answer is its asker's until it closes", a->to,
                 a->q_id);
}

static void ask_answered(void *ud, fe_code res, const char *detail)
{
    ask_job *j = ud;
    ask_outcome(j->a, res);
    j->done(j->ud, res, detail);
    g_free(j);
}

int mb_ask_send_start(mb_ask *a, const char *to, bool json, const char *data, size_t len,
                      mb_send_done done, void *ud)
{
    mailbox *mb = a->mb;
    char detail[512], *body = NULL, *reply_to = NULL;
    int64_t life = ask_life(mb);
    fe_code res = FE_OK;
    ask_job *j;

    g_mutex_lock(mb->lock);
    if (a->state != ASK_IDLE) {
        g_mutex_unlock(mb->lock);
        log_warn("ask %s: refused (EBUSY): this open ask has its question already; open the "
                 "ask file again for another question",
                 to);
        return EBUSY;
    }
    a->state = ASK_SENDING;
    g_mutex_unlock(mb->lock);
    if (json) {
        res = sent_parse_json(mb, to, "ask.json", data, len, ask_life(mb), &body, &life, &reply_to,
                              detail, sizeof detail);
    } else {
        if (len > 0 && data[len - 1] == '\n')
            len--; /* echo's newline is not part of the question */
        body = g_memdup2(data, len + 1);
        body[len] = '\0';
    }
    j = g_new0(ask_job, 1);
    j->a = a;
    j->done = done;
    j->ud = ud;
    /* FE_OK: handed over, ask_answered is told (maybe already: j is not
     * ours any more) */
    if (res == FE_OK)
        res = sent_send_start(mb, to, reply_to, body, json ? strlen(body) : len, life, a,
                              ask_answered, j, detail, sizeof detail);
    g_free(body);
    g_free(reply_to);
    if (res == FE_OK)
        return 0;
    g_free(j);
    ask_outcome(a, res);
    return fe_errno(res);
}

int mb_ask_send(mb_ask *a, const char *to, bool json, const char *data, size_t len)
{
    sent_wait w;
    fe_code res;
    int e;
    sent_wait_init(&w);
    e = mb_ask_send_start(a, to, json, data, len, sent_wait_done, &w);
    res = sent_wait_end(&w, e ? FE_INTERNAL : FE_OK, NULL, 0);
    return e ? e : fe_errno(res);
}

mb_ask_result mb_ask_take(mb_ask *a, char **body, size_t *len, char *why, size_t n)
{
    mailbox *mb = a->mb;
    char id[ENV_ID_LEN + 1];
    mb_ask_result r;

    why[0] = '\0';
    g_mutex_lock(mb->lock);
    switch (a->state) {
    case ASK_IDLE:
        r = MB_ASK_NOTHING;
        break;
    case ASK_SENDING:
    case ASK_WAITING:
        r = MB_ASK_WAITING;
        break;
    case ASK_TAKEN:
        r = MB_ASK_DONE;
        break;
    case ASK_EXPIRED:
        r = MB_ASK_EXPIRED;
        break;
    case ASK_REFUSED:
        g_strlcpy(why, a->why, n);
        r = MB_ASK_REFUSED;
        break;
    case ASK_ANSWERED:
    default:
        r = MB_ASK_ANSWERED;
        a->state = ASK_TAKEN;
        break;
    }
    g_strlcpy(id, a->a_id, sizeof id);
    g_mutex_unlock(mb->lock);
    if (r == MB_ASK_ANSWERED) {
        int took = held_take_asked(mb, id, body, len);
        if (took < 0) {
            log_info("ask %s: answer %s expired (its own expiresAt) before its asker read it: "
                     "dropped unread, the read fails ETIMEDOUT",
                     a->to, id);
            r = MB_ASK_EXPIRED;
        } else if (took == 0) {
            /* cannot happen while the ask is open: only its asker takes it */
            log_err("ask %s: the answer %s to %s was no longer held", a->to, id, a->q_id);
            *body = g_strdup("");
            *len = 0;
        } else {
            log_info("ask %s: answer %s handed to its asker and consumed", a->to, id);
        }
    }
    return r;
}

unsigned mb_ask_poll(mb_ask *a, struct fuse_pollhandle *ph)
{
    mailbox *mb = a->mb;
    unsigned ev = 0;
    g_mutex_lock(mb->lock);
    if (a->state == ASK_IDLE)
        ev = POLLOUT | POLLWRNORM;
    else if (a->state != ASK_SENDING && a->state != ASK_WAITING)
        ev = POLLIN | POLLRDNORM;
    if (ph) {
        if (a->ph)
            fuse_pollhandle_destroy(a->ph);
        a->ph = ph;
    }
    g_mutex_unlock(mb->lock);
    return ev;
}

void mb_ask_close(mb_ask *a)
{
    mailbox *mb = a->mb;
    bool released = false, expired = false;
    g_mutex_lock(mb->lock);
    if (a->q_id[0])
        ask_unregister_locked(mb, a);
    if (a->state == ASK_ANSWERED) {
        held_msg *m = g_hash_table_lookup(mb->held_ids, a->a_id);
        if (m && m->owner == HELD_ASKED) {
            released = held_release_asked_locked(mb, m);
            expired = !released;
        }
    }
    if (a->ph)
        fuse_pollhandle_destroy(a->ph);
    g_mutex_unlock(mb->lock);
    if (expired) {
        log_info("ask %s: its asker closed without reading answer %s, which is past its own "
                 "expiresAt: not shown, dropped as expired",
                 a->to, a->a_id);
        held_expire(mb);
    }
    if (released) {
        log_info("ask %s: its asker closed before reading answer %s: it goes to the inbox as "
                 "an ordinary reply",
                 a->to, a->a_id);
        mb_changed(mb, mb->inbox_path);
        mb_changed(mb, mb->lead_status_path);
        if (mb->hooks.arrived)
            mb->hooks.arrived(mb->hooks.ud);
    }
    mb_unref(mb);
    g_free(a);
}
