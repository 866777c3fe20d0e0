/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/journaled.c — a message the inject journal knows whose
 * copy never came back (issue 43 item 1).
 *
 * fleetfs stopped while typing a message (the journal says injecting, or
 * injected before the ack went out), and came back only after the
 * message's expiresAt: the broker dropped the requeued copy (its
 * per-message expiration; its dead letter went home as `expired in
 * lead.<me>.inbox`), so it is never redelivered and the injector's
 * journal rule (consume it without typing) never runs.  The journal's word
 * is then the receiver's word all the same: the injector hands it here
 * once the message's expiresAt has passed, and it is consumed as if the
 * copy had come back: a history line (no body: none is kept), a receipt
 * to its sender (which replaces the broker's dead-lettered), the seen set
 * (a copy that does come back is acked unseen).  Nothing is done for a
 * msgId this mailbox holds, consumed or refused already.
 */
#include "fleetfs/model/mb_int.h"

#include <string.h>

#include "fleetfs/base/log.h"

int mb_settle_journaled(mailbox *mb, const char *msg_id, const char *from, const char *expires_at,
                        const char *how, const char *detail)
{
    envelope e;
    seen_state st;
    char now[40];
    int64_t exp;

    if (!env_id_valid(msg_id) || !*from || env_time_parse(expires_at, &exp) < 0)
        return 0;
    g_mutex_lock(mb->lock);
    st = accept_seen_locked(mb, msg_id, NULL);
    if (st == SEEN_CONSUMED || st == SEEN_REFUSED || g_hash_table_contains(mb->held_ids, msg_id)) {
        g_mutex_unlock(mb->lock);
        return 0;
    }
    if (exp > env_now_ms()) {
        /* it may still come back: the injector's journal rule takes it then */
        g_mutex_unlock(mb->lock);
        return -1;
    }
    memset(&e, 0, sizeof e);
    e.v = 1;
    g_strlcpy(e.type, ENV_TYPE_COORD, sizeof e.type);
    g_strlcpy(e.msgId, msg_id, sizeof e.msgId);
    g_strlcpy(e.from, from, sizeof e.from);
    g_strlcpy(e.to, mb->id, sizeof e.to);
    g_strlcpy(e.expiresAt, expires_at, sizeof e.expiresAt);
    env_time_format(env_now_ms(), now);
    history_add_locked(mb, &e, now, how, detail);
    outbox_queue_locked(mb, &e, how, detail);
    /* no ack of ours is owed: a copy that does come back is acked unseen */
    accept_record_locked(mb, msg_id, SEEN_CONSUMED, ACK_NOT_SENT);
    if (!strcmp(how, "injected"))
        mb->n.injected++;
    g_mutex_unlock(mb->lock);
    log_info("inject: %s from %s never came back after fleetfs stopped while typing it (the "
             "broker dropped it at its expiresAt %s): the journal's word, %s, goes to %s",
             msg_id, from, expires_at, how, from);
    mb_changed(mb, mb->history_path);
    mb_changed(mb, "status");
    return 1;
}
