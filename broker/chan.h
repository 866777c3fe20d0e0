/* SPDX-License-Identifier: Apache-2.0 */
/* broker/chan.h — AMQP channel helpers of the broker thread (chan.c).
 * For broker/ only. */
#ifndef FLEETFS_BROKER_CHAN_H
#define FLEETFS_BROKER_CHAN_H

#include "broker/conn_int.h"

int br_open_channel(br_conn *c, amqp_channel_t ch);
/* The broker closed ch (not a consumer's): close-ok, and channel.open sent
 * without waiting for its open-ok, which comes as a frame; the caller
 * takes ch into use again then.  -1: the sends failed (drop the
 * connection).  probes.c and pubchan.c reopen their channels with it. */
int br_reopen_nowait(br_conn *c, amqp_channel_t ch);
/* This login may not bind control.<me> to fleet.control: from now on it
 * is not tried, and that is said once (info, with what makes the binding) */
void br_control_not_bindable(br_conn *c);
/* The same for lead.<me>.dead and fleet.dead */
void br_dead_not_bindable(br_conn *c, const char *why);
int br_rpc_failure(br_conn *c, amqp_channel_t ch, int *code, char *text, size_t n);
int br_declare_queue(br_conn *c, const char *queue, bool passive, br_probe *p);
/* What the answer to a queue.declare of queue says, into p (at_ms and
 * detail already set): ok, the declare-ok, or else the code of the
 * broker's channel.close.  An answer that tells whether the queue is
 * there (ok, 404) is cached and noted in `declared`. */
void br_probe_settle(br_conn *c, const char *queue, const amqp_queue_declare_ok_t *ok, int code,
                     br_probe *p);

#endif
