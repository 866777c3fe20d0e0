/* SPDX-License-Identifier: Apache-2.0 */
/* broker/slots.c — the slot set of one connection (br_slot, conn_int.h):
 * a slot per consumer (box 0, the receipt queue, further boxes, the
 * control and dead-letter queues), found by box or by open channel, its
 * held delivery tags, and its shared status.  What is done with a slot
 * (declare, gate, bind, consume, retry) is boxes.c's; what callers ask of
 * a box is boxops.c's.  Calls only broker/state.h; used through
 * broker/slots.h.
 */
#include "broker/slots.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "broker/state.h"
#include "broker/topology.h"

/* ------------------------------------------------------------------ */
/* the slot set                                                        */

br_slot *br_slot_new(unsigned box, const char *queue, const char *exchange, const char *const *keys,
                     amqp_channel_t ch)
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
void br_slot_set_open(br_conn *c, br_slot *s, bool open)
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
void br_slot_acked(br_slot *s, uint64_t tag, bool multiple)
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
                    br_slot_new(BR_BOX_LEAD, q, lk && lk[0] ? BR_EXCHANGE_MSG : "", lk, CH_CONS));
    topo_consumer_queue(false, c->cfg.coord_id, q, sizeof q);
    g_ptr_array_add(c->slots, br_slot_new(BR_BOX_RECEIPTS, q, "", NULL, CH_RCPT));
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

/* "box N", or what the slot is when it is no caller's box: for the log */
const char *br_slot_what(const br_slot *s, char *buf, size_t n)
{
    if (s->box == BR_BOX_CONTROL)
        return "the control queue";
    if (s->box == BR_BOX_DEAD)
        return "the dead letters of this host";
    snprintf(buf, n, "box %u", s->box);
    return buf;
}

bool br_slot_is_lead(const br_slot *s)
{
    return s->box == BR_BOX_LEAD || s->box == BR_BOX_RECEIPTS;
}

bool br_quorum(const br_conn *c)
{
    return c->cfg.queue_type && strcmp(c->cfg.queue_type, "quorum") == 0;
}

/* Set s's consumer state (shared); for box 0 and the receipt queue also the
 * lead's (br_status.consumer).  Returns whether anything changed. */
bool br_slot_state(br_conn *c, br_slot *s, br_cons cons, const char *reason)
{
    bool changed;
    g_mutex_lock(&c->lock);
    changed = s->st.consumer != cons || strcmp(s->st.reason, reason ? reason : "") != 0;
    s->st.consumer = cons;
    g_strlcpy(s->st.reason, reason ? reason : "", sizeof s->st.reason);
    g_mutex_unlock(&c->lock);
    if (br_slot_is_lead(s))
        return br_set_consumer(c, cons, reason) || changed;
    if (changed && c->cb.changed)
        c->cb.changed(c->cb.ud);
    return changed;
}

/* Whether br_slot_state(c, s, cons, reason) would change anything. */
bool br_slot_state_differs(br_conn *c, const br_slot *s, br_cons cons, const char *reason)
{
    bool differs;
    g_mutex_lock(&c->lock);
    differs = s->st.consumer != cons || strcmp(s->st.reason, reason ? reason : "") != 0 ||
              (br_slot_is_lead(s) && (c->st.consumer != cons ||
                                      strcmp(c->st.consumer_reason, reason ? reason : "") != 0));
    g_mutex_unlock(&c->lock);
    return differs;
}

void br_slot_bind_state(br_conn *c, br_slot *s, const char *why)
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
        br_slot_set_open(c, s, false);
        s->declared = s->consuming = false;
        g_hash_table_remove_all(s->held);
        s->bound = !s->keys[0] && !s->unbind[0];
        s->retry_ms = s->bind_retry_ms = 0;
        s->gate_since_ms = 0;
        s->gate_waiting = s->gate_asked = s->gate_ok = s->gate_warned = false;
        s->legacy = false; /* asked with x-expires first again (expiry.h) */
        s->renew_ms = 0;
        g_mutex_lock(&c->lock);
        s->st.consumer = BR_CONS_NONE;
        s->st.reason[0] = '\0';
        g_mutex_unlock(&c->lock);
    }
}

void br_slot_closed(br_conn *c, br_slot *s)
{
    br_slot_set_open(c, s, false);
    s->consuming = false;
    s->retry_ms = br_now_ms();
    if (!c->consumer_retry_ms || c->consumer_retry_ms > s->retry_ms)
        c->consumer_retry_ms = s->retry_ms;
}

void br_slot_cancelled(br_conn *c, br_slot *s, const char *why)
{
    s->consuming = false;
    br_slot_state(c, s, BR_CONS_ERROR, why);
    s->retry_ms = br_now_ms() + CHANNEL_RETRY_MS;
    if (!c->consumer_retry_ms || c->consumer_retry_ms > s->retry_ms)
        c->consumer_retry_ms = s->retry_ms;
}
