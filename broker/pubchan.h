/* SPDX-License-Identifier: Apache-2.0 */
/* broker/pubchan.h — CH_PUB and CH_CANARY, reopened without waiting, and
 * the publish put on CH_PUB (pubchan.c).  For broker/ only. */
#ifndef FLEETFS_BROKER_PUBCHAN_H
#define FLEETFS_BROKER_PUBCHAN_H

#include "broker/conn_int.h"

void br_pubchan_init(br_conn *c);
/* A new connection opened both (session.c). */
void br_pubchan_opened(br_conn *c);
/* The broker closed ch, CH_PUB or CH_CANARY (its in-flight publishes are
 * the caller's to settle): close-ok and channel.open sent; -1 when that
 * failed (the caller drops the connection). */
int br_pubchan_closed(br_conn *c, amqp_channel_t ch);
/* A frame of CH_PUB's or CH_CANARY's reopening (open-ok, select-ok):
 * taken (true), or not one (false).  CH_PUB open again in confirm mode
 * publishes what waited for it, in order. */
bool br_pubchan_frame(br_conn *c, const amqp_frame_t *f);
/* r (an RQ_PUBLISH ready to go) is published now, or waits for CH_PUB
 * when it is reopening or others wait already (in order). */
void br_pub_send(br_conn *c, br_req *r);
/* The canary may go on CH_CANARY now: open, and in confirm mode when
 * low_disk wants it (put there without waiting: false meanwhile). */
bool br_canary_ready(br_conn *c);
/* Since when a reopen has not been answered (0: none), for the ping. */
int64_t br_pubchan_waiting_since(const br_conn *c);
/* Each turn: a reopen unanswered for PUB_REOPEN_MS drops the connection. */
void br_pubchan_tick(br_conn *c);
/* The connection is gone: what waited for CH_PUB was never sent. */
void br_pubchan_lost(br_conn *c, const char *why);
/* Put r on CH_PUB now (open, in confirm mode): basic.publish, and r waits
 * in `inflight` for its confirm */
void br_publish_now(br_conn *c, br_req *r);

#endif
