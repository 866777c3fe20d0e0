/* SPDX-License-Identifier: Apache-2.0 */
/* broker/chan.c — the AMQP helpers every part of the broker thread uses on
 * a channel: open and reopen one, classify a failed synchronous call
 * (channel-level or the connection gone), a queue.declare and what its
 * answer says (the probe cache), and what this login may not bind (said
 * once).  Below the parts that set up consumers, probe and publish: of
 * the thread's parts it calls only state.h and the slot set (slots.h)
 * (besides topology.h's mailbox arguments and sideconn.h's broker words
 * as a string), and drops a connection
 * through the br_up hook (conn_int.h).  Used through broker/chan.h.
 */
#include "broker/chan.h"

#include <glib.h>
#include <string.h>

#include <amqp.h>

#include "broker/death.h"
#include "broker/sideconn.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

/* ------------------------------------------------------------------ */
/* AMQP helpers (broker thread)                                        */

/* (Re)open ch, one that consumes nothing (consumer channels: boxes.c). */
int br_open_channel(br_conn *c, amqp_channel_t ch)
{
    if (!amqp_channel_open(c->amqp, ch))
        return -1;
    if (ch == CH_PUB && !amqp_confirm_select(c->amqp, ch))
        return -1;
    return 0;
}

int br_reopen_nowait(br_conn *c, amqp_channel_t ch)
{
    amqp_channel_close_ok_t close_ok = {0};
    amqp_channel_open_t open = {.out_of_band = amqp_empty_bytes};
    if (amqp_send_method(c->amqp, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok) != AMQP_STATUS_OK ||
        amqp_send_method(c->amqp, ch, AMQP_CHANNEL_OPEN_METHOD, &open) != AMQP_STATUS_OK)
        return -1;
    return 0;
}

/* After a synchronous call failed: classify the failure.  A channel-level
 * error is answered with close-ok and the channel reopened (returns 0, with
 * the broker's code and text) — a consumer channel later, when it is safe
 * (boxes.c); anything else means the connection is gone (returns -1). */
int br_rpc_failure(br_conn *c, amqp_channel_t ch, int *code, char *text, size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(c->amqp);
    *code = 0;
    text[0] = '\0';
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = rep.reply.decoded;
        amqp_channel_close_ok_t ok = {0};
        br_heard(c); /* an answer: the link works */
        *code = m->reply_code;
        sc_bytes_str(m->reply_text, text, n);
        br_slot *s = br_slot_by_channel(c, ch);
        if (amqp_send_method(c->amqp, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK)
            return -1;
        if (s) {
            br_slot_closed(c, s);
            return 0;
        }
        return br_open_channel(c, ch);
    }
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = rep.reply.decoded;
        amqp_connection_close_ok_t ok = {0};
        *code = m->reply_code;
        sc_bytes_str(m->reply_text, text, n);
        amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        return -1;
    }
    if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        g_strlcpy(text, amqp_error_string2(rep.library_error), n);
    else
        g_strlcpy(text, "unexpected reply from the broker", n);
    return -1;
}

void br_probe_settle(br_conn *c, const char *queue, const amqp_queue_declare_ok_t *ok, int code,
                     br_probe *p)
{
    br_probe old;
    if (ok) {
        p->valid = true;
        p->present = true;
        p->messages = ok->message_count;
        p->consumers = ok->consumer_count;
    } else if (code == 404) {
        p->valid = true;
        p->present = false;
        p->err = FE_NO_MAILBOX;
        p->create_refused = br_probe_cached(c, queue, &old) && old.create_refused;
    } else {
        p->valid = false;
        p->err = code == 403 ? FE_ACCESS : code == 406 ? FE_MISMATCH : FE_INTERNAL;
        return;
    }
    br_cache_probe(c, queue, p);
    if (p->present)
        g_hash_table_add(c->declared, g_strdup(queue));
    else
        g_hash_table_remove(c->declared, queue);
}

/* Passive declare (or a real one with the mailbox arguments) on the probe
 * channel.  Returns -1 when the connection died. */
int br_declare_queue(br_conn *c, const char *queue, bool passive, br_probe *p)
{
    amqp_table_entry_t entries[TOPO_MAILBOX_ARGS];
    amqp_table_t args = passive ? amqp_empty_table : topo_mailbox_args(&c->cfg, entries);
    amqp_queue_declare_ok_t *ok;
    int code = 0;

    memset(p, 0, sizeof *p);
    p->at_ms = br_now_ms();
    ok = amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(queue), passive, 1, 0, 0, args);
    if (ok) {
        br_heard(c);
    } else if (br_rpc_failure(c, CH_PROBE, &code, p->detail, sizeof p->detail) < 0) {
        br_drop_connection(c, p->detail);
        p->err = FE_NOT_CONNECTED;
        return -1;
    }
    br_probe_settle(c, queue, ok, code, p);
    return 0;
}

void br_dead_not_bindable(br_conn *c, const char *why)
{
    c->dead_bindable = false;
    if (c->dead_unbound_said)
        return;
    c->dead_unbound_said = true;
    log_info("broker: this login may not configure %s (%s), so lead.%s.dead is not bound to it "
             "here: dead letters of %s's messages come home only once an operator has run "
             "`fleetfs declare %s` (fleetfs-broker host add, or host update for a host added "
             "before this), which binds it",
             BR_EXCHANGE_DEAD, why, c->cfg.coord_id, c->cfg.coord_id, c->cfg.coord_id);
}

void br_control_not_bindable(br_conn *c)
{
    c->control_bindable = false;
    if (c->control_unbound_said)
        return;
    c->control_unbound_said = true;
    log_info("broker: this login may not configure %s, so control.%s is not bound to it "
             "here: requests to start agents on %s reach it only once an operator has run "
             "`fleetfs declare %s` (fleetfs-broker host add does), which binds it",
             BR_EXCHANGE_CONTROL, c->cfg.coord_id, c->cfg.coord_id, c->cfg.coord_id);
}
