/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/accept.c — acceptance: what may enter the inbox.
 *
 * The checks of SPEC section 4, in its order: the signature against the
 * key trusted for `from` (the trust directory is re-read when an unknown
 * sender shows up and the directory changed: a peer's .pub was just copied
 * in), the type, the recipient, a lifetime no longer than message_ttl that
 * does not start in the future, not expired; then, once redeliveries are
 * told apart (held.c), not a replay.
 *
 * The replay guard is two persisted seen sets (store/seen.h): one for
 * messages, recording what became of each msgId (delivered, consumed,
 * refused; held.c decides with it), and one for the receipts applied here
 * (receipts.c), so that a flood of one cannot flush the other.  At start
 * the message set learns what history knows and it does not (a file from
 * before states, or a deleted one), so an upgrade does not forget what was
 * consumed.  A seen set that cannot be written is not silent: status shows
 * it, and the log says so once per failure streak.
 *
 * Acks in doubt.  AMQP never confirms an ack: a broker that dies right
 * after one went out may never have read it, and gives the message back
 * after its restart (LavinMQ without the `redelivered` flag, which it
 * forgets across its restart).  A broker holds at most `prefetch`
 * unacknowledged messages of one consumer, so the acks it can have missed
 * are among the last `prefetch` that went out on that consumer channel.
 * So each entity keeps the msgIds of its last prefetch + DOUBT_SLACK acks
 * of the current channel (and the host those of its receipt queue); once
 * a delivery or an ack shows a newer channel, those still marked with the
 * old one become ACK_IN_DOUBT, and the first copy of each on a later
 * channel, flagged or not, is acked without being shown or applied (a
 * second copy there is a replay).  What this gives up: a replay of one of
 * those few msgIds, arriving first on the next channel, is dropped
 * unseen instead of dead-lettered; nothing consumed is ever shown again.
 *
 * Refusals of a verified sender's messages get a history line and a
 * receipt (held.c) only within a per-sender budget: REFUSAL_BURST, then
 * one per REFUSAL_EVERY_MS; beyond it they are still dead-lettered and
 * counted, and the log says once per streak that receipts are held back.
 */
#include "fleetfs/model/mb_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"

/* history.c names a consumed (or refused) msgId the seen set lacks */
static void seed_from_history(mailbox *mb, const char *msg_id, const char *how)
{
    seen_state now = seen_get(mb->seen, msg_id, NULL);
    seen_state st = strcmp(how, "rejected") == 0 ? SEEN_REFUSED : SEEN_CONSUMED;
    if (now == SEEN_CONSUMED || now == st)
        return;
    accept_record_locked(mb, msg_id, st, 0);
}

static seen_set *open_set(mailbox *mb, const char *name, const seen_caps *caps, char **err)
{
    char *path = g_build_filename(mb->state_dir, name, NULL);
    seen_set *s = seen_open(path, caps, err);
    g_free(path);
    return s;
}

int accept_open_entity(mailbox *mb, char **err)
{
    const seen_caps msg_caps = {SEEN_DELIVERED_CAP, SEEN_CAP, SEEN_REFUSED_CAP};
    mb->seen = open_set(mb, "seen", &msg_caps, err);
    if (!mb->seen)
        return -1;
    g_mutex_lock(mb->lock);
    history_each_locked(mb, seed_from_history);
    g_mutex_unlock(mb->lock);
    return 0;
}

int accept_open_seen(mailbox *mb, char **err)
{
    const seen_caps receipt_caps = {0, RECEIPTS_SEEN_CAP, 0};
    if (accept_open_entity(mb, err) < 0)
        return -1;
    /* the host's own: one receipt queue (the lead's state_dir) */
    mb->h->receipts_seen = open_set(mb, "seen.receipts", &receipt_caps, err);
    if (!mb->h->receipts_seen)
        return -1;
    return 0;
}

int accept_open_keys(mailbox *mb, char **err)
{
    if (mb->o->insecure)
        return 0;
    if (!mb->o->key || !mb->o->trusted_keys) {
        *err = g_strdup_printf(
            "messages are signed and checked, so fleetfs needs -o key=FILE (make one with "
            "'fleetfs keygen FILE') and -o trusted_keys=DIR (the peers' <coord_id>.pub files); "
            "-o insecure turns this off for local experiments only");
        return -1;
    }
    mb->h->key = sig_load_secret(mb->o->key, err);
    if (!mb->h->key)
        return -1;
    mb->h->trust_loaded = sig_trust_stamp(mb->o->trusted_keys); /* before: see sign.h */
    mb->h->trust = sig_trust_load(mb->o->trusted_keys, err);
    if (!mb->h->trust)
        return -1;
    if (sig_trust_has(mb->h->trust, mb->o->coord_id) &&
        !sig_key_matches(mb->h->trust, mb->o->coord_id, mb->h->key))
        log_warn("security: %s/%s.pub is not the public half of %s; peers that trust that "
                 "file will reject this host's messages",
                 mb->o->trusted_keys, mb->o->coord_id, mb->o->key);
    else if (!sig_trust_has(mb->h->trust, mb->o->coord_id))
        log_warn(
            "security: trusted_keys %s has no %s.pub, this lead's own public key: its own "
            "heartbeats are rejected here and every peer needs it too; run: cp %s.pub %s/%s.pub",
            mb->o->trusted_keys, mb->o->coord_id, mb->o->key, mb->o->trusted_keys, mb->o->coord_id);
    return 0;
}

char *mb_security_words(mailbox *mb)
{
    char *w;
    if (mb->o->insecure)
        return g_strdup("INSECURE (-o insecure): messages are neither signed nor checked; "
                        "anyone with broker access can type into this lead's pane");
    g_mutex_lock(mb->lock);
    accept_trust_fresh_locked(mb, true); /* the count follows the directory */
    w = g_strdup_printf("on (ed25519; %zu trusted keys in %s)", sig_trust_count(mb->h->trust),
                        mb->o->trusted_keys);
    g_mutex_unlock(mb->lock);
    return w;
}

void accept_close(mb_host *h)
{
    sig_key_free(h->key);
    sig_trust_free(h->trust);
    seen_close(h->receipts_seen);
    accept_doubt_free(&h->receipt_doubt);
}

void accept_trust_fresh_locked(mailbox *mb, bool force)
{
    char *err = NULL;
    size_t before;
    int r;

    if (!mb->h->trust)
        return; /* -o insecure */
    before = sig_trust_count(mb->h->trust);
    r = sig_trust_refresh(&mb->h->trust, mb->o->trusted_keys, true, &mb->h->trust_loaded,
                          &mb->h->trust_checked, force, &err);
    if (r > 0)
        log_info("security: trusted_keys %s changed: %zu trusted keys now (%zu before)",
                 mb->o->trusted_keys, sig_trust_count(mb->h->trust), before);
    else if (r < 0) {
        log_warn("security: cannot re-read trusted_keys %s: %s; the %zu keys read before stay "
                 "trusted until it can be read",
                 mb->o->trusted_keys, err, before);
        g_free(err);
    }
}

sig_result accept_verify_locked(mailbox *mb, const envelope *e)
{
    sig_result r;
    accept_trust_fresh_locked(mb, false);
    r = sig_verify(mb->h->trust, e);
    /* a key added or replaced since the last look: look now */
    if (r == SIG_UNKNOWN_KEY || r == SIG_BAD) {
        int64_t was = mb->h->trust_loaded;
        accept_trust_fresh_locked(mb, true);
        if (mb->h->trust_loaded != was)
            r = sig_verify(mb->h->trust, e);
    }
    return r;
}

const char *accept_check_locked(mailbox *mb, const envelope *e, bool *verified, char *why, size_t n)
{
    *verified = mb->o->insecure;
    if (!mb->o->insecure) {
        sig_result r = accept_verify_locked(mb, e);
        if (r != SIG_OK) {
            snprintf(why, n, "%s",
                     r == SIG_UNSIGNED      ? "no signature"
                     : r == SIG_UNKNOWN_KEY ? "no trusted key for the sender in trusted_keys"
                                            : "the signature does not match the sender's key");
            return sig_result_name(r);
        }
        *verified = true;
    }
    if (strcmp(e->type, ENV_TYPE_COORD) != 0) {
        snprintf(why, n, "a %s envelope arrived in a mailbox", e->type);
        return "wrong-type";
    }
    /* to this entity, or a broadcast to a group it is in: the broker
     * copied it into every mailbox bound to that group's key */
    if (!addr_matches(e->to, mb->id, (const char *const *)mb->groups)) {
        if (g_str_has_prefix(e->to, GROUP_PREFIX))
            snprintf(why, n,
                     "a broadcast to '%s' arrived in the mailbox of %s, which is not in "
                     "that group",
                     e->to, mb->id);
        else
            snprintf(why, n, "addressed to '%s', not to %s", e->to, mb->id);
        return "wrong-recipient";
    }
    return accept_lifetime(mb, e, why, n);
}

const char *accept_lifetime(mailbox *mb, const envelope *e, char *why, size_t n)
{
    int64_t exp, sent, now = env_now_ms();
    if (env_time_parse(e->expiresAt, &exp) < 0 || env_time_parse(e->sentAt, &sent) < 0 ||
        exp - sent > mb->o->message_ttl_ms + CLOCK_SKEW_MS) {
        snprintf(why, n, "lifetime from %s to %s is longer than message_ttl", e->sentAt,
                 e->expiresAt);
        return "bad-lifetime";
    }
    /* a sentAt in the future would stretch how long a capture stays
     * usable past what the lifetime rule allows */
    if (sent > now + CLOCK_SKEW_MS) {
        snprintf(why, n, "sentAt %s is in the future (more than 5 minutes ahead of this clock)",
                 e->sentAt);
        return "bad-lifetime";
    }
    if (exp + CLOCK_SKEW_MS < now) {
        snprintf(why, n, "expired at %s", e->expiresAt);
        return "expired";
    }
    return NULL;
}

/* Lock held: a seen set write failed (r < 0) or worked; say so once. */
static void seen_written_locked(mailbox *mb, int r, const char *msg_id)
{
    if (r < 0) {
        /* remembered in memory, not on disk: a restart would forget it */
        if (!mb->h->seen_err[0])
            log_warn("security: cannot record %s in the seen set (%s); a replay of it after a "
                     "restart would not be caught: free space or fix permissions in %s",
                     msg_id, g_strerror(errno), mb->state_dir);
        snprintf(mb->h->seen_err, sizeof mb->h->seen_err, "%s", g_strerror(errno));
        return;
    }
    if (mb->h->seen_err[0]) {
        log_info("security: the seen set is written again");
        mb->h->seen_err[0] = '\0';
    }
}

seen_state accept_seen_locked(mailbox *mb, const char *msg_id, uint64_t *acked_on)
{
    return seen_get(mb->seen, msg_id, acked_on);
}

void accept_record_locked(mailbox *mb, const char *msg_id, seen_state st, uint64_t acked_on)
{
    int r = seen_put(mb->seen, msg_id, st, acked_on);
    if (r != 1)
        seen_written_locked(mb, r, msg_id);
}

bool accept_receipt_seen_locked(mailbox *mb, const char *msg_id, uint64_t gen, bool redelivered,
                                bool *again)
{
    seen_set *s = mb->h->receipts_seen;
    ack_doubt *d = &mb->h->receipt_doubt;
    uint64_t mark = 0;
    int r;
    *again = false;
    accept_doubt_roll_locked(s, d, gen);
    if (seen_get(s, msg_id, &mark) != SEEN_NONE) {
        /* flagged: the broker's copy coming back (a receipt cannot be
         * shown twice, only applied twice); unflagged: ours only when its
         * ack went out right before its channel ended, once */
        if (!redelivered && !(mark == ACK_IN_DOUBT && gen != ACK_IN_DOUBT))
            return true;
        *again = true;
        seen_put(s, msg_id, SEEN_CONSUMED, gen);
        accept_doubt_note_locked(mb, s, d, msg_id, gen);
        return true;
    }
    r = seen_put(s, msg_id, SEEN_CONSUMED, gen);
    seen_written_locked(mb, r, msg_id);
    accept_doubt_note_locked(mb, s, d, msg_id, gen);
    return false;
}

/* ------------------------------------------------------------------ */
/* acks the broker may not have taken                                  */

void accept_doubt_roll_locked(seen_set *s, ack_doubt *d, uint64_t gen)
{
    char *id;
    uint64_t mark;
    if (gen <= d->gen)
        return;
    while ((id = g_queue_pop_head(&d->ids))) {
        if (seen_get(s, id, &mark) == SEEN_CONSUMED && mark == d->gen)
            seen_put(s, id, SEEN_CONSUMED, ACK_IN_DOUBT); /* the same state: memory only */
        g_free(id);
    }
    d->gen = gen;
}

void accept_doubt_note_locked(mailbox *mb, seen_set *s, ack_doubt *d, const char *msg_id,
                              uint64_t gen)
{
    guint cap = (guint)MAX(mb->o->prefetch, 1) + DOUBT_SLACK;
    uint64_t mark;
    accept_doubt_roll_locked(s, d, gen);
    if (gen < d->gen) {
        /* its channel has ended already (a redelivery came on a newer one
         * while this ack was on its way) */
        if (seen_get(s, msg_id, &mark) == SEEN_CONSUMED && mark == gen)
            seen_put(s, msg_id, SEEN_CONSUMED, ACK_IN_DOUBT);
        return;
    }
    g_queue_push_tail(&d->ids, g_strdup(msg_id));
    while (d->ids.length > cap)
        g_free(g_queue_pop_head(&d->ids));
}

void accept_doubt_free(ack_doubt *d)
{
    g_queue_clear_full(&d->ids, g_free);
    d->gen = 0;
}

typedef struct {
    int64_t budget_ms; /* every_ms per event, at most burst of them */
    int64_t at_ms;     /* when budget_ms was last brought up to date */
    unsigned held_back;
} rate_budget;

int rate_take_locked(GHashTable *budgets, const char *key, int burst, int every_ms)
{
    const int64_t full = (int64_t)burst * every_ms;
    int64_t now = g_get_monotonic_time() / 1000;
    rate_budget *b = g_hash_table_lookup(budgets, key);
    int r;
    if (!b) {
        /* keys are verified senders, few (the trusted keys); with
         * insecure, any claimed name: start over rather than grow */
        if (g_hash_table_size(budgets) >= 1024)
            g_hash_table_remove_all(budgets);
        b = g_new0(rate_budget, 1);
        b->budget_ms = full;
        b->at_ms = now;
        g_hash_table_insert(budgets, g_strdup(key), b);
    }
    b->budget_ms = MIN(full, b->budget_ms + (now - b->at_ms));
    b->at_ms = now;
    if (b->budget_ms < every_ms)
        return b->held_back++ == 0 ? -1 : -2;
    b->budget_ms -= every_ms;
    r = (int)MIN(b->held_back, (unsigned)INT_MAX);
    b->held_back = 0;
    return r;
}

bool accept_refusal_allowed_locked(mailbox *mb, const char *sender)
{
    int r = rate_take_locked(mb->h->refusals, sender, REFUSAL_BURST, REFUSAL_EVERY_MS);
    if (r == -1)
        log_warn("inbox: more than %d refusals of %s's messages within %d s: further ones "
                 "get no receipt and no history line for now (still dead-lettered and "
                 "counted in status); check what %s is sending",
                 REFUSAL_BURST, sender, REFUSAL_BURST * REFUSAL_EVERY_MS / 1000, sender);
    else if (r > 0)
        log_info("inbox: refusals of %s's messages get receipts again (%d went without one)",
                 sender, r);
    return r >= 0;
}
