/* SPDX-License-Identifier: Apache-2.0 */
/* broker/dlq.c — fleet.dlq walked, redriven and purged (dlq.h). */
#include "broker/dlq.h"

#include <stdio.h>
#include <string.h>

#include <glib.h>

#include <amqp.h>

#include "broker/declare.h"
#include "broker/topology.h"

#define DQ_GET_CH 1 /* br_operator_connect's channel: the walk's gets */
#define DQ_PUB_CH 2 /* the redrive's confirm channel */
#define DQ_WAIT_S 5

/* Why the last call failed, in words (a 403 says which rights are
 * missing); sends close-ok for a closed channel.  The reply code, or 0. */
static int dq_failed(amqp_connection_state_t a, amqp_channel_t ch, const char *what, char *why,
                     size_t n)
{
    amqp_rpc_reply_t rep = amqp_get_rpc_reply(a);
    int code = 0;
    char text[256] = "";

    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = rep.reply.decoded;
        amqp_channel_close_ok_t ok = {0};
        code = m->reply_code;
        snprintf(text, sizeof text, "%.*s", (int)m->reply_text.len,
                 (const char *)m->reply_text.bytes);
        amqp_send_method(a, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        /* the walk's channel open again, so that closing it at the end is
         * an ordinary close, not one of a closed channel (a connection
         * error) */
        if (ch == DQ_GET_CH)
            amqp_channel_open(a, ch);
        snprintf(why, n, "%s: %d %s%s", what, code, text,
                 code == 403   ? " (this broker login may not: fleetfs dlq is the operator's, with "
                                 "read on fleet.dlq and, to redrive, write on the default "
                                 "exchange; a host's own login may not read fleet.dlq)"
                 : code == 404 ? " (no fleet.dlq: it is made by the first mount on a login that "
                                 "may configure, or by fleetfs-broker host add)"
                               : "");
    } else if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION) {
        snprintf(why, n, "%s: the broker closed the connection", what);
    } else if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        snprintf(why, n, "%s: %s", what, amqp_error_string2(rep.library_error));
    } else {
        snprintf(why, n, "%s: no answer", what);
    }
    return code;
}

static void bytes_str(amqp_bytes_t b, char *out, size_t n)
{
    snprintf(out, n, "%.*s", (int)b.len, (const char *)b.bytes);
}

/* Publish l's copy to its queue on the confirm channel, and wait for the
 * broker's answer. */
static fe_code redrive(amqp_connection_state_t a, const amqp_message_t *m, const char *queue,
                       char *detail, size_t n)
{
    amqp_basic_properties_t p;
    amqp_table_entry_t *kept;
    const amqp_basic_properties_t *o = &m->properties;
    struct timeval tv = {DQ_WAIT_S, 0};
    bool returned = false;
    fe_code res = FE_INTERNAL;
    int k = 0, rc;

    if (!queue[0]) {
        snprintf(detail, n, "its x-death names no queue: where it came from is not known");
        return FE_BAD_INPUT;
    }
    if (!amqp_channel_open(a, DQ_PUB_CH) || !amqp_confirm_select(a, DQ_PUB_CH)) {
        int code = dq_failed(a, DQ_PUB_CH, "open a confirm channel", detail, n);
        return code == 403 ? FE_ACCESS : FE_INTERNAL;
    }
    memset(&p, 0, sizeof p);
    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = 2;
    if (o->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG) {
        p._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        p.content_type = o->content_type;
    }
    if (o->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = o->message_id;
    }
    if (o->_flags & AMQP_BASIC_TYPE_FLAG) {
        p._flags |= AMQP_BASIC_TYPE_FLAG;
        p.type = o->type;
    }
    kept = g_new0(amqp_table_entry_t,
                  (o->_flags & AMQP_BASIC_HEADERS_FLAG) ? (size_t)o->headers.num_entries + 1 : 1);
    if (o->_flags & AMQP_BASIC_HEADERS_FLAG)
        for (int i = 0; i < o->headers.num_entries; i++) {
            const amqp_table_entry_t *e = &o->headers.entries[i];
            if (e->key.len >= 2 && memcmp(e->key.bytes, "x-", 2) == 0)
                continue; /* the broker's own: x-death, x-first-death-* */
            kept[k++] = *e;
        }
    if (k) {
        p._flags |= AMQP_BASIC_HEADERS_FLAG;
        p.headers.num_entries = k;
        p.headers.entries = kept;
    }
    rc = amqp_basic_publish(a, DQ_PUB_CH, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0, &p,
                            m->body);
    g_free(kept);
    if (rc != AMQP_STATUS_OK) {
        snprintf(detail, n, "publish: %s", amqp_error_string2(rc));
        return FE_INTERNAL;
    }
    for (;;) {
        amqp_frame_t f;
        rc = amqp_simple_wait_frame_noblock(a, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT) {
            snprintf(detail, n,
                     "no confirm from the broker within %d s: whether %s has it is not "
                     "known; the letter stays in fleet.dlq",
                     DQ_WAIT_S, queue);
            return FE_TIMEOUT;
        }
        if (rc != AMQP_STATUS_OK) {
            snprintf(detail, n, "connection lost: %s", amqp_error_string2(rc));
            return FE_INTERNAL;
        }
        if (f.frame_type != AMQP_FRAME_METHOD || f.channel != DQ_PUB_CH)
            continue;
        if (f.payload.method.id == AMQP_BASIC_RETURN_METHOD) {
            amqp_basic_return_t *r = f.payload.method.decoded;
            amqp_message_t back;
            char text[128];
            bytes_str(r->reply_text, text, sizeof text);
            snprintf(detail, n, "the broker returned it (%d %s): there is no queue %s",
                     r->reply_code, text, queue);
            returned = true;
            if (amqp_read_message(a, DQ_PUB_CH, &back, 0).reply_type == AMQP_RESPONSE_NORMAL)
                amqp_destroy_message(&back);
            continue;
        }
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            res = returned ? FE_NO_MAILBOX : FE_OK;
            break;
        }
        if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            snprintf(detail, n, "the broker refused it (nack): %s is full", queue);
            res = FE_FULL;
            break;
        }
        if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m2 = f.payload.method.decoded;
            amqp_channel_close_ok_t ok = {0};
            char text[256];
            bytes_str(m2->reply_text, text, sizeof text);
            snprintf(detail, n, "the broker closed the channel: %d %s", m2->reply_code, text);
            res = m2->reply_code == 403 ? FE_ACCESS : FE_INTERNAL;
            amqp_send_method(a, DQ_PUB_CH, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
            return res;
        }
    }
    amqp_channel_close(a, DQ_PUB_CH, AMQP_REPLY_SUCCESS);
    return res;
}

int br_dlq_walk(const br_config *cfg, br_dlq_visit visit, br_dlq_redriven redriven, void *ud,
                unsigned *count, char *why, size_t n)
{
    amqp_connection_state_t a = br_operator_connect(cfg, why, n, NULL, 0);
    int rc = 0;

    *count = 0;
    if (!a)
        return -1;
    for (;;) {
        amqp_rpc_reply_t rep = amqp_basic_get(a, DQ_GET_CH, amqp_cstring_bytes(TOPO_DLQ), 0);
        amqp_basic_get_ok_t *ok;
        amqp_message_t m;
        br_dead_letter l;
        br_dlq_action act;
        uint64_t tag;

        if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
            dq_failed(a, DQ_GET_CH, "get from " TOPO_DLQ, why, n);
            rc = -1;
            break;
        }
        if (rep.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        ok = rep.reply.decoded;
        tag = ok->delivery_tag;
        memset(&l, 0, sizeof l);
        l.redelivered = ok->redelivered;
        if (amqp_read_message(a, DQ_GET_CH, &m, 0).reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(why, n, "cannot read a dead letter of %s", TOPO_DLQ);
            rc = -1;
            break;
        }
        br_death_parse(&m.properties, &l.death);
        if (m.properties._flags & AMQP_BASIC_TYPE_FLAG)
            bytes_str(m.properties.type, l.type, sizeof l.type);
        if (m.properties._flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
            bytes_str(m.properties.content_type, l.content_type, sizeof l.content_type);
        l.body = m.body.bytes;
        l.len = m.body.len;
        act = visit(ud, (*count)++, &l);
        if (act == BR_DLQ_REDRIVE) {
            char detail[512] = "";
            fe_code res = redrive(a, &m, l.death.queue, detail, sizeof detail);
            if (res == FE_OK && amqp_basic_ack(a, DQ_GET_CH, tag, 0) != AMQP_STATUS_OK) {
                res = FE_INTERNAL;
                snprintf(detail, sizeof detail,
                         "the copy is in %s, but the ack of the letter could not be sent: it "
                         "stays in %s too",
                         l.death.queue, TOPO_DLQ);
            } else if (res == FE_OK) {
                snprintf(detail, sizeof detail, "the broker confirmed it into %s; removed from %s",
                         l.death.queue, TOPO_DLQ);
            }
            if (redriven)
                redriven(ud, *count - 1, res, detail);
            act = BR_DLQ_STOP;
        }
        amqp_destroy_message(&m);
        if (act == BR_DLQ_STOP)
            break;
    }
    /* closing the channel gives back every letter got and not acked, in
     * its place */
    br_operator_close(a);
    return rc;
}

int br_dlq_purge(const br_config *cfg, uint32_t *purged, char *why, size_t n)
{
    amqp_connection_state_t a = br_operator_connect(cfg, why, n, NULL, 0);
    amqp_queue_purge_ok_t *ok;
    int rc = -1;

    *purged = 0;
    if (!a)
        return -1;
    ok = amqp_queue_purge(a, DQ_GET_CH, amqp_cstring_bytes(TOPO_DLQ));
    if (ok) {
        *purged = ok->message_count;
        rc = 0;
    } else {
        dq_failed(a, DQ_GET_CH, "purge " TOPO_DLQ, why, n);
    }
    br_operator_close(a);
    return rc;
}
