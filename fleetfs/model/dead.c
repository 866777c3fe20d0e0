/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/dead.c — dead letters of our own messages, come home.
 *
 * The broker dead-letters a message that expired in a mailbox (the queue's
 * x-message-ttl, or the message's own expiration) or that its reader
 * rejected; fleet.dlx copies it to fleet.dlq (the operator's record) and,
 * through the headers exchange fleet.dead, to lead.<host>.dead of the host
 * its fleet-host header names (broker/death.h).  That header is only a
 * routing hint: anyone who may publish can set it.  So a dead letter moves
 * a `sent` entry only when it is ours beyond doubt:
 *
 *   1. it decodes as an envelope (a coord message or a receipt);
 *   2. its `from` is one of this host's entities (the lead or a local
 *      agent);
 *   3. it carries this host's own signature: ed25519 signatures are
 *      deterministic, so the envelope signed again with our key must give
 *      exactly its sig (no trust directory needed; with -o insecure there is
 *      no key and this check is skipped, as every signature check is);
 *   4. a message: its msgId is in that entity's sent (or its publish is
 *      still waiting for the confirm), and the queue it died in is the
 *      mailbox of its `to` (a member's, for a broadcast).
 *
 * Then the entry becomes `dead-lettered`, with the broker's reason (x-death)
 * in its detail, by sent.c's rules: it replaces the states the sender
 * concludes alone (unconfirmed, published, published-unread, expired by its
 * own clock), never a receipt's; a receipt that comes later (the receiver
 * handled a copy, e.g. one the operator redrove) replaces it.  A receipt or a
 * control envelope (signed by us alike) that died is told in the log (its
 * message's sender learns nothing from it).  Anything else changes nothing: counted (dead_foreign in the
 * root status) and logged, one line each within a budget (DEAD_LOG_BURST,
 * then one per DEAD_LOG_EVERY_MS), so a flood of forged copies cannot fill
 * the log.  Every delivery is acked: lead.<me>.dead is this host's alone.
 */
#include "fleetfs/model/mb_int.h"

#include <stdio.h>
#include <string.h>

#include "broker/death.h"
#include "fleetfs/base/log.h"

#define DEAD_LOG_BURST 10
#define DEAD_LOG_EVERY_MS 6000

/* The id whose mailbox `queue` is: lead.X.inbox -> X, agent.G.inbox -> G;
 * "" for any other queue. */
static void queue_owner(const char *queue, char *out, size_t n)
{
    size_t len = strlen(queue);
    const char *suffix = ".inbox";
    size_t sl = strlen(suffix);
    out[0] = '\0';
    if (len <= sl || strcmp(queue + len - sl, suffix) != 0)
        return;
    if (g_str_has_prefix(queue, "lead."))
        snprintf(out, n, "%.*s", (int)(len - sl - 5), queue + 5);
    else if (g_str_has_prefix(queue, "agent."))
        snprintf(out, n, "%.*s", (int)(len - sl - 6), queue + 6);
    if (!id_valid(out))
        out[0] = '\0';
}

/* A copy that changes nothing: counted on the lead, logged within the
 * budget. */
static void foreign(mailbox *lead, const struct br_death *d, const char *id, const char *why)
{
    char words[400];
    int r;
    br_death_words(d, words, sizeof words);
    g_mutex_lock(lead->lock);
    lead->n.dead_foreign++;
    r = rate_take_locked(lead->h->dead_logs, "foreign", DEAD_LOG_BURST, DEAD_LOG_EVERY_MS);
    g_mutex_unlock(lead->lock);
    mb_changed(lead, "status");
    if (r == -1)
        log_warn("dead letters: more copies that are not this host's: counted (dead_foreign in "
                 "status), logged again in %d s",
                 DEAD_LOG_EVERY_MS / 1000);
    if (r < 0)
        return;
    log_warn("dead letters: a copy of %s in lead.%s.dead changes nothing: %s (%s); counted as "
             "dead_foreign in status",
             id[0] ? id : "a message", lead->o->coord_id, why, words);
    if (r > 0)
        log_warn("dead letters: %d more such copies were counted and not logged", r);
}

/* Whether e carries this host's own signature (see the top). */
static bool signed_by_us(mailbox *lead, envelope *e)
{
    char sig[sizeof e->sig];
    bool same;
    if (lead->o->insecure || !lead->h->key)
        return lead->o->insecure;
    memcpy(sig, e->sig, sizeof sig);
    same = sig[0] && sig_sign(lead->h->key, e) == 0 && strcmp(sig, e->sig) == 0;
    memcpy(e->sig, sig, sizeof sig);
    return same;
}

/* A control envelope of ours (a spawn or stop request to another host, or
 * an answer to one) that died: told in the log; its requester learns its
 * fate by spawn_ttl.  False when it is not a control envelope of ours. */
static bool control_of_ours(mailbox *lead, const struct br_death *d, const char *body, size_t len)
{
    ctl_env c;
    char why[200], sig[sizeof c.sig], words[400];
    bool ours = false;
    if (ctl_decode(body, len, lead->o->max_message, &c, why, sizeof why) < 0)
        return false;
    g_mutex_lock(lead->lock);
    if (!strcmp(c.from, lead->o->coord_id) && lead->h->key) {
        memcpy(sig, c.sig, sizeof sig);
        ours = sig[0] && ctl_sign(lead->h->key, &c) == 0 && strcmp(sig, c.sig) == 0;
    }
    if (ours)
        lead->n.dead_home++;
    g_mutex_unlock(lead->lock);
    if (ours) {
        br_death_words(d, words, sizeof words);
        mb_changed(lead, "status");
        log_warn("dead letters: our control %s %s to %s was dead-lettered: %s", c.type, c.msgId,
                 c.to, words);
    }
    ctl_free(&c);
    return ours;
}

br_action mb_dead_letter(mailbox *lead, const struct br_death *d, const char *body, size_t len)
{
    envelope e;
    char why[300] = "", host[MB_ID_MAX], owner[MB_ID_MAX], words[400];
    mailbox *mb = NULL;
    bool ours, named;

    br_death_words(d, words, sizeof words);
    if (env_decode(body, len, lead->o->max_message, &e, why, sizeof why) < 0) {
        char w[360];
        if (control_of_ours(lead, d, body, len))
            return BR_ACK;
        snprintf(w, sizeof w, "not an envelope (%s)", why);
        foreign(lead, d, d->msg_id, w);
        return BR_ACK;
    }
    mb_id_host(e.from, host, sizeof host);
    if (strcmp(host, lead->o->coord_id) != 0 || !(mb = mb_find(lead, e.from))) {
        snprintf(why, sizeof why, "from %s, not this host or one of its agents", e.from);
        foreign(lead, d, e.msgId, why);
        env_free(&e);
        return BR_ACK;
    }
    g_mutex_lock(lead->lock);
    ours = signed_by_us(lead, &e);
    g_mutex_unlock(lead->lock);
    if (!ours) {
        foreign(lead, d, e.msgId, "not signed with this host's key (a forgery, or altered)");
        goto out;
    }
    if (!strcmp(e.type, ENV_TYPE_RECEIPT)) {
        g_mutex_lock(lead->lock);
        mb->n.dead_home++;
        g_mutex_unlock(lead->lock);
        mb_changed(lead, "status");
        log_warn("dead letters: our %s receipt %s about %s to %s was dead-lettered: %s; that "
                 "sender's `sent` will not hear it from us",
                 e.state, e.msgId, e.ref, e.to, words);
        goto out;
    }
    queue_owner(d->queue, owner, sizeof owner);
    g_mutex_lock(lead->lock);
    named = owner[0] && sent_names_locked(mb, e.msgId, owner);
    g_mutex_unlock(lead->lock);
    if (!named) {
        snprintf(why, sizeof why,
                 owner[0] ? "not a message %s sent to %s (never sent from here, no longer among "
                            "the newest in sent, or a copy put into another's mailbox)"
                          : "%s's message died in %s, which is no mailbox",
                 e.from, owner[0] ? owner : d->queue);
        foreign(lead, d, e.msgId, why);
        goto out;
    }
    g_mutex_lock(lead->lock);
    mb->n.dead_home++;
    g_mutex_unlock(lead->lock);
    if (mb_sent_update(mb, e.msgId, owner, "dead-lettered", words))
        log_warn("dead letters: %s's message %s to %s was dead-lettered: %s; its sent entry says "
                 "dead-lettered (fleetfs dlq show %s: the operator's copy in fleet.dlq)",
                 e.from, e.msgId, owner, words, e.msgId);
    else
        log_info("dead letters: %s's message %s to %s was dead-lettered (%s), but its sent entry "
                 "has the receiver's word already: kept",
                 e.from, e.msgId, owner, words);
    mb_changed(lead, "status");
out:
    env_free(&e);
    mb_unref(mb);
    return BR_ACK;
}
