/* SPDX-License-Identifier: Apache-2.0 */
/* broker/probes.h — passive declares that never hold the broker thread
 * (probes.c).  For broker/ only. */
#ifndef FLEETFS_BROKER_PROBES_H
#define FLEETFS_BROKER_PROBES_H

#include "broker/conn_int.h"

void br_probes_init(br_conn *c);
void br_probes_free(br_conn *c);
/* Open the probe channels of a new connection (-1: it failed). */
int br_probes_open(br_conn *c);
/* The connection is gone (or closing): every waiter is told so (a publish
 * waiting for its probe was never sent: FE_NOT_CONNECTED). */
void br_probes_lost(br_conn *c, const char *why);
/* Ask for a passive declare of r->queue on r's behalf, waiting at most
 * wait_ms for the answer (one in flight per queue: r joins it).  When it
 * comes, or the wait is over, an RQ_PROBE is completed with it and an
 * RQ_PUBLISH goes on in br_publish_probed. */
void br_probe_ask(br_conn *c, br_req *r, int64_t wait_ms);
/* br_probe_ask with a declare that creates r->queue (the mailbox
 * arguments) instead of a passive one: a configured peer's mailbox made
 * before the first publish to it, without holding this thread.  Its
 * answer goes to br_publish_probed like a probe's (r->create_asked). */
void br_probe_create(br_conn *c, br_req *r, int64_t wait_ms);
/* r, a routed publish, waits for a passive declare of r->exchange on
 * CH_XCHECK (sent now, or joined when one is out): when the broker answers
 * that it exists, the publish goes on (br_publish_go); a 404 (or 403)
 * completes it FE_NO_MAILBOX (FE_ACCESS), nothing sent.  The thread never
 * waits for the answer. */
void br_exchange_ask(br_conn *c, br_req *r);
/* A passive declare of queue that nobody waits for (the consumer's gate,
 * boxes.c): true when it went out or one is already out, false when every
 * probe channel is busy.  Its answer is settled as any probe's and told
 * to br_slots_answered. */
bool br_probe_send(br_conn *c, const char *queue);
/* A publish to queue is waiting for its probe (so the next one to queue
 * waits behind it, in order). */
bool br_probe_publish_waiting(br_conn *c, const char *queue);
/* A frame on a probe channel: taken (true), or not one (false). */
bool br_probe_frame(br_conn *c, const amqp_frame_t *f);
/* Waiters whose time is up leave (each turn of the loop). */
void br_probes_tick(br_conn *c);

#endif
