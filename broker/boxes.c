/* SPDX-License-Identifier: Apache-2.0 */
/* broker/boxes.c — the mailboxes ("boxes") one consuming connection serves.
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
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/conn_int.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

/* ------------------------------------------------------------------ */
/* the slot set                                                        */

static br_slot *slot_new(unsigned box, const char *queue, const char *exchange,
                         const char *const *keys, amqp_channel_t ch)
{
    br_slot *s = g_new0(br_slot, 1);
    s->box = box;
    g_strlcpy(s->queue, queue, sizeof s->queue);
    g_strlcpy(s->exchange, exchange ? exchange : "", sizeof s->exchange);
    s->keys = keys ? g_strdupv((char **)keys) : g_new0(char *, 1);
    s->unbind = g_new0(char *, 1);
    s->held = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->ch = ch;
    s->bound = !s->keys[0];
    g_strlcpy(s->st.queue, queue, sizeof s->st.queue);
    s->st.bound = s->bound;
    return s;
}

static void slot_free(gpointer p)
{
    br_slot *s = p;
    g_strfreev(s->keys);
    g_strfreev(s->unbind);
    g_hash_table_destroy(s->held);
    g_free(s);
}

/* s's channel opened or closed: whether its epoch's tags can be acked
 * (status; for box 0 also br_status.acks_open). */
static void slot_set_open(br_conn *c, br_slot *s, bool open)
{
    s->open = open;
    g_mutex_lock(&c->lock);
    s->st.acks_open = open;
    if (s->box == BR_BOX_LEAD)
        c->st.acks_open = open;
    g_mutex_unlock(&c->lock);
}

void br_slot_kept(br_slot *s, uint64_t tag)
{
    gint64 *k = g_new(gint64, 1);
    *k = (gint64)tag;
    g_hash_table_add(s->held, k);
}

static gboolean tag_acked(gpointer key, gpointer value, gpointer data)
{
    (void)value;
    return *(gint64 *)key <= *(gint64 *)data;
}

/* An ack went out on s: tag, or every tag up to it. */
static void slot_acked(br_slot *s, uint64_t tag, bool multiple)
{
    gint64 t = (gint64)tag;
    if (multiple)
        g_hash_table_foreach_remove(s->held, tag_acked, &t);
    else
        g_hash_table_remove(s->held, &t);
}

void br_slots_init(br_conn *c)
{
    char q[BR_QUEUE_MAX];
    const char *const *lk = c->cfg.lead_bind_keys;
    c->slots = g_ptr_array_new_with_free_func(slot_free);
    if (c->publisher)
        return;
    topo_consumer_queue(true, c->cfg.coord_id, q, sizeof q);
    g_ptr_array_add(c->slots,
                    slot_new(BR_BOX_LEAD, q, lk && lk[0] ? BR_EXCHANGE_MSG : "", lk, CH_CONS));
    topo_consumer_queue(false, c->cfg.coord_id, q, sizeof q);
    g_ptr_array_add(c->slots, slot_new(BR_BOX_RECEIPTS, q, "", NULL, CH_RCPT));
}

void br_slots_free(br_conn *c)
{
    if (c->slots)
        g_ptr_array_free(c->slots, TRUE);
    c->slots = NULL;
}

br_slot *br_slot_by_box(br_conn *c, unsigned box)
{
    for (guint i = 0; c->slots && i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        if (s->box == box)
            return s;
    }
    return NULL;
}

br_slot *br_slot_by_channel(br_conn *c, amqp_channel_t ch)
{
    for (guint i = 0; c->slots && i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        if (s->ch == ch && s->open)
            return s;
    }
    return NULL;
}

/* The lowest channel number from CH_BOX_FIRST that no slot uses.  A number
 * freed by a removed box may come back: it is opened only while no frame
 * of its old channel can be queued (slot_open). */
static amqp_channel_t free_channel(br_conn *c)
{
    for (unsigned ch = CH_BOX_FIRST; ch < 65535; ch++) {
        bool used = false;
        for (guint i = 0; i < c->slots->len && !used; i++)
            used = ((br_slot *)c->slots->pdata[i])->ch == ch;
        if (!used)
            return (amqp_channel_t)ch;
    }
    return 0;
}

/* "box N", or what the slot is when it is no caller's box: for the log */
static const char *slot_what(const br_slot *s, char *buf, size_t n)
{
    if (s->box == BR_BOX_CONTROL)
        return "the control queue";
    snprintf(buf, n, "box %u", s->box);
    return buf;
}

static bool is_lead(const br_slot *s)
{
    return s->box == BR_BOX_LEAD || s->box == BR_BOX_RECEIPTS;
}

/* Set s's consumer state (shared); for box 0 and the receipt queue also the
 * lead's (br_status.consumer).  Returns whether anything changed. */
static bool slot_state(br_conn *c, br_slot *s, br_cons cons, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = s->st.consumer != cons || strcmp(s->st.reason, reason ? reason : "") != 0;
    s->st.consumer = cons;
    g_strlcpy(s->st.reason, reason ? reason : "", sizeof s->st.reason);
    g_mutex_unlock(&c->lock);
    if (is_lead(s))
        return br_set_consumer(c, cons, reason) || changed;
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
    return changed;
}

/* Whether slot_state(c, s, cons, reason) would change anything. */
static bool slot_state_differs(br_conn *c, const br_slot *s, br_cons cons, const char *reason)
{
    bool differs;
    g_mutex_lock(&c->lock);
    differs = s->st.consumer != cons || strcmp(s->st.reason, reason ? reason : "") != 0 ||
              (is_lead(s) && (c->st.consumer != cons ||
                              strcmp(c->st.consumer_reason, reason ? reason : "") != 0));
    g_mutex_unlock(&c->lock);
    return differs;
}

static void slot_bind_state(br_conn *c, br_slot *s, const char *why)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = s->st.bound != s->bound || strcmp(s->st.bind_reason, why) != 0;
    s->st.bound = s->bound;
    g_strlcpy(s->st.bind_reason, why, sizeof s->st.bind_reason);
    g_mutex_unlock(&c->lock);
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
}

void br_slots_lost(br_conn *c)
{
    for (guint i = 0; c->slots && i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        slot_set_open(c, s, false);
        s->declared = s->consuming = false;
        g_hash_table_remove_all(s->held);
        s->bound = !s->keys[0] && !s->unbind[0];
        s->retry_ms = s->bind_retry_ms = 0;
        s->gate_since_ms = 0;
        s->gate_waiting = s->gate_asked = s->gate_ok = s->gate_warned = false;
        g_mutex_lock(&c->lock);
        s->st.consumer = BR_CONS_NONE;
        s->st.reason[0] = '\0';
        g_mutex_unlock(&c->lock);
    }
}

void br_slot_closed(br_conn *c, br_slot *s)
{
    slot_set_open(c, s, false);
    s->consuming = false;
    s->retry_ms = br_now_ms();
    if (!c->consumer_retry_ms || c->consumer_retry_ms > s->retry_ms)
        c->consumer_retry_ms = s->retry_ms;
}

void br_slot_cancelled(br_conn *c, br_slot *s, const char *why)
{
    s->consuming = false;
    slot_state(c, s, BR_CONS_ERROR, why);
    s->retry_ms = br_now_ms() + CHANNEL_RETRY_MS;
    if (!c->consumer_retry_ms || c->consumer_retry_ms > s->retry_ms)
        c->consumer_retry_ms = s->retry_ms;
}

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
    slot_set_open(c, s, true);
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
        slot_state(c, s, BR_CONS_ERROR, why);
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
        if (is_lead(s))
            ((br_slot *)c->slots->pdata[0])->retry_ms = 0;
        c->consumer_retry_ms = br_now_ms();
    }
}

/* Open (when needed), declare s's queue with the mailbox arguments and
 * consume it exclusively with manual acks, on s's channel.  Returns 0; 1
 * when the channel cannot be opened yet; SLOT_GATED while the queue has
 * not answered its gate (slot_gate); the broker's reply code (the
 * channel closed) with its text, and *declaring telling which step failed;
 * or -1 when the connection is gone (and has been dropped). */
static int slot_consume(br_conn *c, br_slot *s, char *text, size_t n, bool *declaring)
{
    amqp_table_entry_t entries[TOPO_MAILBOX_ARGS];
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
    if (!amqp_queue_declare(c->amqp, s->ch, amqp_cstring_bytes(s->queue), 0, 1, 0, 0,
                            topo_mailbox_args(&c->cfg, entries)))
        goto fail;
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
                 "configuration mismatch on %s: %s; every fleetfs must use the same "
                 "max_length, message_ttl and queue_type",
                 s->queue, text);
        return BR_CONS_MISMATCH;
    }
    if (!declaring && code == 403 && is_lead(s)) {
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
                 s->queue, slot_what(s, b, sizeof b), text);
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
    if (slot_state(c, s, BR_CONS_WAITING, why))
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
    if (slot_state_differs(c, s, st, why))
        log_err("broker: %s", why);
    slot_state(c, s, st, why);
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
            slot_state(c, s, BR_CONS_NONE, why);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* bindings, on the probe channel                                      */

/* Bind (or unbind) queue to exchange with key.  0, the broker's code
 * (text says why), or -1 when the connection is gone. */
static int bind_one(br_conn *c, const br_slot *s, const char *key, bool bind, char *text, size_t n)
{
    int code;
    amqp_bytes_t q = amqp_cstring_bytes(s->queue), x = amqp_cstring_bytes(s->exchange),
                 k = amqp_cstring_bytes(key);
    if (bind ? amqp_queue_bind(c->amqp, CH_PROBE, q, x, k, amqp_empty_table) != NULL
             : amqp_queue_unbind(c->amqp, CH_PROBE, q, x, k, amqp_empty_table) != NULL)
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
        if ((rc = bind_one(c, s, *k, false, text, sizeof text)) < 0)
            return -1;
        if (rc > 0 && rc != 404)
            log_warn("broker: cannot unbind %s from %s key %s: %d %s", s->queue, s->exchange, *k,
                     rc, text);
    }
    g_strfreev(s->unbind);
    s->unbind = g_new0(char *, 1);
    for (char **k = s->keys; *k; k++) {
        if ((rc = bind_one(c, s, *k, true, text, sizeof text)) < 0)
            return -1;
        if (rc == 0)
            continue;
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
        slot_bind_state(c, s, why);
        s->bind_retry_ms = br_now_ms() + CONSUMER_RETRY_MS;
        return 0;
    }
    s->bound = true;
    slot_bind_state(c, s, "");
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
                slot_state(c, s, BR_CONS_NONE, why);
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
        if (rc > 0) {
            consumer_refused(c, s, rc, declaring, text);
            continue;
        }
        s->refused_since_ms = 0;
        s->retry_ms = 0;
        slot_state(c, s, BR_CONS_OK, "");
        {
            char b[32];
            log_info("broker: consuming %s (%s, exclusive, prefetch %d)", s->queue,
                     slot_what(s, b, sizeof b), c->cfg.prefetch);
        }
    }
    return 0;
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
        if (s->declared && !s->bound && s->exchange[0] && (t < 0 || s->bind_retry_ms < t))
            t = s->bind_retry_ms;
        if (t >= 0 && (next < 0 || t < next))
            next = t;
    }
    return next < 0 ? 0 : MAX(next, 1);
}

void br_setup_consumer(br_conn *c)
{
    int64_t now = br_now_ms();
    bool any = false;

    if (c->publisher || !c->connected)
        return;
    if (setup_lead(c, now) < 0 || setup_boxes(c, now) < 0)
        return;
    for (guint i = 0; i < c->slots->len && c->connected; i++) {
        br_slot *s = c->slots->pdata[i];
        if (s->declared && !s->bound && s->exchange[0] && s->bind_retry_ms <= now &&
            slot_bind(c, s) < 0) {
            br_drop_connection(c, "connection lost while binding");
            return;
        }
    }
    for (guint i = 0; i < c->slots->len; i++) {
        br_slot *s = c->slots->pdata[i];
        any = any || !s->consuming || (s->exchange[0] && !s->bound);
    }
    c->consumer_retry_ms = any ? MAX(next_round(c), 1) : 0;
    /* a box whose turn is "now" but was put off (queued frames, waiting for
     * the receipt queue) is looked at again in the next turn of the loop */
    if (c->consumer_retry_ms && c->consumer_retry_ms <= now)
        c->consumer_retry_ms = now + 1;
}

/* ------------------------------------------------------------------ */
/* requests                                                            */

static bool has_key(char **keys, const char *k)
{
    for (; keys && *keys; keys++)
        if (strcmp(*keys, k) == 0)
            return true;
    return false;
}

static void keys_append(char ***keys, const char *k)
{
    guint n = g_strv_length(*keys);
    *keys = g_renew(char *, *keys, n + 2);
    (*keys)[n] = g_strdup(k);
    (*keys)[n + 1] = NULL;
}

void br_do_box_add(br_conn *c, br_req *r)
{
    br_slot *s = br_slot_by_box(c, r->box);
    if (s && strcmp(s->queue, r->queue) != 0) {
        log_err("broker: box %u serves %s, not %s: not changed", r->box, s->queue, r->queue);
        br_req_complete(c, r, FE_BAD_INPUT, "box in use");
        return;
    }
    if (s) { /* new keys: unbind the dropped ones, bind the rest */
        for (char **k = s->keys; *k; k++)
            if (!has_key(r->keys, *k) && !has_key(s->unbind, *k))
                keys_append(&s->unbind, *k);
        g_strfreev(s->keys);
        s->keys = r->keys ? g_strdupv(r->keys) : g_new0(char *, 1);
        if (r->exchange[0])
            g_strlcpy(s->exchange, r->exchange, sizeof s->exchange);
        s->bound = false;
        s->bind_retry_ms = 0;
    } else {
        amqp_channel_t ch = free_channel(c);
        s = slot_new(r->box, r->queue, r->exchange, (const char *const *)r->keys, ch);
        g_mutex_lock(&c->lock);
        g_ptr_array_add(c->slots, s);
        g_mutex_unlock(&c->lock);
        char b[32];
        log_info("broker: %s: %s on channel %u%s%s", slot_what(s, b, sizeof b), r->queue, ch,
                 s->keys[0] ? ", bound to " : "", s->keys[0] ? s->exchange : "");
    }
    c->consumer_retry_ms = br_now_ms();
    br_req_complete(c, r, FE_OK, NULL);
}

static void slot_forget(br_conn *c, br_slot *s)
{
    g_mutex_lock(&c->lock);
    g_ptr_array_remove(c->slots, s); /* frees it */
    g_mutex_unlock(&c->lock);
    if (c->cb.changed)
        c->cb.changed(c->cb.ud);
}

/* Close s's channel: its consumer ends, what it held goes back to the
 * queue.  Deliveries that rabbitmq-c queued meanwhile are dropped
 * (frames.c: no open slot for them).  -1: the connection is gone. */
static int slot_close(br_conn *c, br_slot *s)
{
    amqp_rpc_reply_t rep;
    char text[256];
    int code;
    if (!s->open)
        return 0;
    rep = amqp_channel_close(c->amqp, s->ch, AMQP_REPLY_SUCCESS);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL &&
        br_rpc_failure(c, s->ch, &code, text, sizeof text) < 0)
        return -1;
    slot_set_open(c, s, false);
    s->consuming = false;
    return 0;
}

static bool quorum(const br_conn *c)
{
    return c->cfg.queue_type && strcmp(c->cfg.queue_type, "quorum") == 0;
}

/* A quorum queue refuses queue.delete with if-empty (540 NOT_IMPLEMENTED,
 * a connection error; seen on RabbitMQ 3.10).  So: unbind every key (no
 * new message is routed to it), count what waits (passive declare), and
 * delete only when nothing does; else bind again (*code 406, as the
 * broker's if-empty refusal).  A message published to it by its name
 * through the default exchange between the count and the delete is lost
 * with it.  Returns -1 when the connection is gone (dropped). */
static int quorum_delete(br_conn *c, br_slot *s, int *code, char *text, size_t n)
{
    br_probe p;
    int rc;
    *code = 0;
    for (char **k = s->keys; *k; k++)
        if ((rc = bind_one(c, s, *k, false, text, n)) < 0)
            goto gone;
    if (br_declare_queue(c, s->queue, true, &p) < 0)
        return -1;
    if (p.present && p.messages == 0) {
        if (amqp_queue_delete(c->amqp, CH_PROBE, amqp_cstring_bytes(s->queue), 0, 0))
            return 0;
        if (br_rpc_failure(c, CH_PROBE, code, text, n) < 0)
            goto gone;
    } else if (!p.present) {
        *code = 404;
        return 0;
    } else {
        *code = 406;
        snprintf(text, n, "%u messages wait in it", p.messages);
    }
    s->bound = false; /* bound again by the next round */
    s->bind_retry_ms = 0;
    return 0;
gone:
    br_drop_connection(c, text);
    return -1;
}

void br_do_box_remove(br_conn *c, br_req *r)
{
    br_slot *s = r->box == BR_BOX_LEAD ? NULL : br_slot_by_box(c, r->box);
    char text[256], why[512];
    int code = 0;

    if (!s) {
        br_req_complete(c, r, FE_BAD_INPUT, "no such box");
        return;
    }
    if (r->delete_if_empty && g_hash_table_size(s->held)) { /* nothing touched */
        snprintf(why, sizeof why, "%s kept: this box holds %u message(s) delivered and not acked",
                 s->queue, g_hash_table_size(s->held));
        br_req_complete(c, r, FE_NOT_EMPTY, why);
        return;
    }
    if (slot_close(c, s) < 0) {
        br_drop_connection(c, "connection lost while closing a box's channel");
        br_req_complete(c, r, FE_NOT_CONNECTED, "the connection was lost; the box stays");
        return;
    }
    slot_state(c, s, BR_CONS_NONE, "being removed");
    if (r->delete_if_empty) {
        if (quorum(c) && quorum_delete(c, s, &code, text, sizeof text) < 0) {
            br_req_complete(c, r, FE_NOT_CONNECTED, "the connection was lost; the box stays");
            return;
        }
        if (!quorum(c) &&
            !amqp_queue_delete(c->amqp, CH_PROBE, amqp_cstring_bytes(s->queue), 0, 1)) {
            if (br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
                br_drop_connection(c, text);
                br_req_complete(c, r, FE_NOT_CONNECTED, "the connection was lost; the box stays");
                return;
            }
        }
        if (code && code != 404) { /* kept: consumed again, a new epoch */
            s->retry_ms = 0;
            c->consumer_retry_ms = br_now_ms();
            snprintf(why, sizeof why, "%s kept: %s (%d %s)", s->queue,
                     code == 406 ? "it still holds messages" : "the broker refused to delete it",
                     code, text);
            log_warn("broker: box %u: %s; consuming it again", s->box, why);
            slot_state(c, s, BR_CONS_NONE, "kept (not removed): consuming it again");
            br_req_complete(c, r,
                            code == 406   ? FE_NOT_EMPTY
                            : code == 403 ? FE_ACCESS
                                          : FE_INTERNAL,
                            why);
            return;
        }
        snprintf(why, sizeof why, "%s %s", s->queue,
                 code == 404 ? "was gone already" : "deleted (it was empty)");
    } else {
        for (char **k = s->keys; *k; k++) {
            int rc = bind_one(c, s, *k, false, text, sizeof text);
            if (rc < 0) {
                br_drop_connection(c, text);
                br_req_complete(c, r, FE_NOT_CONNECTED, "the connection was lost; the box stays");
                return;
            }
            if (rc > 0 && rc != 404)
                log_warn("broker: box %u: cannot unbind %s key %s: %d %s", s->box, s->queue, *k, rc,
                         text);
        }
        snprintf(why, sizeof why, "%s unbound and kept with what waits in it", s->queue);
    }
    log_info("broker: box %u removed: %s", s->box, why);
    slot_forget(c, s);
    br_req_complete(c, r, FE_OK, why);
}

void br_do_ack(br_conn *c, br_req *r)
{
    br_slot *s = br_slot_by_box(c, r->box);
    int rc;
    if (!s || !s->open || s->epoch != r->epoch) {
        br_req_complete(c, r, FE_NOT_CONNECTED,
                        "the message was delivered on an earlier consumer channel; it will be "
                        "redelivered");
        return;
    }
    rc = r->reject ? amqp_basic_reject(c->amqp, s->ch, r->tag, 0)
                   : amqp_basic_ack(c->amqp, s->ch, r->tag, r->multiple);
    if (rc != AMQP_STATUS_OK) {
        br_req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        br_drop_connection(c, amqp_error_string2(rc));
        return;
    }
    slot_acked(s, r->tag, r->multiple);
    br_req_complete(c, r, FE_OK, NULL);
}

/* ------------------------------------------------------------------ */
/* the public side (any thread)                                        */

static bool valid_name(const char *s)
{
    return s && s[0] && strlen(s) < BR_QUEUE_MAX;
}

int br_box_add(br_conn *c, unsigned box, const char *queue, const char *exchange,
               const char *const *bind_keys)
{
    br_req *r;
    br_slot *s;
    bool clash = false;

    if (box >= BR_BOX_MAX || !valid_name(queue) || (exchange && strlen(exchange) >= BR_QUEUE_MAX) ||
        (!c->cb.deliver_box && box != BR_BOX_LEAD) || c->publisher) {
        errno = EINVAL;
        return -1;
    }
    for (const char *const *k = bind_keys; k && *k; k++)
        if (!valid_name(*k) || !exchange || !exchange[0]) {
            errno = EINVAL;
            return -1;
        }
    g_mutex_lock(&c->lock);
    s = br_slot_by_box(c, box);
    if (box == BR_BOX_LEAD)
        clash = strcmp(s->queue, queue) != 0;
    else if (s)
        clash = strcmp(s->queue, queue) != 0 ||
                (s->exchange[0] && exchange && strcmp(s->exchange, exchange) != 0);
    g_mutex_unlock(&c->lock);
    if (clash) {
        errno = EEXIST;
        return -1;
    }
    r = br_req_new(RQ_BOX_ADD);
    r->box = box;
    g_strlcpy(r->queue, queue, sizeof r->queue);
    g_strlcpy(r->exchange, exchange ? exchange : "", sizeof r->exchange);
    r->keys = bind_keys ? g_strdupv((char **)bind_keys) : NULL;
    br_req_submit(c, r);
    br_req_unref(r); /* nobody waits: the broker thread finishes it */
    return 0;
}

fe_code br_box_remove(br_conn *c, unsigned box, bool delete_if_empty, int64_t timeout_ms,
                      char *detail, size_t dlen)
{
    br_req *r;
    fe_code res;
    bool gave_up;

    if (detail && dlen)
        detail[0] = '\0';
    if (box == BR_BOX_LEAD || box >= BR_BOX_MAX || c->publisher) {
        if (detail)
            snprintf(detail, dlen, "box %u cannot be removed", box);
        return FE_BAD_INPUT;
    }
    r = br_req_new(RQ_BOX_REMOVE);
    r->box = box;
    r->delete_if_empty = delete_if_empty;
    br_req_submit(c, r);
    res = br_req_wait(r, timeout_ms, &gave_up);
    if (detail)
        g_strlcpy(detail,
                  gave_up ? "the broker thread did not finish in time; it still will (see the "
                            "box's status)"
                          : r->detail,
                  dlen);
    br_req_unref(r);
    return res;
}

bool br_box_status_get(br_conn *c, unsigned box, br_box_status *out)
{
    br_slot *s;
    g_mutex_lock(&c->lock);
    s = box == BR_BOX_RECEIPTS ? NULL : br_slot_by_box(c, box);
    if (s)
        *out = s->st;
    g_mutex_unlock(&c->lock);
    return s != NULL;
}

/* An ack (or, reject, a basic.reject without requeue) carried out by the
 * broker thread. */
static fe_code ack_or_reject(br_conn *c, unsigned box, uint64_t epoch, uint64_t tag, bool multiple,
                             bool reject, int64_t timeout_ms)
{
    br_req *r;
    fe_code res;
    bool gave_up;
    g_mutex_lock(&c->lock);
    res = c->st.link == BR_CONNECTED ? FE_OK : FE_NOT_CONNECTED;
    g_mutex_unlock(&c->lock);
    if (res != FE_OK)
        return res;
    r = br_req_new(RQ_ACK);
    r->box = box;
    r->epoch = epoch;
    r->tag = tag;
    r->multiple = multiple;
    r->reject = reject;
    br_req_submit(c, r);
    res = br_req_wait(r, timeout_ms, &gave_up);
    if (gave_up && box != BR_BOX_CONTROL)
        log_warn("ack of delivery %llu (box %u, epoch %llu): no answer from the broker thread "
                 "within %lld ms; late_ack will tell whether it was sent",
                 (unsigned long long)tag, box, (unsigned long long)epoch, (long long)timeout_ms);
    br_req_unref(r);
    return res;
}

fe_code br_ack_box(br_conn *c, unsigned box, uint64_t epoch, uint64_t tag, bool multiple,
                   int64_t timeout_ms)
{
    return ack_or_reject(c, box, epoch, tag, multiple, false, timeout_ms);
}

/* ------------------------------------------------------------------ */
/* the control queue                                                   */

int br_control_consume(br_conn *c)
{
    br_req *r;

    if (!c->cb.control || c->publisher) {
        errno = EINVAL;
        return -1;
    }
    r = br_req_new(RQ_BOX_ADD);
    r->box = BR_BOX_CONTROL;
    br_control_queue(c->cfg.coord_id, r->queue, sizeof r->queue);
    br_req_submit(c, r);
    br_req_unref(r); /* nobody waits: the broker thread finishes it */
    return 0;
}

bool br_control_status(br_conn *c, br_box_status *out)
{
    br_slot *s;
    g_mutex_lock(&c->lock);
    s = br_slot_by_box(c, BR_BOX_CONTROL);
    if (s)
        *out = s->st;
    g_mutex_unlock(&c->lock);
    return s != NULL;
}

fe_code br_ack_control(br_conn *c, uint64_t epoch, uint64_t tag, bool reject, int64_t timeout_ms)
{
    return ack_or_reject(c, BR_BOX_CONTROL, epoch, tag, false, reject, timeout_ms);
}
