/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/asks.c — the open questions of a mailbox (mb->asks:
 * question msgId -> the ask waiting for its answer), and what ends one:
 * its answer arrives (held.c: ask_claim_locked), its receiver refuses it
 * or its dead letter comes home (sent.c: ask_sent_state_locked), its
 * lifetime passes (the tick: ask_tick_locked).  Each end wakes the asker.
 * send.c registers a question before it is published, so no answer can
 * overtake it.  Below held.c, send.c and sent.c: it calls none of them
 * (the asker's side, which does, is ask.c).  Everything here is under
 * the model's lock.
 */
#include "fleetfs/model/asks.h"

#include <string.h>

#include "fleetfs/base/log.h"

void ask_wake_locked(mb_ask *a)
{
    mailbox *mb = a->mb;
    if (a->ph && mb->hooks.poll_wake) {
        mb->hooks.poll_wake(mb->hooks.ud, a->ph);
        a->ph = NULL;
    }
    if (a->ready)
        a->ready(a->ud);
}

static GHashTable *asks_of(mailbox *mb)
{
    if (!mb->asks)
        mb->asks = g_hash_table_new(g_str_hash, g_str_equal);
    return mb->asks;
}

void ask_register_locked(mailbox *mb, mb_ask *a, const envelope *e)
{
    g_strlcpy(a->q_id, e->msgId, sizeof a->q_id);
    g_strlcpy(a->to, e->to, sizeof a->to);
    if (env_time_parse(e->expiresAt, &a->expires_ms) < 0)
        a->expires_ms = env_now_ms();
    g_hash_table_insert(asks_of(mb), a->q_id, a);
}

void ask_unregister_locked(mailbox *mb, mb_ask *a)
{
    if (mb->asks && g_hash_table_lookup(mb->asks, a->q_id) == a)
        g_hash_table_remove(mb->asks, a->q_id);
    a->q_id[0] = '\0';
}

bool ask_claim_locked(mailbox *mb, const envelope *e)
{
    mb_ask *a;
    if (!e->replyTo[0] || !mb->asks)
        return false;
    a = g_hash_table_lookup(mb->asks, e->replyTo);
    /* only the one asked answers; anyone else's reply is an ordinary one */
    if (!a || (a->state != ASK_SENDING && a->state != ASK_WAITING) || strcmp(e->from, a->to))
        return false;
    g_strlcpy(a->a_id, e->msgId, sizeof a->a_id);
    a->state = ASK_ANSWERED;
    g_hash_table_remove(mb->asks, a->q_id);
    log_info("ask %s: %s answers question %s; it is kept for the asker", a->to, e->msgId, a->q_id);
    ask_wake_locked(a);
    return true;
}

void ask_sent_state_locked(mailbox *mb, const char *msg_id, const char *state, const char *detail)
{
    mb_ask *a;
    bool dead = !strcmp(state, "dead-lettered");
    if (!mb->asks || (!dead && strcmp(state, "rejected") != 0))
        return;
    a = g_hash_table_lookup(mb->asks, msg_id);
    if (!a)
        return;
    /* the broker's words start with its reason (br_death_words) */
    a->state = dead && detail && g_str_has_prefix(detail, "expired") ? ASK_EXPIRED : ASK_REFUSED;
    g_strlcpy(a->why, detail ? detail : "", sizeof a->why);
    g_hash_table_remove(mb->asks, a->q_id);
    if (!dead)
        log_info("ask %s: question %s was refused by %s (%s): the asker's read fails ECONNREFUSED",
                 a->to, a->q_id, a->to, a->why);
    else
        log_info("ask %s: question %s was dead-lettered (%s): nobody will answer it; the "
                 "asker's read fails %s",
                 a->to, a->q_id, a->why, a->state == ASK_REFUSED ? "ECONNREFUSED" : "ETIMEDOUT");
    ask_wake_locked(a);
}

void ask_tick_locked(mailbox *mb)
{
    GHashTableIter it;
    gpointer k, v;
    int64_t now = env_now_ms();
    if (!mb->asks)
        return;
    g_hash_table_iter_init(&it, mb->asks);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        mb_ask *a = v;
        if (a->expires_ms > now)
            continue;
        a->state = ASK_EXPIRED;
        g_hash_table_iter_remove(&it);
        log_info("ask %s: question %s got no answer within its lifetime: the asker's read "
                 "fails ETIMEDOUT; an answer that comes later arrives as an ordinary reply",
                 a->to, a->q_id);
        ask_wake_locked(a);
    }
}
