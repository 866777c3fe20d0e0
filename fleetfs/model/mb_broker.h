/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/mb_broker.h — the seam between the mailbox model and the broker.
 *
 * The mailbox never calls br_* directly: it calls this small table, which
 * mb_broker_of() fills with the real broker (broker/conn.h) and the unit
 * tests fill with a fake that records acks and answers publishes as told.
 * Every function may be called from any thread without the mailbox lock.
 */
#ifndef FLEETFS_MB_BROKER_H
#define FLEETFS_MB_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/conn.h"
#include "fleetfs/base/errors.h"

typedef struct {
    void *b;
    /* link, and box's consumer state and consumer generation (br_status
     * .consumer, .consumer_reason, .epoch); box 0 is the lead's mailbox */
    void (*status)(void *b, unsigned box, br_status *st);
    /* ttl_ms: the per-message expiration (br_publish), 0 none */
    fe_code (*publish)(void *b, const char *peer, bool may_create, const char *msg_id,
                       const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                       bool *unread, char *detail, size_t dlen);
    /* publish to exchange with routing key (SPEC 10: fleet.msg, an agent's
     * gid or broadcast.<g>); probe_queue: the mailbox whose consumers say
     * `unread` (NULL: none, a broadcast).  A return (no queue bound to
     * key) is FE_NO_MAILBOX.  May be NULL: no routing. */
    fe_code (*publish_route)(void *b, const char *exchange, const char *key,
                             const char *probe_queue, const char *msg_id, const char *body,
                             size_t len, int64_t ttl_ms, int64_t timeout_ms, bool *unread,
                             char *detail, size_t dlen);
    /* publish and publish_route without the wait (br_publish_start): FE_OK
     * and done told once, later, on the publishing thread (the outcome, or
     * FE_TIMEOUT at timeout_ms); anything else at once, nothing sent, done
     * never told.  May be NULL (the unit tests' fake): the model then calls
     * publish / publish_route and tells done itself. */
    fe_code (*publish_start)(void *b, const char *peer, bool may_create, const char *msg_id,
                             const char *body, size_t len, int64_t ttl_ms, int64_t timeout_ms,
                             br_publish_done done, void *ud, char *detail, size_t dlen);
    fe_code (*publish_route_start)(void *b, const char *exchange, const char *key,
                                   const char *probe_queue, const char *msg_id, const char *body,
                                   size_t len, int64_t ttl_ms, int64_t timeout_ms,
                                   br_publish_done done, void *ud, char *detail, size_t dlen);
    fe_code (*publish_receipt)(void *b, const char *peer, const char *msg_id, const char *body,
                               size_t len, int64_t timeout_ms, char *detail, size_t dlen);
    /* ack one delivery of consumer generation gen of box */
    fe_code (*ack)(void *b, unsigned box, uint64_t gen, uint64_t tag, int64_t timeout_ms);
    /* A local agent's mailbox (SPEC section 10): serve box as the queue
     * agent.<gid>.inbox, bound to fleet.msg with keys (br_box_add): 0, or -1
     * and errno.  Stop serving it (br_box_remove's rules and codes).
     * Whether it is bound and consumed.  May be NULL: no agents. */
    int (*box_add)(void *b, unsigned box, const char *gid, const char *const *keys);
    fe_code (*box_remove)(void *b, unsigned box, bool delete_if_empty, int64_t timeout_ms,
                          char *detail, size_t dlen);
    bool (*box_ready)(void *b, unsigned box);
} mb_broker;

/* The table for a real broker connection. */
mb_broker mb_broker_of(br_conn *c);

#endif
