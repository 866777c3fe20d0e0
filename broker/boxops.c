/* SPDX-License-Identifier: Apache-2.0 */
/* broker/boxops.c — what callers ask of the boxes (boxes.c has the slots
 * and their consumers).
 *
 * Each request is carried out by the broker thread (br_do_box_add,
 * br_do_box_remove, br_do_ack, called from conn.c's loop); the public side
 * below them (any thread) checks what it can, queues the request and,
 * where the caller needs the answer (a removal, an ack), waits for it with
 * a deadline.  A box is added without waiting: the next consumer round
 * (boxes.c) declares, binds and consumes it, and its status says how that
 * went.  A removal closes the box's channel first (what it held goes back
 * to the queue), then deletes the queue if empty or only unbinds it; a
 * queue that still holds messages is consumed again, never lost.  An ack
 * names the channel epoch it was delivered on: one from an earlier channel
 * is refused, as the broker redelivers that message anyway.  The control
 * queue (SPEC section 11) is one more box, BR_BOX_CONTROL.
 *
 * The slot helpers both files use (creating one, its open and consumer
 * state, acked tags, binding a key) are boxes.c's, declared in conn_int.h.
 */
#include "broker/boxops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/boxes.h"
#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "fleetfs/base/log.h"

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
        s = br_slot_new(r->box, r->queue, r->exchange, (const char *const *)r->keys, ch);
        g_mutex_lock(&c->lock);
        g_ptr_array_add(c->slots, s);
        g_mutex_unlock(&c->lock);
        char b[32];
        /* the own dead letters' queue: its consume line says it (and a
         * per-host login never binds it itself) */
        if (r->box != BR_BOX_DEAD)
            log_info("broker: %s: %s on channel %u%s%s", br_slot_what(s, b, sizeof b), r->queue, ch,
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
    br_slot_set_open(c, s, false);
    s->consuming = false;
    return 0;
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
        if ((rc = br_bind_one(c, s, *k, false, text, n)) < 0)
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
    br_slot_state(c, s, BR_CONS_NONE, "being removed");
    if (r->delete_if_empty) {
        if (br_quorum(c) && quorum_delete(c, s, &code, text, sizeof text) < 0) {
            br_req_complete(c, r, FE_NOT_CONNECTED, "the connection was lost; the box stays");
            return;
        }
        if (!br_quorum(c) &&
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
            br_slot_state(c, s, BR_CONS_NONE, "kept (not removed): consuming it again");
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
            int rc = br_bind_one(c, s, *k, false, text, sizeof text);
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
    br_slot_acked(s, r->tag, r->multiple);
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

/* One of this host's own queues consumed as a box of the consuming
 * connection (nobody waits: the broker thread finishes it), bound in
 * `exchange` with the key (or header value) <coord_id> where this login
 * may bind. */
static int own_consume(br_conn *c, bool wanted, unsigned box,
                       void (*queue_of)(const char *, char *, size_t), const char *exchange)
{
    br_req *r;

    if (!wanted || c->publisher) {
        errno = EINVAL;
        return -1;
    }
    r = br_req_new(RQ_BOX_ADD);
    r->box = box;
    queue_of(c->cfg.coord_id, r->queue, sizeof r->queue);
    g_strlcpy(r->exchange, exchange, sizeof r->exchange);
    g_strfreev(r->keys);
    r->keys = g_new0(char *, 2);
    r->keys[0] = g_strdup(c->cfg.coord_id);
    br_req_submit(c, r);
    br_req_unref(r);
    return 0;
}

/* control.<me>, bound with key <coord_id> (control_bindable) */
int br_control_consume(br_conn *c)
{
    return own_consume(c, c->cb.control != NULL, BR_BOX_CONTROL, br_control_queue,
                       BR_EXCHANGE_CONTROL);
}

/* lead.<me>.dead, bound by BR_HEADER_HOST (dead_bindable) */
int br_dead_consume(br_conn *c)
{
    return own_consume(c, c->cb.dead != NULL, BR_BOX_DEAD, br_dead_queue, BR_EXCHANGE_DEAD);
}

/* The status of one of this host's own queues (own_consume); false while
 * it is not consumed. */
static bool own_status(br_conn *c, unsigned box, br_box_status *out)
{
    br_slot *s;
    g_mutex_lock(&c->lock);
    s = br_slot_by_box(c, box);
    if (s)
        *out = s->st;
    g_mutex_unlock(&c->lock);
    return s != NULL;
}

bool br_dead_status(br_conn *c, br_box_status *out)
{
    return own_status(c, BR_BOX_DEAD, out);
}

bool br_control_status(br_conn *c, br_box_status *out)
{
    return own_status(c, BR_BOX_CONTROL, out);
}

fe_code br_ack_control(br_conn *c, uint64_t epoch, uint64_t tag, bool reject, int64_t timeout_ms)
{
    return ack_or_reject(c, BR_BOX_CONTROL, epoch, tag, false, reject, timeout_ms);
}
