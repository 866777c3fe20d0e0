/* SPDX-License-Identifier: Apache-2.0 */
/* broker/boxes.h — setting up the consumers of the slots (boxes.c).  For
 * broker/ only. */
#ifndef FLEETFS_BROKER_BOXES_H
#define FLEETFS_BROKER_BOXES_H

#include "broker/conn_int.h"

/* Declare, bind and consume what is due (box 0 and the receipt queue as
 * the lead's consumer, then the other boxes). */
void br_setup_consumer(br_conn *c);
/* The broker answered a passive declare of queue (a declare-ok or a
 * channel.close): a box of that queue waiting at its gate goes on.
 * probes.c reaches it through the br_up hook (conn_int.h). */
void br_slots_answered(br_conn *c, const char *queue);
/* Box 0 or the receipt queue waits at its gate (its consume not tried yet). */
bool br_lead_gated(br_conn *c);
/* Bind (or unbind) s's queue to its exchange with key, on the probe
 * channel: 0, the broker's code (text says why), or -1 (connection gone). */
int br_bind_one(br_conn *c, const br_slot *s, const char *key, bool bind, char *text, size_t n);

#endif
