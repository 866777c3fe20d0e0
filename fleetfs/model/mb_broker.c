/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/mb_broker.c — the real broker behind the mailbox's seam.
 * Box 0 is the lead's mailbox, any other an agent's (broker/conn.h). */
#include "fleetfs/model/mb_broker.h"

#include <string.h>

#include <glib.h>

static void st_real(void *b, unsigned box, br_status *st)
{
    br_box_status bs;
    br_get_status(b, st);
    if (box == BR_BOX_LEAD)
        return;
    /* the link is the connection's; the consumer and its generation the box's */
    if (!br_box_status_get(b, box, &bs)) {
        st->consumer = BR_CONS_NONE;
        g_strlcpy(st->consumer_reason, "not registered with the broker connection",
                  sizeof st->consumer_reason);
        st->epoch = 0;
        st->acks_open = false;
        return;
    }
    st->consumer = bs.consumer;
    g_strlcpy(st->consumer_reason, bs.reason, sizeof st->consumer_reason);
    st->epoch = bs.epoch;
    st->acks_open = bs.acks_open;
}

static fe_code pub_real(void *b, const char *peer, bool may_create, const char *msg_id,
                        const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                        bool *unread, char *detail, size_t dlen)
{
    return br_publish(b, peer, may_create, msg_id, body, len, ttl_ms, timeout_ms, unread, detail,
                      dlen);
}

static fe_code route_real(void *b, const char *exchange, const char *key, const char *probe_queue,
                          const char *msg_id, const char *body, size_t len, int64_t ttl_ms,
                          int64_t timeout_ms, bool *unread, char *detail, size_t dlen)
{
    return br_publish_route(b, exchange, key, probe_queue, msg_id, body, len, ttl_ms, timeout_ms,
                            unread, detail, dlen);
}

static fe_code pub_start_real(void *b, const char *peer, bool may_create, const char *msg_id,
                              const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                              br_publish_done done, void *ud, char *detail, size_t dlen)
{
    return br_publish_start(b, peer, may_create, msg_id, body, len, ttl_ms, timeout_ms, done, ud,
                            detail, dlen);
}

static fe_code route_start_real(void *b, const char *exchange, const char *key,
                                const char *probe_queue, const char *msg_id, const char *body,
                                size_t len, int64_t ttl_ms, int64_t timeout_ms,
                                br_publish_done done, void *ud, char *detail, size_t dlen)
{
    return br_publish_route_start(b, exchange, key, probe_queue, msg_id, body, len, ttl_ms,
                                  timeout_ms, done, ud, detail, dlen);
}

static fe_code rcpt_real(void *b, const char *peer, const char *msg_id, const char *body,
                         size_t len, int64_t timeout_ms, char *detail, size_t dlen)
{
    return br_publish_receipt(b, peer, msg_id, body, len, timeout_ms, detail, dlen);
}

static fe_code ack_real(void *b, unsigned box, uint64_t gen, uint64_t tag, int64_t timeout_ms)
{
    return br_ack_box(b, box, gen, tag, false, timeout_ms);
}

static int box_add_real(void *b, unsigned box, const char *gid, const char *const *keys)
{
    char queue[300];
    br_agent_queue(gid, queue, sizeof queue);
    return br_box_add(b, box, queue, BR_EXCHANGE_MSG, keys);
}

static fe_code box_remove_real(void *b, unsigned box, bool delete_if_empty, int64_t timeout_ms,
                               char *detail, size_t dlen)
{
    return br_box_remove(b, box, delete_if_empty, timeout_ms, detail, dlen);
}

static bool box_ready_real(void *b, unsigned box)
{
    br_box_status bs;
    return br_box_status_get(b, box, &bs) && bs.bound && bs.consumer == BR_CONS_OK;
}

mb_broker mb_broker_of(br_conn *c)
{
    return (mb_broker){.b = c,
                       .status = st_real,
                       .publish = pub_real,
                       .publish_route = route_real,
                       .publish_start = pub_start_real,
                       .publish_route_start = route_start_real,
                       .publish_receipt = rcpt_real,
                       .ack = ack_real,
                       .box_add = box_add_real,
                       .box_remove = box_remove_real,
                       .box_ready = box_ready_real};
}
