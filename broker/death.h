/* SPDX-License-Identifier: Apache-2.0 */
/* broker/death.h — what the broker says about a message it dead-lettered.
 *
 * A message that expires in a mailbox (its queue's x-message-ttl, or its
 * own expiration) or that a reader rejects is dead-lettered by the broker
 * to fleet.dlx with an `x-death` header: a list of tables, the latest
 * death first, each with `reason` (expired, rejected, maxlen,
 * delivery_limit), `queue`, `time`, `count`, `exchange`.  RabbitMQ and
 * LavinMQ both add `x-first-death-reason` and `x-first-death-queue` too;
 * those are read when there is no x-death.  Every message fleetfs
 * publishes carries BR_HEADER_HOST (its sender's host, the coord_id), which
 * the broker keeps when it dead-letters it: the headers exchange fleet.dead
 * (bound to fleet.dlx) routes it by that header to lead.<host>.dead, the
 * sender's own dead-letter queue (doc/protocol.md section 4).
 */
#ifndef FLEETFS_BROKER_DEATH_H
#define FLEETFS_BROKER_DEATH_H

#include <stddef.h>
#include <stdint.h>

#include <amqp.h>

#include "broker/conn.h"

/* The header that names a message's sender host. */
#define BR_HEADER_HOST "fleet-host"
/* The headers exchange that takes every dead letter from fleet.dlx and
 * routes it by BR_HEADER_HOST, and a host's own dead-letter queue. */
#define BR_EXCHANGE_DEAD "fleet.dead"
/* "lead.<coord_id>.dead" */
void br_dead_queue(const char *coord_id, char *out, size_t n);

typedef struct br_death {
    char reason[32];          /* expired, rejected, maxlen, ...; "" when the broker said none */
    char queue[BR_QUEUE_MAX]; /* the queue it died in; "" unknown */
    int64_t time_s;           /* when (Unix seconds); 0 unknown */
    int64_t count;            /* how often it died there for that reason; 0 unknown */
    char host[72];            /* BR_HEADER_HOST: the sender's host; "" none */
    char msg_id[BR_MSG_ID_MAX + 1]; /* the message_id property; "" none */
} br_death;

/* What props (a delivered message's properties) say; missing or odd
 * fields stay empty (0).  Never fails. */
void br_death_parse(const amqp_basic_properties_t *props, br_death *out);

/* In words, e.g. "expired in lead.beta.inbox at 2026-12-04T13:01:02Z" or
 * "rejected by the reader of lead.beta.inbox at ..." (the broker's reason
 * word first, so a reader can match on it). */
void br_death_words(const br_death *d, char *out, size_t n);

#endif
