/* SPDX-License-Identifier: Apache-2.0 */
/* broker/frames.c — what the broker sends without being asked, read
 * without blocking on the broker thread: confirms (basic.ack / basic.nack on
 * the publish channel, matched to in-flight publishes by delivery tag),
 * returns (a mandatory publish that found no queue: it comes *before* its
 * ack, BROKER-FACTS.md, so it marks the in-flight entry and the ack then
 * completes it as "no such mailbox"), deliveries, and the broker closing a
 * channel or cancelling a consumer, and connection.blocked / unblocked (a
 * resource alarm: publishes fail at once meanwhile).  rabbitmq-c answers
 * and checks heartbeats while frames are read.
 */
#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/frames.h"
#include "broker/probes.h"
#include "broker/pubchan.h"
#include "broker/quirks.h"
#include "broker/sideconn.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "fleetfs/base/log.h"

/* ------------------------------------------------------------------ */
/* frames from the broker                                              */

static const char *nack_words(const br_req *r)
{
    if (r->exchange[0] && !r->queue[0]) /* a broadcast: several mailboxes */
        return "the broker refused the message (nack): a member's mailbox is full; the other "
               "members may have got their copy";
    return "the broker refused the message (nack): the peer's mailbox is full";
}

/* The broker took r: whether anyone reads its mailbox is known from the
 * probe, or said not to be. */
static void confirmed(br_conn *c, br_req *r)
{
    char detail[sizeof r->detail];
    if (!r->unprobed) {
        br_req_complete(c, r, FE_OK, NULL);
        return;
    }
    snprintf(detail, sizeof detail,
             "whether anyone reads %s is not known: its probe had no answer when the message "
             "went out",
             r->queue);
    br_req_complete(c, r, FE_OK, detail);
}

static void confirm(br_conn *c, uint64_t tag, bool multiple, bool nack)
{
    br_req *r;
    while ((r = g_queue_peek_head(&c->inflight)) && r->pub_tag <= tag) {
        if (!multiple && r->pub_tag != tag)
            break;
        g_queue_pop_head(&c->inflight);
        if (nack)
            br_req_complete(c, r, FE_FULL, nack_words(r));
        else if (r->returned)
            br_req_complete(c, r, FE_NO_MAILBOX, NULL);
        else
            confirmed(c, r);
        if (!multiple)
            return;
    }
    if (!multiple) {
        /* not at the head: look it up (acks normally arrive in order) */
        for (GList *l = c->inflight.head; l; l = l->next) {
            r = l->data;
            if (r->pub_tag == tag) {
                g_queue_delete_link(&c->inflight, l);
                if (nack || r->returned)
                    br_req_complete(c, r, nack ? FE_FULL : FE_NO_MAILBOX,
                                    nack ? nack_words(r) : NULL);
                else
                    confirmed(c, r);
                return;
            }
        }
    }
}

static void on_return(br_conn *c, amqp_basic_return_t *ret)
{
    amqp_message_t msg;
    amqp_rpc_reply_t rep = amqp_read_message(c->amqp, CH_PUB, &msg, 0);
    char id[BR_MSG_ID_MAX + 1], text[128];
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        br_drop_connection(c, "cannot read a returned message");
        return;
    }
    sc_bytes_str(ret->reply_text, text, sizeof text);
    id[0] = '\0';
    if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        sc_bytes_str(msg.properties.message_id, id, sizeof id);
    for (GList *l = c->inflight.head; l; l = l->next) {
        br_req *r = l->data;
        if (!r->returned && strcmp(r->msg_id, id) == 0) {
            r->returned = true;
            /* gone (deleted?): the next publish checks again, and may create it */
            g_hash_table_remove(c->declared, r->queue);
            if (r->receipt && r->queue[0])
                g_hash_table_add(c->unrouted, g_strdup(r->queue));
            if (!r->detail[0] && r->exchange[0])
                snprintf(r->detail, sizeof r->detail,
                         "the broker returned the message (%d %s): no mailbox is bound to %s with "
                         "key %s (no such agent, or a group without a member)",
                         ret->reply_code, text, r->exchange, r->key);
            else if (!r->detail[0]) /* else do_publish already said why (never added) */
                snprintf(r->detail, sizeof r->detail,
                         "the broker returned the message (%d %s): mailbox %s does not exist",
                         ret->reply_code, text, r->queue);
            break;
        }
    }
    amqp_destroy_message(&msg);
}

static void on_deliver(br_conn *c, amqp_channel_t ch, amqp_basic_deliver_t *d)
{
    amqp_message_t msg;
    amqp_rpc_reply_t rep;
    br_action act = BR_KEEP;
    uint64_t tag = d->delivery_tag;
    bool redelivered = d->redelivered;
    int rc = AMQP_STATUS_OK;
    br_slot *s;

    rep = amqp_read_message(c->amqp, ch, &msg, 0);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        br_drop_connection(c, "cannot read a delivered message");
        return;
    }
    s = br_slot_by_channel(c, ch);
    if (!s) {
        /* a channel that closed after the broker sent this (its frames were
         * queued inside rabbitmq-c): the broker has requeued the message and
         * redelivers it on the reopened channel; never taken for that one's */
        amqp_destroy_message(&msg);
        c->ghosts_dropped++; /* said in one line when a channel opens (boxes.c) */
        return;
    }
    if (s->box == BR_BOX_RECEIPTS)
        act = c->cb.receipt
                  ? c->cb.receipt(c->cb.ud, s->epoch, redelivered, msg.body.bytes, msg.body.len)
                  : BR_ACK;
    else if (s->box == BR_BOX_DEAD) {
        br_death death;
        br_death_parse(&msg.properties, &death);
        act = c->cb.dead ? c->cb.dead(c->cb.ud, &death, msg.body.bytes, msg.body.len) : BR_ACK;
        if (act == BR_KEEP) /* nobody to hold it for: the owner decided already */
            act = BR_ACK;
    } else if (s->box == BR_BOX_CONTROL)
        act = c->cb.control ? c->cb.control(c->cb.ud, s->epoch, tag, redelivered, msg.body.bytes,
                                            msg.body.len)
                            : BR_KEEP;
    else if (c->cb.deliver_box)
        act = c->cb.deliver_box(c->cb.ud, s->box, s->epoch, tag, redelivered, msg.body.bytes,
                                msg.body.len);
    else if (c->cb.deliver && s->box == BR_BOX_LEAD)
        act = c->cb.deliver(c->cb.ud, s->epoch, tag, redelivered, msg.body.bytes, msg.body.len);
    amqp_destroy_message(&msg);
    if (act == BR_KEEP)
        br_slot_kept(s, tag);
    if (act == BR_ACK)
        rc = amqp_basic_ack(c->amqp, ch, tag, 0);
    else if (act == BR_REJECT)
        rc = amqp_basic_reject(c->amqp, ch, tag, 0);
    if (rc != AMQP_STATUS_OK)
        br_drop_connection(c, amqp_error_string2(rc));
}

static void on_async_channel_close(br_conn *c, amqp_channel_t ch, amqp_channel_close_t *m)
{
    amqp_channel_close_ok_t ok = {0};
    char text[256];
    br_req *r;
    int code = m->reply_code; /* m may not outlive the channel's reopening */
    sc_bytes_str(m->reply_text, text, sizeof text);
    br_slot *s = br_slot_by_channel(c, ch);
    /* LavinMQ's low-disk refusal of a publish (quirks.h): blocked, said
     * once (br_set_blocked), not at each canary it refuses */
    bool low_disk = (ch == CH_PUB || ch == CH_CANARY) && br_is_low_disk_refusal(code, text);
    if (!low_disk || !c->st.blocked)
        log_warn("broker: channel %u closed by the broker: %d %s", ch, code, text);
    if (ch == CH_PUB || ch == CH_CANARY) {
        /* reopened without waiting for it (pubchan.c): the publishes
         * meant for it wait there meanwhile, the loop goes on */
        if (br_pubchan_closed(c, ch) < 0) {
            br_drop_connection(c, text);
            return;
        }
    } else if (amqp_send_method(c->amqp, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK ||
               (!s && br_open_channel(c, ch) < 0)) {
        br_drop_connection(c, text);
        return;
    }
    if (ch == CH_CANARY)
        c->canary_confirms = false; /* reopened: a fresh channel */
    if (low_disk) {
        c->low_disk = true;
        br_set_blocked(c, true, BR_LOW_DISK_REASON);
    }
    if (ch == CH_PUB && low_disk && g_queue_get_length(&c->inflight) == 1) {
        /* the one unconfirmed publish is the one refused: not stored (an
         * earlier one may be stored and still unconfirmed when more are
         * out, so those stay "may or may not" below) */
        c->pub_seq = 0;
        br_req_complete(c, g_queue_pop_head(&c->inflight), FE_BLOCKED,
                        "the broker refused the publish (" BR_LOW_DISK_REASON
                        "); nothing was sent");
    } else if (ch == CH_PUB) {
        char why[400];
        snprintf(why, sizeof why,
                 "the broker closed the publish channel (%d %s) before it confirmed; the "
                 "message may or may not be in the mailbox",
                 code, text);
        c->pub_seq = 0;
        while ((r = g_queue_pop_head(&c->inflight)))
            br_req_complete(c, r, FE_TIMEOUT, why);
    } else if (s) {
        /* only this consumer: the other channels and the connection stay;
         * reopened as soon as no queued frame can be taken for the new
         * channel's (boxes.c), and the broker is requeueing what the old
         * one held for whoever consumes next */
        br_slot_closed(c, s);
        br_slot_cancelled(c, s, text);
        s->retry_ms = br_now_ms();
        c->consumer_retry_ms = s->retry_ms;
    }
}

/* The broker ended one consumer (its queue was deleted, or a quorum queue
 * lost its leader): the channel stays open, its unacked deliveries stay
 * valid; consume again on the same channel, leaving the other alone. */
static void on_cancel(br_conn *c, amqp_channel_t ch, amqp_basic_cancel_t *m)
{
    br_slot *s = br_slot_by_channel(c, ch);
    char tag[BR_QUEUE_MAX + 16], why[BR_QUEUE_MAX + 128];
    if (!s)
        return;
    sc_bytes_str(m->consumer_tag, tag, sizeof tag);
    if (!m->nowait) {
        amqp_basic_cancel_ok_t ok = {m->consumer_tag};
        if (amqp_send_method(c->amqp, ch, AMQP_BASIC_CANCEL_OK_METHOD, &ok) != AMQP_STATUS_OK) {
            br_drop_connection(c, "cannot answer a basic.cancel");
            return;
        }
    }
    snprintf(why, sizeof why, "the broker cancelled consumer %s (queue deleted?); consuming again",
             tag);
    log_warn("broker: %s", why);
    br_slot_cancelled(c, s, why);
}

static void handle_frame(br_conn *c, amqp_frame_t *f)
{
    if (f->frame_type != AMQP_FRAME_METHOD)
        return; /* stray content frames cannot happen: amqp_read_message takes them */
    if (br_probe_frame(c, f) || br_pubchan_frame(c, f))
        return;
    switch (f->payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *a = f->payload.method.decoded;
        if (f->channel == CH_CANARY) {
            /* a canary taken: LavinMQ has disk again (conn.c, send_canary) */
            if (c->low_disk) {
                c->low_disk = false;
                br_set_blocked(c, false, NULL);
            }
            break;
        }
        confirm(c, a->delivery_tag, a->multiple, false);
        break;
    }
    case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *a = f->payload.method.decoded;
        if (f->channel == CH_CANARY)
            break;
        confirm(c, a->delivery_tag, a->multiple, true);
        break;
    }
    case AMQP_BASIC_RETURN_METHOD:
        on_return(c, f->payload.method.decoded);
        break;
    case AMQP_BASIC_DELIVER_METHOD:
        on_deliver(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_BASIC_CANCEL_METHOD:
        on_cancel(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_CHANNEL_CLOSE_METHOD:
        on_async_channel_close(c, f->channel, f->payload.method.decoded);
        break;
    case AMQP_CONNECTION_BLOCKED_METHOD: {
        amqp_connection_blocked_t *m = f->payload.method.decoded;
        char text[256];
        sc_bytes_str(m->reason, text, sizeof text);
        br_set_blocked(c, true, text);
        break;
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
        br_set_blocked(c, false, NULL);
        break;
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_connection_close_t *m = f->payload.method.decoded;
        amqp_connection_close_ok_t ok = {0};
        char text[256];
        sc_bytes_str(m->reply_text, text, sizeof text);
        amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        br_drop_connection(c, text);
        break;
    }
    default:
        break;
    }
}

void br_read_frames(br_conn *c, bool readable)
{
    struct timeval zero = {0, 0};
    amqp_frame_t f;
    int64_t now = br_now_ms(), until = now + READ_BATCH_MS;
    int rc, n = 0;
    if (!readable && !br_buffered(c) && now - c->last_read_ms < READ_IDLE_MS)
        return; /* see READ_IDLE_MS */
    c->last_read_ms = now;
    /* a batch at a time: a stream of deliveries (each ack lets the broker
     * send the next) must not starve the requests waiting in the loop */
    while (c->connected && n++ < READ_BATCH_FRAMES && br_now_ms() < until) {
        rc = amqp_simple_wait_frame_noblock(c->amqp, &f, &zero);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK) {
            br_drop_connection(c, amqp_error_string2(rc));
            return;
        }
        /* a frame read here may have arrived between poll() and now, unseen
         * by it: it still proves the link alive (br_check_silence) */
        br_heard(c);
        handle_frame(c, &f);
        /* what is not buffered yet, the next poll() finds (READ_IDLE_MS) */
        if (!c->connected || !br_buffered(c))
            break;
    }
    if (c->connected)
        amqp_maybe_release_buffers(c->amqp);
}
