/* SPDX-License-Identifier: Apache-2.0 */
/* broker/dlq.h — the operator's hands on fleet.dlq (`fleetfs dlq`).
 *
 * One synchronous connection (declare.h's br_operator_connect), on the
 * calling thread.  A walk takes every dead letter of fleet.dlq in turn with
 * basic.get (manual ack) and shows it to the caller, who says what to do
 * with it: keep it (it goes back, in its place, when the walk's channel
 * closes: the broker requeues what was got and not acked), redrive it, or
 * stop.  A redrive publishes the letter again, the same bytes and msgId,
 * to the queue it died in (its x-death), on the default exchange,
 * mandatory, on a confirm channel: persistent, its content type, message
 * id and type, and its headers but the broker's own `x-` ones (x-death and
 * the first-death ones: a dead letter keeps its past otherwise, and
 * LavinMQ drops a letter that dies twice in one queue for one reason as a
 * loop).  Only once the broker confirmed the copy into that queue is the
 * letter acked, so removed from fleet.dlq; a copy returned (its queue is
 * gone) or nacked (full) leaves the letter where it was.
 */
#ifndef FLEETFS_BROKER_DLQ_H
#define FLEETFS_BROKER_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/conn.h"
#include "broker/death.h"

typedef struct {
    br_death death;        /* x-death, the fleet-host header, message_id */
    char type[32];         /* the AMQP type property ("coord", "receipt"); "" none */
    char content_type[64]; /* "" none */
    bool redelivered;      /* the broker's flag on this get */
    const char *body;      /* valid during the visit only */
    size_t len;
} br_dead_letter;

typedef enum { BR_DLQ_KEEP, BR_DLQ_REDRIVE, BR_DLQ_STOP } br_dlq_action;

/* Called for the index-th letter (0 first, oldest first).  After a
 * BR_DLQ_REDRIVE, redriven is called with its outcome: FE_OK (in its queue,
 * removed from fleet.dlq), FE_NO_MAILBOX (returned: no such queue),
 * FE_FULL (nacked), FE_BAD_INPUT (no queue in its x-death to send it to),
 * FE_ACCESS (this login may not publish there), else FE_INTERNAL; the walk
 * ends after it. */
typedef br_dlq_action (*br_dlq_visit)(void *ud, unsigned index, const br_dead_letter *l);
typedef void (*br_dlq_redriven)(void *ud, unsigned index, fe_code result, const char *detail);

/* Walk fleet.dlq.  0, or -1 with why (unreachable, refused: a 403 says
 * which permission this login lacks).  *count: how many letters were
 * seen. */
int br_dlq_walk(const br_config *cfg, br_dlq_visit visit, br_dlq_redriven redriven, void *ud,
                unsigned *count, char *why, size_t n);

/* Empty fleet.dlq (queue.purge): 0 and *purged, or -1 with why. */
int br_dlq_purge(const br_config *cfg, uint32_t *purged, char *why, size_t n);

#endif
