/* SPDX-License-Identifier: Apache-2.0 */
/* broker/pubchan.c — the channels the publishing side publishes on, CH_PUB
 * (every send and receipt, in confirm mode) and CH_CANARY, reopened after
 * the broker closed one without the thread waiting (SPEC section 6: nothing
 * in the publishing thread waits on the broker synchronously).
 *
 * The broker closes CH_PUB under the publishes in flight on it (a 406 or
 * 403 of a publish it refuses, LavinMQ's low-disk refusal; frames.c
 * settles those).  The reopen is close-ok and channel.open sent at once
 * (br_reopen_nowait, as the probe channels are reopened); open-ok, then
 * confirm.select and its select-ok come back as frames, read with the
 * others, while the loop goes on serving confirms, probes, the timers of
 * send_timeout and deliveries.  Publishes meant for CH_PUB meanwhile wait
 * here in order and go out, in that order, once it is in confirm mode
 * again; a writer whose send_timeout passes first is answered ETIMEDOUT by
 * the timer as ever, and its publish still goes out (late_confirm records
 * it).  A reopen the broker does not answer within PUB_REOPEN_MS drops the
 * connection, which tells those publishes they were never sent; a dead link
 * is found sooner, by the ping (probes.c counts the reopen as unanswered).
 *
 * CH_CANARY is reopened the same way; while LavinMQ refuses publishes for
 * low disk it is put in confirm mode, also without waiting, and no canary
 * goes out until that is answered.
 */
#include "broker/pubchan.h"

#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/state.h"
#include "fleetfs/base/log.h"

void br_pubchan_init(br_conn *c)
{
    g_queue_init(&c->pubheld);
}

void br_pubchan_opened(br_conn *c)
{
    c->pub_ch = PCH_OPEN;
    c->canary_ch = PCH_OPEN;
}

int br_pubchan_closed(br_conn *c, amqp_channel_t ch)
{
    if (br_reopen_nowait(c, ch) < 0)
        return -1;
    if (ch == CH_PUB) {
        c->pub_ch = PCH_OPENING;
        c->pub_reopen_ms = br_now_ms();
    } else {
        c->canary_ch = PCH_OPENING;
        c->canary_reopen_ms = br_now_ms();
    }
    return 0;
}

/* confirm.select on ch, its select-ok read as a frame. */
static int select_nowait(br_conn *c, amqp_channel_t ch)
{
    amqp_confirm_select_t m = {.nowait = 0};
    return amqp_send_method(c->amqp, ch, AMQP_CONFIRM_SELECT_METHOD, &m) == AMQP_STATUS_OK ? 0 : -1;
}

/* CH_PUB is open and in confirm mode again: what waited goes out, in
 * order (a publish that fails drops the connection, which tells the rest). */
static void pub_flush(br_conn *c)
{
    br_req *r;
    unsigned n = g_queue_get_length(&c->pubheld);
    if (n)
        log_info("%s: the publish channel is open again after %lld ms; %u publish%s that "
                 "waited for it go%s out now",
                 br_who(c), (long long)(br_now_ms() - c->pub_reopen_ms), n, n == 1 ? "" : "es",
                 n == 1 ? "es" : "");
    while (c->connected && c->pub_ch == PCH_OPEN && (r = g_queue_pop_head(&c->pubheld))) {
        if (c->st.blocked) /* blocked while it waited */
            br_req_complete(c, r, FE_BLOCKED, "the broker blocks publishing (resource alarm)");
        else
            br_publish_now(c, r);
    }
}

bool br_pubchan_frame(br_conn *c, const amqp_frame_t *f)
{
    br_pch *st;
    if (f->frame_type != AMQP_FRAME_METHOD || (f->channel != CH_PUB && f->channel != CH_CANARY))
        return false;
    st = f->channel == CH_PUB ? &c->pub_ch : &c->canary_ch;
    switch (f->payload.method.id) {
    case AMQP_CHANNEL_OPEN_OK_METHOD:
        if (*st != PCH_OPENING)
            return true;
        if (f->channel == CH_CANARY) { /* no confirms, until low_disk wants them */
            *st = PCH_OPEN;
            return true;
        }
        if (select_nowait(c, CH_PUB) < 0) {
            br_drop_connection(c, "cannot put the reopened publish channel in confirm mode");
            return true;
        }
        *st = PCH_SELECTING;
        return true;
    case AMQP_CONFIRM_SELECT_OK_METHOD:
        if (*st != PCH_SELECTING)
            return true;
        *st = PCH_OPEN;
        if (f->channel == CH_CANARY)
            c->canary_confirms = true;
        else
            pub_flush(c);
        return true;
    default:
        return false;
    }
}

void br_pub_send(br_conn *c, br_req *r)
{
    if (c->pub_ch == PCH_OPEN && g_queue_is_empty(&c->pubheld))
        br_publish_now(c, r);
    else
        g_queue_push_tail(&c->pubheld, r);
}

bool br_canary_ready(br_conn *c)
{
    if (c->canary_ch != PCH_OPEN)
        return false;
    if (c->low_disk && !c->canary_confirms) {
        if (select_nowait(c, CH_CANARY) < 0) {
            br_drop_connection(c, "cannot put the canary channel in confirm mode");
            return false;
        }
        c->canary_ch = PCH_SELECTING;
        c->canary_reopen_ms = br_now_ms();
        return false;
    }
    return true;
}

int64_t br_pubchan_waiting_since(const br_conn *c)
{
    int64_t since = 0;
    if (c->pub_ch != PCH_OPEN)
        since = c->pub_reopen_ms;
    if (c->canary_ch != PCH_OPEN && (!since || c->canary_reopen_ms < since))
        since = c->canary_reopen_ms;
    return since;
}

void br_pubchan_tick(br_conn *c)
{
    int64_t since = br_pubchan_waiting_since(c);
    char why[200];
    if (!since || br_now_ms() - since < PUB_REOPEN_MS)
        return;
    snprintf(why, sizeof why,
             "the broker has not opened the %s channel again %lld ms after it closed it",
             c->pub_ch != PCH_OPEN ? "publish" : "canary", (long long)(br_now_ms() - since));
    br_drop_connection(c, why);
}

void br_pubchan_lost(br_conn *c, const char *why)
{
    br_req *r;
    char detail[400];
    snprintf(detail, sizeof detail,
             "%s while the publish channel was reopening, before the message was published; "
             "nothing was sent",
             why);
    while ((r = g_queue_pop_head(&c->pubheld)))
        br_req_complete(c, r, FE_NOT_CONNECTED, detail);
}

/* Put r on CH_PUB now (open, in confirm mode): basic.publish, and r waits
 * in `inflight` for its confirm. */
void br_publish_now(br_conn *c, br_req *r)
{
    amqp_basic_properties_t props;
    amqp_table_entry_t host_hdr;
    char expiration[24];
    int rc;

    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes(r->msg_id);
    props.type = amqp_cstring_bytes(r->receipt ? "receipt" : "coord");
    /* the sender's host: kept by the broker when it dead-letters the
     * message, which fleet.dead routes home by it (broker/death.h) */
    host_hdr.key = amqp_cstring_bytes(BR_HEADER_HOST);
    host_hdr.value.kind = AMQP_FIELD_KIND_UTF8;
    host_hdr.value.value.bytes = amqp_cstring_bytes(c->cfg.coord_id ? c->cfg.coord_id : "");
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers.num_entries = 1;
    props.headers.entries = &host_hdr;
    if (r->ttl_ms > 0) {
        /* the broker drops it itself once it waited this long */
        snprintf(expiration, sizeof expiration, "%lld", (long long)r->ttl_ms);
        props._flags |= AMQP_BASIC_EXPIRATION_FLAG;
        props.expiration = amqp_cstring_bytes(expiration);
    }
    rc = amqp_basic_publish(c->amqp, CH_PUB, amqp_cstring_bytes(r->exchange),
                            amqp_cstring_bytes(r->exchange[0] ? r->key : r->queue), 1, 0, &props,
                            (amqp_bytes_t){r->len, r->body});
    if (rc != AMQP_STATUS_OK) {
        br_req_complete(c, r, FE_NOT_CONNECTED, amqp_error_string2(rc));
        br_drop_connection(c, amqp_error_string2(rc));
        return;
    }
    r->pub_tag = ++c->pub_seq;
    c->last_pub_ms = br_now_ms();
    g_queue_push_tail(&c->inflight, r);
}
