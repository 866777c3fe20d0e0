/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/held.c — held messages: what the broker delivered to us and we
 * have not consumed (at most `prefetch` of them).
 *
 * Each carries the consumer generation and delivery tag of its latest
 * delivery.  Delivery tags belong to one consumer channel, and the broker
 * thread gives every channel open its own generation: a message that comes
 * again on a new generation is a redelivery (same message, new tag; an open
 * `tail -f inbox` does not print it twice), the same msgId twice on one
 * generation is a second publish.  Messages of an old generation that are
 * not redelivered within STALE_GRACE_MS of a working consumer are forgotten
 * (consumed elsewhere).
 *
 * Ownership (mb_int.h): a message is FREE or claimed by the injector
 * (TYPING).  The ack file consumes FREE messages only; the injector
 * consumes only what it claimed; a redelivery changes the tag, never the
 * owner.  Consuming happens under the lock in one step — history written,
 * receipt queued durably, message removed — and the broker ack follows
 * after unlocking.  If that ack is lost (the connection or channel went
 * down first), the broker redelivers the message, the seen set has its
 * msgId as consumed, and the redelivery is acked instead of shown.
 *
 * What comes again.  The broker's `redelivered` flag decides nothing about
 * showing: the seen set (accept.c) records what became of each msgId.
 *   - held now: the same consumer generation means a second publish
 *     (`duplicate`); a new one is the broker's redelivery (retagged);
 *   - consumed: never shown again.  A copy on the very generation whose
 *     channel its ack went out on cannot be the broker's redelivery
 *     (the broker redelivers only on another channel): `replayed`.  On
 *     another generation a flagged copy may be our own ack lost with a
 *     channel, so it is acked quietly (a laundered replay is dropped the
 *     same way: not shown, not typed, not dead-lettered); so is the first
 *     copy on another generation, flagged or not, of one whose ack could
 *     not be sent at all (no connection: ACK_NOT_SENT; the broker still
 *     holds it, and LavinMQ forgets the flag across its own restart), or
 *     went out among the last of a channel that then ended (ACK_IN_DOUBT,
 *     accept.c: a broker killed with the ack unread gives the message
 *     back, LavinMQ without the flag); any other unflagged one is
 *     `replayed`, and so is a second copy on that generation;
 *   - delivered before and never consumed (held when fleetfs stopped, or
 *     forgotten by the tick): ours coming back, shown again whatever the
 *     flag says (LavinMQ forgets the flag across its own restart);
 *   - refused before, or never seen: judged afresh, shown if it passes;
 *   - a msgId from a seen file older than states (SEEN_LEGACY): as before
 *     them, shown again only when flagged, else `replayed`.
 *
 * Expiry (SPEC 4; issue 36): after its expiresAt by this host's clock a
 * message is never typed or shown.  One that arrives past it is consumed
 * at once as `expired` (never held); a held one is consumed so by the
 * sweeper (held_expire, every tick and before an ack or an inbox open),
 * and by the injector right before it would type it (mb_expire_claimed).
 * Consumed as `expired` means what any consumer does: a history line, a
 * signed receipt `expired` to the sender ("dropped unread by <me>"), the
 * seen set, the broker ack.
 */
#include "fleetfs/model/mb_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

static void held_free(held_msg *m)
{
    env_free(&m->env);
    g_free(m->line);
    g_free(m);
}

/* The one place a held message leaves `held`. */
void held_remove_locked(mailbox *mb, held_msg *m)
{
    /* an asker's answer is not in the inbox: its line was never counted */
    size_t shown = m->owner == HELD_ASKED ? 0 : m->line_len;
    assert(mb->held_bytes >= shown);
    g_queue_remove(&mb->held, m);
    g_hash_table_remove(mb->held_ids, m->env.msgId);
    mb->held_bytes -= shown;
    assert(mb->held.length > 0 || mb->held_bytes == 0);
    held_free(m);
    mb_touch_locked(mb, MB_INBOX);
}

void held_free_all(mailbox *mb)
{
    held_msg *m;
    while ((m = g_queue_pop_head(&mb->held)))
        held_free(m);
    g_hash_table_remove_all(mb->held_ids);
    mb->held_bytes = 0;
}

static bool link_ok(const br_status *st)
{
    return st->link == BR_CONNECTED && st->consumer == BR_CONS_OK;
}

/* What the current generation delivered can be acked: its channel is open,
 * also while the consumer is paused (a receipt queue that cannot be
 * consumed cancels the mailbox consumer and keeps the channel, issue 16). */
static bool acks_ok(const br_status *st)
{
    return st->link == BR_CONNECTED && st->acks_open;
}

/* ------------------------------------------------------------------ */
/* arrivals                                                            */

/* Lock held, and released here: count, log once and dead-letter e. */
static br_action refuse_locked(mailbox *mb, envelope *e, const char *reason, const char *why)
{
    mb_count_rejection_locked(mb, reason);
    g_mutex_unlock(mb->lock);
    log_warn("inbox: rejected %s from %s (%s: %s); it goes to fleet.dlq", e->msgId, e->from, reason,
             why);
    env_free(e);
    mb_changed(mb, "status");
    return BR_REJECT;
}

/* Lock held, and released here: e is a second copy of a message held from
 * the same consumer channel (its sender's resend after ETIMEDOUT: the same
 * signed envelope; or a replay of it).  Counted (rejected_duplicate) and
 * dropped, acked rather than dead-lettered: its dead letter would go home
 * and tell the sender its message died while the first copy waits here,
 * whose fate the sender hears in its receipt (issue 43). */
static br_action drop_duplicate_locked(mailbox *mb, envelope *e)
{
    gpointer old = g_hash_table_lookup(mb->h->rejections, "duplicate");
    g_hash_table_replace(mb->h->rejections, g_strdup("duplicate"),
                         GUINT_TO_POINTER(GPOINTER_TO_UINT(old) + 1));
    mb->n.rejected++;
    g_mutex_unlock(mb->lock);
    log_warn("inbox: rejected %s from %s (duplicate: a second copy while the first is held); "
             "dropped, not dead-lettered: the copy held here is the one whose fate its sender "
             "is told",
             e->msgId, e->from);
    env_free(e);
    mb_changed(mb, "status");
    return BR_ACK;
}

/* Lock held: a verified sender's message was refused by a check.  It gets
 * a history line and a `rejected` receipt (`expired` for the reason
 * expired) once per msgId, within the
 * sender's refusal budget; never about a msgId consumed or held here (its
 * sender has, or will get, the receipt that says what became of it: a
 * refusal of a late copy would contradict it). */
static void report_refusal_locked(mailbox *mb, const envelope *e, const char *reason,
                                  const char *why)
{
    char now[40], detail[400];
    const char *how;
    seen_state st = accept_seen_locked(mb, e->msgId, NULL);
    if (st == SEEN_CONSUMED || st == SEEN_REFUSED || g_hash_table_contains(mb->held_ids, e->msgId))
        return;
    accept_record_locked(mb, e->msgId, SEEN_REFUSED, 0);
    if (!accept_refusal_allowed_locked(mb, e->from))
        return;
    env_time_format(env_now_ms(), now);
    snprintf(detail, sizeof detail, "%s: %s", reason, why);
    /* more than 5 minutes past its expiresAt (a redriven dead letter):
     * what became of it is that it expired, not that it was refused
     * (issue 43) */
    how = !strcmp(reason, "expired") ? "expired" : "rejected";
    history_add_locked(mb, e, now, how, !strcmp(how, "expired") ? detail : reason);
    outbox_queue_locked(mb, e, how, detail);
}

/* asked: the answer to an open ask, kept for its asker (not shown) */
static void held_add_locked(mailbox *mb, envelope *e, uint64_t gen, uint64_t tag, bool redelivered,
                            bool asked)
{
    held_msg *m = g_new0(held_msg, 1);
    m->env = *e;
    m->gen = gen;
    m->tag = tag;
    m->redelivered = redelivered;
    m->owner = asked ? HELD_ASKED : HELD_FREE;
    if (env_time_parse(m->env.expiresAt, &m->expires_ms) < 0)
        m->expires_ms = INT64_MAX; /* accept_lifetime parsed it: not reached */
    env_time_format(env_now_ms(), m->received_at);
    m->line = env_inbox_line(&m->env, m->received_at, redelivered, &m->line_len);
    g_queue_push_tail(&mb->held, m);
    g_hash_table_insert(mb->held_ids, m->env.msgId, m);
    mb->n.received++;
    if (asked)
        return;
    mb->held_bytes += m->line_len;
    mb_touch_locked(mb, MB_INBOX);
    views_append_locked(mb, m);
}

bool held_release_asked_locked(mailbox *mb, held_msg *m)
{
    if (m->owner != HELD_ASKED)
        return false;
    m->owner = HELD_FREE;
    mb->held_bytes += m->line_len;
    mb_touch_locked(mb, MB_INBOX);
    /* past its expiresAt: never shown (held_expire consumes it as expired;
     * issue 43) */
    if (m->expires_ms <= env_now_ms())
        return false;
    views_append_locked(mb, m);
    return true;
}

/* Whether e is past its expiresAt by this host's clock. */
static bool expired_now(const envelope *e)
{
    int64_t exp;
    return env_time_parse(e->expiresAt, &exp) == 0 && exp <= env_now_ms();
}

/* The receipt's detail for a message dropped here at its expiresAt: unread,
 * or (a reader of an open inbox read its line, views.c) shown, then
 * expired: nobody acked or typed it (issue 43). */
static void expired_words(const mailbox *mb, const envelope *e, bool shown, char *out, size_t n)
{
    char now[40];
    env_time_format(env_now_ms(), now);
    if (shown)
        snprintf(out, n,
                 "shown, then expired: a reader of %s's inbox read it, nobody acked it; dropped "
                 "by %s at %s (its clock): past its expiresAt %s",
                 mb->id, mb->id, now, e->expiresAt);
    else
        snprintf(out, n, "dropped unread by %s at %s (its clock): past its expiresAt %s", mb->id,
                 now, e->expiresAt);
}

br_action mb_deliver(mailbox *mb, uint64_t gen, uint64_t tag, bool redelivered, const char *body,
                     size_t len)
{
    envelope e;
    char why[300], sender[ADDR_MAX_LEN + 1];
    const char *reason;
    bool verified;
    held_msg *m;
    seen_state st;
    uint64_t acked_on;
    bool asked;

    if (env_decode(body, len, mb->o->max_message, &e, why, sizeof why) < 0) {
        char id[ENV_ID_LEN + 1], from[64];
        env_peek(body, len, id, from);
        g_mutex_lock(mb->lock);
        mb_count_rejection_locked(mb, "malformed");
        g_mutex_unlock(mb->lock);
        log_warn("inbox: rejected message %s claiming to be from %s (malformed: %s); it goes to "
                 "fleet.dlq",
                 id, from, why);
        mb_changed(mb, "status");
        return BR_REJECT;
    }
    g_mutex_lock(mb->lock);
    /* a delivery on a newer channel: the acks that went out last on the
     * old one may never have reached the broker */
    accept_doubt_roll_locked(mb->seen, &mb->doubt, gen);
    reason = accept_check_locked(mb, &e, &verified, why, sizeof why);
    if (reason) {
        /* history and a receipt only for what a verified sender sent us
         * (an unverified sender's bytes are not worth keeping), and never
         * about a receipt; the receipt's detail starts with the reason
         * word, so a peer can act on it */
        if (verified && !strcmp(e.type, ENV_TYPE_COORD))
            report_refusal_locked(mb, &e, reason, why);
        return refuse_locked(mb, &e, reason, why);
    }
    if (g_str_has_prefix(e.to, GROUP_PREFIX)) {
        /* a broadcast from one of this host's own entities: the broker
         * copied it here too, but a sender does not get its own broadcast */
        char host[NAME_MAX_LEN + 1];
        if (id_host(e.from, host) && !strcmp(host, mb->o->coord_id)) {
            g_mutex_unlock(mb->lock);
            env_free(&e);
            return BR_ACK;
        }
    }
    m = g_hash_table_lookup(mb->held_ids, e.msgId);
    if (m && m->gen == gen)
        return drop_duplicate_locked(mb, &e);
    if (m) {
        /* a redelivery on a new consumer channel: same message, new tag;
         * whoever owns it keeps it */
        m->gen = gen;
        m->tag = tag;
        g_mutex_unlock(mb->lock);
        env_free(&e);
        return BR_KEEP;
    }
    st = accept_seen_locked(mb, e.msgId, &acked_on);
    if (st == SEEN_CONSUMED) {
        if ((acked_on == ACK_NOT_SENT || acked_on == ACK_IN_DOUBT) && gen != acked_on) {
            accept_record_locked(mb, e.msgId, SEEN_CONSUMED, gen);
            accept_doubt_note_locked(mb, mb->seen, &mb->doubt, e.msgId, gen);
            g_mutex_unlock(mb->lock);
            log_info("inbox: %s was already consumed and its ack %s: this is the broker's copy "
                     "coming back%s; acking it without showing it",
                     e.msgId,
                     acked_on == ACK_NOT_SENT
                         ? "could not be sent (no connection)"
                         : "went out just before its consumer channel ended (the broker may "
                           "never have taken it)",
                     redelivered ? ""
                                 : " (without the redelivered flag, as LavinMQ "
                                   "sends it after its own restart)");
            env_free(&e);
            return BR_ACK;
        }
        if (redelivered && acked_on != gen) {
            accept_record_locked(mb, e.msgId, SEEN_CONSUMED, gen);
            accept_doubt_note_locked(mb, mb->seen, &mb->doubt, e.msgId, gen);
            g_mutex_unlock(mb->lock);
            log_info("inbox: %s was already consumed (its ack was lost with a connection or "
                     "channel, or this is a replay); acking it without showing it",
                     e.msgId);
            env_free(&e);
            return BR_ACK;
        }
        return refuse_locked(mb, &e, "replayed",
                             acked_on == gen
                                 ? "consumed here, and acked on this very consumer channel: "
                                   "a copy published again"
                                 : "consumed here before, and this copy is not the broker's "
                                   "redelivery");
    }
    if (st == SEEN_LEGACY && !redelivered)
        return refuse_locked(mb, &e, "replayed", "this msgId was received before");
    if (expired_now(&e)) {
        /* past its expiresAt by this clock (within the skew accept_lifetime
         * allows): consumed unread, never shown */
        char now[40], detail[256];
        env_time_format(env_now_ms(), now);
        expired_words(mb, &e, false, detail, sizeof detail);
        history_add_locked(mb, &e, now, "expired", detail);
        outbox_queue_locked(mb, &e, "expired", detail);
        accept_record_locked(mb, e.msgId, SEEN_CONSUMED, gen);
        accept_doubt_note_locked(mb, mb->seen, &mb->doubt, e.msgId, gen);
        mb->n.expired++;
        g_mutex_unlock(mb->lock);
        log_info("inbox: %s from %s arrived past its expiresAt %s: dropped unread, not shown "
                 "or typed; %s is told it expired",
                 e.msgId, e.from, e.expiresAt, e.from);
        env_free(&e);
        mb_changed(mb, "status");
        return BR_ACK;
    }
    accept_record_locked(mb, e.msgId, SEEN_DELIVERED, 0);
    g_strlcpy(sender, e.from, sizeof sender);
    asked = ask_claim_locked(mb, &e);
    held_add_locked(mb, &e, gen, tag, redelivered || st == SEEN_DELIVERED || st == SEEN_LEGACY,
                    asked);
    g_mutex_unlock(mb->lock);
    if (mb->hooks.heard_from)
        mb->hooks.heard_from(mb->hooks.ud, sender);
    if (asked) {
        /* its asker's alone: not in the inbox, not for the injector */
        mb_changed(mb, mb->lead_status_path);
        mb_changed(mb, "status");
        return BR_KEEP;
    }
    mb_changed(mb, mb->inbox_path);
    mb_changed(mb, mb->lead_status_path);
    mb_changed(mb, "status");
    if (mb->hooks.arrived)
        mb->hooks.arrived(mb->hooks.ud);
    return BR_KEEP;
}

/* ------------------------------------------------------------------ */
/* consuming                                                           */

typedef struct {
    char msg_id[ENV_ID_LEN + 1];
    uint64_t gen, tag;
} ack_item;

/* Lock held: record m as consumed (`how`), queue its receipt, remove it;
 * returns what the broker must be told. */
static ack_item consume_locked(mailbox *mb, held_msg *m, const char *how, const char *detail)
{
    ack_item it;
    g_strlcpy(it.msg_id, m->env.msgId, sizeof it.msg_id);
    it.gen = m->gen;
    it.tag = m->tag;
    history_add_locked(mb, &m->env, m->received_at, how, detail);
    outbox_queue_locked(mb, &m->env, how, detail);
    /* never shown again; the generation its ack goes out on tells a
     * replay on that channel from our own ack lost with it */
    accept_record_locked(mb, m->env.msgId, SEEN_CONSUMED, m->gen);
    if (!strcmp(how, "injected"))
        mb->n.injected++;
    else if (!strcmp(how, "acked"))
        mb->n.acked++;
    else if (!strcmp(how, "expired"))
        mb->n.expired++;
    held_remove_locked(mb, m);
    return it;
}

/* No lock: ack the broker copies; a failure is logged, never retried
 * here: the redelivery is acked (the seen set has them as consumed).
 * One deadline (send_timeout) for the whole batch, not one per message: a
 * broker thread that is busy would otherwise hold `echo all > ack` for
 * prefetch times send_timeout.  An ack past the deadline is still handed
 * over (timeout 0): the broker thread carries it out later (late_ack). */
static void ack_broker(mailbox *mb, const ack_item *items, guint n)
{
    fe_code first = FE_OK;
    guint failed = 0;
    int64_t deadline = g_get_monotonic_time() / 1000 + mb->o->send_timeout_ms;
    for (guint i = 0; i < n; i++) {
        int64_t left = MAX(deadline - g_get_monotonic_time() / 1000, 0);
        fe_code r = mb->h->br.ack(mb->h->br.b, mb->box, items[i].gen, items[i].tag, left);
        uint64_t mark = 0;
        if (r != FE_OK && !failed++)
            first = r;
        g_mutex_lock(mb->lock);
        if (r != FE_NOT_CONNECTED) {
            /* sent, or handed over (FE_TIMEOUT: late_ack): among the last
             * acks of its channel, in doubt if that channel ends now */
            accept_doubt_note_locked(mb, mb->seen, &mb->doubt, items[i].msg_id, items[i].gen);
        } else if (accept_seen_locked(mb, items[i].msg_id, &mark) == SEEN_CONSUMED &&
                   mark == items[i].gen) {
            /* never sent: the broker's copy comes back (see ACK_NOT_SENT);
             * unless a redelivery was already acked on a newer channel */
            accept_record_locked(mb, items[i].msg_id, SEEN_CONSUMED, ACK_NOT_SENT);
        }
        g_mutex_unlock(mb->lock);
    }
    if (failed)
        log_warn("ack: %u of %u broker acks did not go through (%s); those messages are "
                 "consumed here, and the broker's redelivery of them will be acked",
                 failed, n, fe_name(first));
}

static void consumed_changed(mailbox *mb)
{
    mb_changed(mb, mb->inbox_path);
    mb_changed(mb, mb->lead_status_path);
    mb_changed(mb, "status");
}

/* Lock held: the messages one write to `ack` names, or why not. */
static fe_code collect_acks(mailbox *mb, gchar **lines, const br_status *st, GPtrArray *out,
                            char *detail, size_t dlen)
{
    bool all = false;
    unsigned n = 0;
    for (gchar **l = lines; *l; l++) {
        held_msg *m;
        if (!**l)
            continue;
        n++;
        if (strcmp(*l, "all") == 0) {
            all = true;
            continue;
        }
        if (!env_id_valid(*l)) {
            snprintf(detail, dlen,
                     "'%.40s' is neither a msgId (32 lowercase hex digits, as in inbox) nor 'all'",
                     *l);
            return FE_BAD_INPUT;
        }
        m = g_hash_table_lookup(mb->held_ids, *l);
        if (!m || m->owner == HELD_ASKED) {
            snprintf(detail, dlen,
                     "%s is not held in the inbox (already consumed: acked, typed, or "
                     "dropped when its expiresAt passed; see history)",
                     *l);
            return FE_NOT_HELD;
        }
        if (m->owner != HELD_FREE) {
            snprintf(detail, dlen, "%s is being typed into the pane right now", *l);
            return FE_NOT_HELD;
        }
        if (m->gen != st->epoch) {
            snprintf(detail, dlen,
                     "%s was held on a lost connection; ack it again once the broker has "
                     "redelivered it",
                     *l);
            return FE_NOT_CONNECTED;
        }
        if (!g_ptr_array_find(out, m, NULL))
            g_ptr_array_add(out, m);
    }
    if (n == 0) {
        snprintf(detail, dlen, "write one msgId per line, or 'all'");
        return FE_BAD_INPUT;
    }
    if (all) {
        g_ptr_array_set_size(out, 0);
        for (GList *l = mb->held.head; l; l = l->next) {
            held_msg *m = l->data;
            /* being typed: its owner finishes it; an old generation's
             * copy: acked once redelivered */
            if (m->owner == HELD_FREE && m->gen == st->epoch)
                g_ptr_array_add(out, m);
        }
    }
    return FE_OK;
}

fe_code mb_ack(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen)
{
    gchar *text;
    gchar **lines;
    GPtrArray *pick;
    GArray *acks;
    br_status st;
    fe_code res;

    detail[0] = '\0';
    if (memchr(data, '\0', len) || !text_utf8_valid(data, len)) {
        snprintf(detail, dlen, "the ack file takes text: msgIds or 'all'");
        log_warn("ack: %s: %s", fe_name(FE_BAD_INPUT), detail);
        return FE_BAD_INPUT;
    }
    text = g_strndup(data, len);
    lines = g_strsplit(text, "\n", -1);
    for (gchar **l = lines; *l; l++)
        g_strstrip(*l);
    pick = g_ptr_array_new();
    acks = g_array_new(FALSE, FALSE, sizeof(ack_item));
    /* what expired is dropped first: never acked as read after expiresAt */
    held_expire(mb);
    mb->h->br.status(mb->h->br.b, mb->box, &st);
    g_mutex_lock(mb->lock);
    if (!acks_ok(&st)) {
        res = FE_NOT_CONNECTED;
        snprintf(detail, dlen, "the broker is not connected: nothing was acked");
    } else {
        res = collect_acks(mb, lines, &st, pick, detail, dlen);
    }
    if (res == FE_OK) {
        for (guint i = 0; i < pick->len; i++) {
            ack_item it = consume_locked(mb, pick->pdata[i], "acked",
                                         "consumed through the ack file, not typed");
            g_array_append_val(acks, it);
        }
        mb->h->trim = mb->h->trim || pick->len >= 64;
    }
    g_mutex_unlock(mb->lock);
    if (res == FE_OK) {
        ack_broker(mb, (ack_item *)acks->data, acks->len);
        if (acks->len)
            consumed_changed(mb);
    } else {
        log_warn("ack: %s: %s", fe_name(res), detail);
    }
    g_array_free(acks, TRUE);
    g_ptr_array_free(pick, TRUE);
    g_strfreev(lines);
    g_free(text);
    return res;
}

/* ------------------------------------------------------------------ */
/* the injector's side                                                 */

bool mb_next_for_injection(mailbox *mb, envelope *out)
{
    held_msg *m = NULL;
    br_status st;
    mb->h->br.status(mb->h->br.b, mb->box, &st);
    g_mutex_lock(mb->lock);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *h = l->data;
        if (h->owner == HELD_FREE && h->gen == st.epoch) {
            m = h;
            break;
        }
    }
    if (m) {
        *out = m->env;
        out->body = g_memdup2(m->env.body, m->env.body_len + 1);
    }
    g_mutex_unlock(mb->lock);
    return m != NULL;
}

bool mb_claim(mailbox *mb, const char *msg_id, bool claim)
{
    held_msg *m;
    bool ok = false;
    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (m && claim && m->owner == HELD_FREE) {
        m->owner = HELD_TYPING;
        ok = true;
    } else if (m && !claim && m->owner == HELD_TYPING) {
        m->owner = HELD_FREE;
        ok = true;
    }
    g_mutex_unlock(mb->lock);
    return ok;
}

fe_code mb_consume(mailbox *mb, const char *msg_id, const char *how, const char *detail)
{
    held_msg *m;
    ack_item it;

    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (!m || m->owner != HELD_TYPING) {
        /* consuming requires the claim: without it the ack file may be
         * consuming the same message */
        g_mutex_unlock(mb->lock);
        return FE_NOT_HELD;
    }
    it = consume_locked(mb, m, how, detail);
    g_mutex_unlock(mb->lock);
    ack_broker(mb, &it, 1);
    consumed_changed(mb);
    return FE_OK;
}

int held_take_asked(mailbox *mb, const char *msg_id, char **body, size_t *len)
{
    held_msg *m;
    ack_item it;
    br_status st;
    bool late;
    char detail[256];

    mb->h->br.status(mb->h->br.b, mb->box, &st);
    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (!m || m->owner != HELD_ASKED) {
        g_mutex_unlock(mb->lock);
        return 0;
    }
    /* the answer's own expiresAt passed before its asker read it: never
     * shown after it, as any message (expired, its sender told) */
    late = m->expires_ms <= env_now_ms();
    if (late) {
        expired_words(mb, &m->env, false, detail, sizeof detail);
        it = consume_locked(mb, m, "expired", detail);
    } else {
        *body = g_memdup2(m->env.body, m->env.body_len + 1);
        *len = m->env.body_len;
        it = consume_locked(mb, m, "acked", "read by its asker (ask), not typed");
    }
    /* no ack can go out now (issue 43): the seen set must say so, or the
     * broker's copy, back without the redelivered flag (LavinMQ after its
     * own restart), would be refused as a replay */
    if (!acks_ok(&st) || it.gen != st.epoch)
        accept_record_locked(mb, it.msg_id, SEEN_CONSUMED, ACK_NOT_SENT);
    g_mutex_unlock(mb->lock);
    /* held on a lost connection: its redelivery is acked unseen (the seen
     * set has it as consumed) */
    if (acks_ok(&st) && it.gen == st.epoch)
        ack_broker(mb, &it, 1);
    consumed_changed(mb);
    return late ? -1 : 1;
}

/* ------------------------------------------------------------------ */

/* Lock held: forget FREE messages of an old generation that the broker
 * did not redeliver within the grace of a working consumer.  True when
 * something was dropped. */
bool held_tick_locked(mailbox *mb, const br_status *st, int64_t now)
{
    bool dropped = false;
    if (!link_ok(st)) {
        mb->ok_gen = 0;
        return false;
    }
    if (mb->ok_gen != st->epoch) {
        mb->ok_gen = st->epoch;
        mb->ok_since = now;
        return false;
    }
    if (now - mb->ok_since < STALE_GRACE_MS)
        return false;
    for (GList *l = mb->held.head, *next; l; l = next) {
        held_msg *m = l->data;
        next = l->next;
        if (m->gen == st->epoch || m->owner != HELD_FREE)
            continue;
        log_info("inbox: forgetting %s: held on a lost connection and not redelivered "
                 "(consumed elsewhere?)",
                 m->env.msgId);
        held_remove_locked(mb, m);
        dropped = true;
    }
    return dropped;
}

/* ------------------------------------------------------------------ */
/* expiry                                                              */

bool held_expire(mailbox *mb)
{
    GArray *acks = g_array_new(FALSE, FALSE, sizeof(ack_item));
    GPtrArray *words = g_ptr_array_new_with_free_func(g_free);
    int64_t now = env_now_ms();
    bool can_ack;
    br_status st;
    guint n;

    mb->h->br.status(mb->h->br.b, mb->box, &st);
    can_ack = acks_ok(&st);
    g_mutex_lock(mb->lock);
    for (GList *l = mb->held.head, *next; l; l = next) {
        held_msg *m = l->data;
        char detail[256];
        bool ack;
        ack_item it;
        next = l->next;
        /* being typed: the injector looks right before it types */
        if (m->owner != HELD_FREE || m->expires_ms > now)
            continue;
        expired_words(mb, &m->env, m->shown, detail, sizeof detail);
        g_ptr_array_add(words,
                        g_strdup_printf("%s from %s (expiresAt %s)%s", m->env.msgId, m->env.from,
                                        m->env.expiresAt,
                                        m->shown ? ", shown to a reader but not acked," : ""));
        /* held on a lost connection: its redelivery is acked unseen (the
         * seen set has it as consumed) */
        ack = can_ack && m->gen == st.epoch;
        it = consume_locked(mb, m, "expired", detail);
        if (ack)
            g_array_append_val(acks, it);
        else /* its copy is still the broker's: it comes back, flagged or not */
            accept_record_locked(mb, it.msg_id, SEEN_CONSUMED, ACK_NOT_SENT);
    }
    g_mutex_unlock(mb->lock);
    n = words->len;
    for (guint i = 0; i < words->len; i++)
        log_info("inbox: %s expired while held: dropped, never typed or shown again; its "
                 "sender is told it expired",
                 (char *)words->pdata[i]);
    if (acks->len)
        ack_broker(mb, (ack_item *)acks->data, acks->len);
    if (n)
        consumed_changed(mb);
    g_array_free(acks, TRUE);
    g_ptr_array_free(words, TRUE);
    return n > 0;
}

bool mb_expire_claimed(mailbox *mb, const char *msg_id)
{
    held_msg *m;
    ack_item it;
    char detail[256];
    br_status st;

    mb->h->br.status(mb->h->br.b, mb->box, &st);
    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (!m || m->owner != HELD_TYPING || m->expires_ms > env_now_ms()) {
        g_mutex_unlock(mb->lock);
        return false;
    }
    expired_words(mb, &m->env, m->shown, detail, sizeof detail);
    log_info("inject: %s from %s expired (expiresAt %s) before it could be typed: dropped "
             "unread, its sender is told it expired",
             m->env.msgId, m->env.from, m->env.expiresAt);
    it = consume_locked(mb, m, "expired", detail);
    if (!acks_ok(&st) || it.gen != st.epoch) /* no ack: the broker's copy comes back */
        accept_record_locked(mb, it.msg_id, SEEN_CONSUMED, ACK_NOT_SENT);
    g_mutex_unlock(mb->lock);
    if (acks_ok(&st) && it.gen == st.epoch)
        ack_broker(mb, &it, 1);
    consumed_changed(mb);
    return true;
}
