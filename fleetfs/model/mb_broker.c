/* fleetfs/model/mb_broker.c — the real broker behind the mailbox's seam. */
#include "fleetfs/model/mb_broker.h"

static void st_real(void *b, br_status *st)
{
    br_get_status(b, st);
}

static fe_code pub_real(void *b, const char *peer, bool may_create, const char *msg_id,
                        const char *body, size_t len, int64_t timeout_ms, bool *unread,
                        char *detail, size_t dlen)
{
    return br_publish(b, peer, may_create, msg_id, body, len, timeout_ms, unread, detail, dlen);
}

static fe_code rcpt_real(void *b, const char *peer, const char *msg_id, const char *body,
                         size_t len, int64_t timeout_ms, char *detail, size_t dlen)
{
    return br_publish_receipt(b, peer, msg_id, body, len, timeout_ms, detail, dlen);
}

static fe_code ack_real(void *b, uint64_t gen, uint64_t tag, int64_t timeout_ms)
{
    return br_ack(b, gen, tag, false, timeout_ms);
}

mb_broker mb_broker_of(br_conn *c)
{
    return (mb_broker){.b = c,
                       .status = st_real,
                       .publish = pub_real,
                       .publish_receipt = rcpt_real,
                       .ack = ack_real};
}
