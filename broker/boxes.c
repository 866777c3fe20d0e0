/* SPDX-License-Identifier: Apache-2.0 */
/* broker/boxes.c — the consumers of the mailboxes ("boxes") one consuming
 * connection serves, set up, gated, bound and retried by the broker
 * thread.  What callers ask of a box (add, remove, ack, its status;
 * the control queue) is boxops.c's; the slot set itself is slots.c's.
 *
 * Every consumer is a slot with its own channel (conn_int.h): box 0, the
 * lead's mailbox, on channel 2; the own receipt queue on channel 4; every
 * further box (an agent's mailbox, later a control queue) on the lowest
 * free channel from 8 up.  A refusal (403 exclusive, 404, 405, 406) closes
 * only that channel, so it is that box's alone: its status says why and it
 * is retried on its own timer, while the others consume on.
 *
 * Box 0 and the receipt queue keep the order and rules they always had
 * (the lead's consumer, br_status.consumer): mailbox first, then receipts;
 * a receipt queue that cannot be consumed pauses the mailbox (basic.cancel,
 * never a channel close: what it holds stays held, and acking it goes on:
 * br_status.acks_open), and the paused mailbox resumes only after the
 * receipt queue is consumed again (tried first).  The further boxes are
 * consumed only while the receipt queue is, and paused with it.
 *
 * Ghosts (issue 16, 2.1): rabbitmq-c queues the frames of other channels
 * that arrive while it waits for an RPC's answer, and a channel.close can
 * be the answer to an RPC on a consumer channel itself.  Deliveries of that
 * channel queued before the close would, after a reopen under the same
 * number, be taken for the new channel's (old tags under the new epoch).
 * So a consumer channel is (re)opened only while rabbitmq-c holds no
 * queued frame, and frames.c drops any delivery on a channel that is not a
 * slot's open one: the broker requeued those when the channel closed and
 * redelivers them on the new one.  Bindings are made on the probe channel,
 * where a refused key cannot disturb a consumer.
 *
 * Stuck queues (t0396): the declare, qos and consume are synchronous, and a
 * queue whose process does not answer would hold the thread until the
 * call's timeout and then cost the connection.  So a slot is declared only
 * once its queue has answered a passive declare on a probe channel (the
 * gate, slot_gate): a stuck queue waits alone, says so, and is consumed when
 * it answers; once box 0 is said not to answer, the receipt queue (and with
 * it every other box) is consumed without it.
 */
#include "broker/boxes.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/expiry.h"
#include "broker/probes.h"
#include "broker/quirks.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

/* ------------------------------------------------------------------ */
/* consuming one slot                                                  */

/* Open s's channel, a new epoch.  Returns 0 (open), 1 (not now: frames
 * are queued, any of which may be its old channel's), -1 (connection gone). */
static int slot_open(br_conn *c, br_slot *s)
{
    if (s->open)
        return 0;
    if (amqp_frames_enqueued(c->amqp))
        return 1;
    if (c->ghosts_dropped) {
        log_info("broker: dropped %llu deliveries that arrived on closed consumer channels "
                 "(the broker redelivers them)",
                 (unsigned long long)c->ghosts_dropped);
        c->ghosts_dropped = 0;
    }
    if (!amqp_channel_open(c->amqp, s->ch)) {
        char why[200];
        snprintf(why, sizeof why, "cannot open channel %u for %s", s->ch, s->queue);
        br_drop_connection(c, why);
        return -1;
    }
    s->consuming = false;
    g_hash_table_remove_all(s->held); /* the broker requeued what the old channel held */
    s->epoch = ++c->epoch_seq;
    g_mutex_lock(&c->lock);
    s->st.epoch = s->epoch;
    if (s->box == BR_BOX_LEAD)
        c->st.epoch = s->epoch;
    g_mutex_unlock(&c->lock);
    br_slot_set_open(c, s, true);
    return 0;
}

/* The gate before a declare.  A declare, a qos and a consume are
 * synchronous calls, and RabbitMQ answers a declare from the queue's own
 * process: a queue that is stuck (its process suspended, a quorum queue
 * without a leader) never answers, and after RPC_TIMEOUT_MS the call's
 * timeout cost the whole consuming connection, again on every reconnect:
 * the receipts, the roster, every agent's box and the publishing
 * connection beside it (kicked as for a dead link).  So each declare waits
 * until the queue has answered a passive declare sent on a probe channel,
 * which holds nothing (probes.c); until then the box waits alone, and
 * after GATE_WARN_MS says so.  Returns 0 to go on, SLOT_GATED to wait. */
static int slot_gate(br_conn *c, br_slot *s)
{
    int64_t now = br_now_ms();
    char why[BR_QUEUE_MAX + 256];
    if (s->gate_ok)
        return 0; /* passed by slot_consume once it declares */
    if (!s->gate_asked) {
        if (!br_probe_send(c, s->queue)) {
            /* every probe channel waits on a queue that does not answer
             * (other mailboxes): this one is declared as it was before the
             * gate, rather than never */
            s->gate_since_ms = 0;
            return 0;
        }
        s->gate_asked = true;
        s->gate_since_ms = now;
    }
    if (!s->gate_warned && now - s->gate_since_ms >= GATE_WARN_MS && !c->ping_sent_ms) {
        s->gate_warned = true;
        snprintf(why, sizeof why,
                 "%s does not answer: a passive declare of it has had no answer for %lld s (its "
                 "queue is stuck in the broker: a suspended queue process, a quorum queue "
                 "without a leader); consumed as soon as it answers",
                 s->queue, (long long)(now - s->gate_since_ms) / 1000);
        log_warn("broker: %s; the connection and every other mailbox go on; check that queue "
                 "on the broker (rabbitmq-queues, or the management UI)",
                 why);
        br_slot_state(c, s, BR_CONS_ERROR, why);
    }
    return SLOT_GATED;
}

bool br_lead_gated(br_conn *c)
{
    return c->slots && c->slots->len >= 2 &&
           (((br_slot *)c->slots->pdata[0])->gate_waiting ||
            ((br_slot *)c->slots->pdata[1])->gate_waiting);
}

void br_slots_answered(br_conn *c, const char *queue)
{
    for (guint i = 0; c->slots && i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        if (!s->gate_since_ms || s->gate_ok || strcmp(s->queue, queue) != 0)
            continue;
        s->gate_ok = true;
        if (s->gate_warned)
            log_info("broker: %s answers again (after %lld s); consuming it", s->queue,
                     (long long)(br_now_ms() - s->gate_since_ms) / 1000);
        if (!s->gate_waiting)
            continue; /* a refusal's own timer (takeover_grace...) decides */
        /* its round comes at once (box 0 and receipts share one timer) */
        s->retry_ms = 0;
        if (br_slot_is_lead(s))
            ((br_slot *)c->slots->pdata[0])->retry_ms = 0;
        c->consumer_retry_ms = br_now_ms();
    }
}

/* The own dead letters' queue held its cap when consuming began: the
 * broker drops the oldest past it (no overflow setting), silently.  Said
 * once per connect, counted for status (found_full). */
static void dead_found_full(br_conn *c, br_slot *s, uint32_t count)
{
    g_mutex_lock(&c->lock);
    s->st.found_full++;
    s->st.full_count = count;
    g_mutex_unlock(&c->lock);
    log_warn("dead letters: %s held %u dead letters when consuming began, its cap: the broker "
             "drops the oldest past it, so dead letters of this host's messages may have been "
             "lost while it was away; a message whose dead letter was lost ends `expired` by this "
             "host's clock (expiredBy sender), not `dead-lettered`; the operator's fleet.dlq "
             "keeps its own newest %d (fleetfs dlq list). Keep this host up, or read fewer "
             "mailboxes that expire, so that its dead letters do not pile up",
             s->queue, (unsigned)count, TOPO_DLQ_MAX_LENGTH);
    if (c->cb.changed)
        c->cb.changed(c->cb.ud);
}

/* Open (when needed), declare s's queue with the mailbox arguments and
 * consume it exclusively with manual acks, on s's channel.  Returns 0; 1
 * when the channel cannot be opened yet; SLOT_GATED while the queue has
 * not answered its gate (slot_gate); the broker's reply code (the
 * channel closed) with its text, and *declaring telling which step failed;
 * or -1 when the connection is gone (and has been dropped). */
static int slot_consume(br_conn *c, br_slot *s, char *text, size_t n, bool *declaring)
{
    amqp_queue_declare_ok_t *ok;
    amqp_table_entry_t entries[TOPO_AGENT_ARGS];
    char tag[BR_QUEUE_MAX + 16];
    int code, rc;

    *declaring = true;
    /* the gate before the channel: a channel opened in one round and
     * declared on in a later one would look like a paused mailbox
     * (setup_lead's `first`) */
    rc = slot_gate(c, s);
    s->gate_waiting = rc == SLOT_GATED;
    if (rc != 0)
        return c->connected ? rc : -1;
    if ((rc = slot_open(c, s)) != 0)
        return rc;
    /* passed: the next declare (a reconnect, a reopened channel) asks again */
    s->gate_since_ms = 0;
    s->gate_asked = s->gate_ok = s->gate_warned = false;
    snprintf(tag, sizeof tag, "fleetfs.%s", s->queue);
    /* the own dead-letter queue is capped like fleet.dlq, with no
     * dead-letter exchange of its own (a dead letter of it would come
     * back to it) */
    ok = amqp_queue_declare(c->amqp, s->ch, amqp_cstring_bytes(s->queue), 0, 1, 0, 0,
                            s->box == BR_BOX_DEAD ? topo_dlq_args(&c->cfg, entries)
                            : br_expiry_agent(s)  ? topo_agent_args(&c->cfg, entries, !s->legacy)
                                                  : topo_mailbox_args(&c->cfg, entries));
    if (!ok)
        goto fail;
    if (s->box == BR_BOX_DEAD && ok->message_count >= TOPO_DLQ_MAX_LENGTH)
        dead_found_full(c, s, ok->message_count);
    s->declared = true;
    *declaring = false;
    /* the gate's answer (a 404 before this declare made the queue, or a
     * count of consumers before this one) must not stand for the status
     * files: the next read asks afresh */
    br_uncache_probe(c, s->queue);
    if (!amqp_basic_qos(c->amqp, s->ch, 0, (uint16_t)c->cfg.prefetch, 0) ||
        !amqp_basic_consume(c->amqp, s->ch, amqp_cstring_bytes(s->queue), amqp_cstring_bytes(tag),
                            0, 0, 1, amqp_empty_table))
        goto fail;
    br_heard(c);
    s->consuming = true;
    return 0;
fail:
    if (br_rpc_failure(c, s->ch, &code, text, n) < 0) {
        br_drop_connection(c, text);
        return -1;
    }
    return code ? code : 541;
}

/* Why consuming s failed, in words a person can act on. */
static br_cons consumer_failure(br_conn *c, const br_slot *s, int code, bool declaring,
                                const char *text, char *why, size_t n)
{
    if (declaring && code == 406) {
        snprintf(why, n,
                 "configuration mismatch on %s: %s%s; every fleetfs must use the same "
                 "max_length, message_ttl and queue_type%s",
                 s->queue, text, br_mismatch_hint(text),
                 br_expiry_agent(s) ? ", and the agent_expires this mailbox was made with" : "");
        return BR_CONS_MISMATCH;
    }
    if (!declaring && code == 403 && br_slot_is_lead(s)) {
        snprintf(why, n,
                 "another fleetfs is already the consumer of %s (coord_id %s is in use "
                 "elsewhere): %s; stop the other mount or pick another coord_id",
                 s->queue, c->cfg.coord_id, text);
        return BR_CONS_EXCLUSIVE;
    }
    if (!declaring && code == 403) {
        char b[32];
        snprintf(why, n,
                 "another connection is already the consumer of %s (%s): %s; stop the "
                 "other fleetfs serving it",
                 s->queue, br_slot_what(s, b, sizeof b), text);
        return BR_CONS_EXCLUSIVE;
    }
    if (declaring && code == 403)
        snprintf(why, n,
                 "cannot declare %s: %d %s; this broker login may not make it (per-host logins: "
                 "the queue must be named after this host, fleetfs-broker host add)",
                 s->queue, code, text);
    else
        snprintf(why, n, "cannot %s %s: %d %s", declaring ? "declare" : "consume", s->queue, code,
                 text);
    return BR_CONS_ERROR;
}

/* An exclusive-use refusal within takeover_grace of the first one in a
 * row: most likely the daemon that served this box a moment ago
 * (unmounted, its broker connection not yet closed).  Keep trying. */
static bool takeover_wait(br_conn *c, br_slot *s)
{
    char why[BR_QUEUE_MAX + 128];
    int64_t now = br_now_ms();
    if (!s->refused_since_ms)
        s->refused_since_ms = now;
    if (now - s->refused_since_ms >= c->cfg.takeover_grace_ms)
        return false;
    snprintf(why, sizeof why,
             "waiting for the previous consumer of %s to go (up to %lld ms, takeover_grace)",
             s->queue, (long long)c->cfg.takeover_grace_ms);
    if (br_slot_state(c, s, BR_CONS_WAITING, why))
        log_warn("broker: %s is in exclusive use by another connection; %s", s->queue, why);
    s->retry_ms = now + TAKEOVER_RETRY_MS;
    return true;
}

static void consumer_refused(br_conn *c, br_slot *s, int code, bool declaring, const char *text)
{
    char why[900];
    br_cons st;
    if (s->box != BR_BOX_RECEIPTS && !declaring && code == 403 && takeover_wait(c, s))
        return;
    st = consumer_failure(c, s, code, declaring, text, why, sizeof why);
    /* logged before the state is set: a start-up that gives up on this
     * state ("not mounting") prints, and lets its parent return, only
     * after this line (the README tour shows them in this order) */
    if (br_slot_state_differs(c, s, st, why))
        log_err("broker: %s", why);
    br_slot_state(c, s, st, why);
    s->retry_ms = br_now_ms() + CONSUMER_RETRY_MS;
}

/* Stop taking new deliveries on s, keeping the channel: what it holds
 * stays held under the same epoch (tags stay valid, acks go on) and
 * nothing is requeued.  Returns -1 when the connection is gone. */
static int slot_pause(br_conn *c, br_slot *s)
{
    char tag[BR_QUEUE_MAX + 16], text[256];
    int code;
    if (!s->consuming)
        return 0;
    snprintf(tag, sizeof tag, "fleetfs.%s", s->queue);
    if (amqp_basic_cancel(c->amqp, s->ch, amqp_cstring_bytes(tag))) {
        s->consuming = false;
        return 0;
    }
    if (br_rpc_failure(c, s->ch, &code, text, sizeof text) < 0)
        return -1;
    return 0; /* the broker closed the channel: it requeues what it held */
}

/* The receipt queue cannot be consumed: no box takes new messages whose
 * receipts could not be followed. */
static int pause_all(br_conn *c, const br_slot *rcpt)
{
    char why[700];
    snprintf(why, sizeof why, "paused while %s cannot be consumed", rcpt->queue);
    for (guint i = 0; i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        if (s == rcpt)
            continue;
        if (slot_pause(c, s) < 0) {
            br_drop_connection(c, "cannot cancel a mailbox consumer");
            return -1;
        }
        if (s->box != BR_BOX_LEAD)
            br_slot_state(c, s, BR_CONS_NONE, why);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* bindings, on the probe channel                                      */

/* Bind (or unbind) queue to exchange with key.  0, the broker's code
 * (text says why), or -1 when the connection is gone. */
int br_bind_one(br_conn *c, const br_slot *s, const char *key, bool bind, char *text, size_t n)
{
    int code;
    amqp_bytes_t q = amqp_cstring_bytes(s->queue), x = amqp_cstring_bytes(s->exchange),
                 k = amqp_cstring_bytes(key);
    amqp_table_entry_t h[2];
    amqp_table_t args = amqp_empty_table;
    if (s->box == BR_BOX_DEAD) /* fleet.dead is a headers exchange */
        args = topo_dead_binding(key, h);
    if (bind ? amqp_queue_bind(c->amqp, CH_PROBE, q, x, k, args) != NULL
             : amqp_queue_unbind(c->amqp, CH_PROBE, q, x, k, args) != NULL)
        return 0;
    if (br_rpc_failure(c, CH_PROBE, &code, text, n) < 0)
        return -1;
    return code ? code : 541;
}

/* Unbind what an update dropped, bind every key.  A refused key is said
 * once (log, status) and tried again later; the consumer carries on. */
static int slot_bind(br_conn *c, br_slot *s)
{
    char text[256], why[384];
    int rc;
    for (char **k = s->unbind; *k; k++) {
        if ((rc = br_bind_one(c, s, *k, false, text, sizeof text)) < 0)
            return -1;
        if (rc > 0 && rc != 404)
            log_warn("broker: cannot unbind %s from %s key %s: %d %s", s->queue, s->exchange, *k,
                     rc, text);
    }
    g_strfreev(s->unbind);
    s->unbind = g_new0(char *, 1);
    for (char **k = s->keys; *k; k++) {
        if ((rc = br_bind_one(c, s, *k, true, text, sizeof text)) < 0)
            return -1;
        if (rc == 0)
            continue;
        if (rc == 403 && s->box == BR_BOX_CONTROL) {
            /* a login that may not configure fleet.control although its
             * declare of it was answered: LavinMQ answers a redeclare that
             * changes nothing without checking rights (broker/quirks.h) */
            br_control_not_bindable(c);
            return 0;
        }
        if (rc == 403 && s->box == BR_BOX_DEAD) {
            br_dead_not_bindable(c, text);
            return 0;
        }
        snprintf(why, sizeof why, "cannot bind %s to %s with key %s: %d %s%s", s->queue,
                 s->exchange, *k, rc, text,
                 rc == 404   ? " (the exchange is missing: fleetfs-broker host add makes it)"
                 : rc == 403 ? " (this broker login may not bind that key: per-host logins bind "
                               "only their own agents' ids and broadcast.<group>)"
                             : "");
        s->bound = false;
        g_mutex_lock(&c->lock);
        rc = strcmp(s->st.bind_reason, why);
        g_mutex_unlock(&c->lock);
        if (rc != 0)
            log_warn("broker: %s; retrying every %d s (messages to that key do not reach this "
                     "mailbox meanwhile)",
                     why, CONSUMER_RETRY_MS / 1000);
        br_slot_bind_state(c, s, why);
        s->bind_retry_ms = br_now_ms() + CONSUMER_RETRY_MS;
        return 0;
    }
    s->bound = true;
    br_slot_bind_state(c, s, "");
    return 0;
}

/* ------------------------------------------------------------------ */
/* setting up                                                          */

/* Box 0 and the receipt queue, as the lead's consumer always was: the
 * mailbox first, then receipts; a refusal ends the round.  Returns -1 when
 * the connection is gone. */
static int setup_lead(br_conn *c, int64_t now)
{
    br_slot *lead[2] = {c->slots->pdata[0], c->slots->pdata[1]};
    char text[384];
    bool declaring, started = false, gated = false;
    /* a mailbox paused for its receipt queue (channel open, declared, not
     * consuming) resumes only once the receipt queue is consumed: tried
     * first, else every retry round would take another prefetch of
     * messages while "paused" */
    int first = lead[0]->open && lead[0]->declared && !lead[0]->consuming ? 1 : 0;

    if (lead[0]->consuming && lead[1]->consuming)
        return 0;
    if (lead[0]->retry_ms > now)
        return 0;
    for (int i = 0; i < 2; i++) {
        br_slot *s = lead[(first + i) % 2];
        int rc;
        if (s->consuming)
            continue;
        rc = slot_consume(c, s, text, sizeof text, &declaring);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            lead[0]->retry_ms = now;
            return 0;
        }
        if (rc == SLOT_GATED) {
            /* the mailbox first, as ever (a second fleetfs of the same id
             * is refused on it and waits takeover_grace, never touching
             * the receipts); only once it is said not to answer does the
             * receipt queue go on without it (and with it the boxes) */
            gated = true;
            if (!(s == lead[0] && s->gate_warned))
                break; /* the second waits for the first (a paused mailbox for its receipts) */
            continue;
        }
        if (rc > 0) {
            consumer_refused(c, s, rc, declaring, text);
            lead[0]->retry_ms = lead[1]->retry_ms = s->retry_ms;
            if (s == lead[1])
                return pause_all(c, lead[1]);
            return 0;
        }
        started = true;
    }
    if (gated) {
        /* sooner when the answer comes (br_slots_answered) */
        lead[0]->retry_ms = lead[1]->retry_ms = now + GATE_TICK_MS;
        return 0;
    }
    lead[0]->refused_since_ms = lead[1]->refused_since_ms = 0;
    lead[0]->retry_ms = lead[1]->retry_ms = 0;
    g_mutex_lock(&c->lock);
    lead[1]->st.consumer = lead[0]->st.consumer = BR_CONS_OK;
    lead[1]->st.reason[0] = lead[0]->st.reason[0] = '\0';
    g_mutex_unlock(&c->lock);
    br_set_consumer(c, BR_CONS_OK, "");
    if (started)
        log_info("broker: consuming lead.%s.inbox and lead.%s.receipts (exclusive, prefetch %d)",
                 c->cfg.coord_id, c->cfg.coord_id, c->cfg.prefetch);
    return 0;
}

/* Every further box, each on its own. */
static int setup_boxes(br_conn *c, int64_t now)
{
    char text[384];
    bool declaring;
    const br_slot *rcpt = c->slots->pdata[1];

    for (guint i = 2; i < c->slots->len && c->connected; i++) {
        br_slot *s = c->slots->pdata[i];
        int rc;
        if (!rcpt->consuming) {
            char why[300];
            snprintf(why, sizeof why, "waiting until %s is consumed", rcpt->queue);
            if (s->st.consumer != BR_CONS_NONE || !s->st.reason[0])
                br_slot_state(c, s, BR_CONS_NONE, why);
            continue;
        }
        if (s->consuming || s->retry_ms > now)
            continue;
        rc = slot_consume(c, s, text, sizeof text, &declaring);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            s->retry_ms = now;
            continue;
        }
        if (rc == SLOT_GATED) {
            s->retry_ms = now + GATE_TICK_MS; /* sooner when the answer comes */
            continue;
        }
        if (rc > 0 && declaring && br_expiry_refused(c, s, rc)) {
            s->retry_ms = now; /* once more, as a legacy mailbox */
            continue;
        }
        if (rc > 0) {
            consumer_refused(c, s, rc, declaring, text);
            continue;
        }
        br_expiry_consuming(c, s, now);
        s->refused_since_ms = 0;
        s->retry_ms = 0;
        br_slot_state(c, s, BR_CONS_OK, "");
        /* the own dead letters' queue: status says it (dead_letters: ok);
         * its refusals are logged like any box's */
        if (s->box != BR_BOX_DEAD) {
            char b[32];
            log_info("broker: consuming %s (%s, exclusive, prefetch %d)", s->queue,
                     br_slot_what(s, b, sizeof b), c->cfg.prefetch);
        }
    }
    return 0;
}

/* Whether s has bindings to make on this connection: the control queue's
 * only where this login may configure fleet.control (else `fleetfs
 * declare` made it, session.c) */
static bool wants_bind(const br_conn *c, const br_slot *s)
{
    return s->exchange[0] && !s->bound && (s->box != BR_BOX_CONTROL || c->control_bindable) &&
           (s->box != BR_BOX_DEAD || c->dead_bindable);
}

/* When the next round is due: the earliest time of a slot with something
 * left to do; 0 for nothing. */
static int64_t next_round(br_conn *c)
{
    int64_t next = -1;
    for (guint i = 0; i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        int64_t t = -1;
        if (!s->consuming)
            t = s->retry_ms;
        if (s->declared && wants_bind(c, s) && (t < 0 || s->bind_retry_ms < t))
            t = s->bind_retry_ms;
        if (t >= 0 && (next < 0 || t < next))
            next = t;
    }
    if (br_expiry_next(c) && (next < 0 || br_expiry_next(c) < next))
        next = br_expiry_next(c);
    return next < 0 ? 0 : MAX(next, 1);
}

void br_setup_consumer(br_conn *c)
{
    int64_t now = br_now_ms();
    bool any = false;

    if (c->publisher || !c->connected)
        return;
    if (setup_lead(c, now) < 0 || setup_boxes(c, now) < 0 || br_expiry_renew(c, now) < 0)
        return;
    for (guint i = 0; i < c->slots->len && c->connected; i++) {
        br_slot *s = c->slots->pdata[i];
        if (s->declared && wants_bind(c, s) && s->bind_retry_ms <= now && slot_bind(c, s) < 0) {
            br_drop_connection(c, "connection lost while binding");
            return;
        }
    }
    for (guint i = 0; i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        any = any || !s->consuming || wants_bind(c, s) || s->renew_ms;
    }
    c->consumer_retry_ms = any ? MAX(next_round(c), 1) : 0;
    /* a box whose turn is "now" but was put off (queued frames, waiting for
     * the receipt queue) is looked at again in the next turn of the loop */
    if (c->consumer_retry_ms && c->consumer_retry_ms <= now)
        c->consumer_retry_ms = now + 1;
}
