/* SPDX-License-Identifier: Apache-2.0 */
/* broker/slots.h — the slot set (slots.c).  For broker/ only. */
#ifndef FLEETFS_BROKER_SLOTS_H
#define FLEETFS_BROKER_SLOTS_H

#include "broker/conn_int.h"

void br_slots_init(br_conn *c);
void br_slots_free(br_conn *c);
/* The slot whose OPEN channel is ch, or NULL (a closed channel's frames
 * are dropped). */
br_slot *br_slot_by_channel(br_conn *c, amqp_channel_t ch);
br_slot *br_slot_by_box(br_conn *c, unsigned box);
/* The broker closed s's channel (close-ok sent): it is reopened later,
 * when no queued frame can be taken for the new channel's. */
void br_slot_closed(br_conn *c, br_slot *s);
/* The broker cancelled s's consumer; the channel stays open. */
void br_slot_cancelled(br_conn *c, br_slot *s, const char *why);
/* The connection is gone: nothing open, declared, bound or consuming. */
void br_slots_lost(br_conn *c);
/* A delivery on s was kept by the owner (BR_KEEP): held until acked. */
void br_slot_kept(br_slot *s, uint64_t tag);
br_slot *br_slot_new(unsigned box, const char *queue, const char *exchange, const char *const *keys,
                     amqp_channel_t ch);
/* s's channel opened or closed (its status; box 0's also br_status). */
void br_slot_set_open(br_conn *c, br_slot *s, bool open);
/* An ack went out on s: tag, or every tag up to it. */
void br_slot_acked(br_slot *s, uint64_t tag, bool multiple);
/* "box N", or what the slot is when it is no caller's box: for the log */
const char *br_slot_what(const br_slot *s, char *buf, size_t n);
/* Box 0 or the receipt queue: the lead's consumer (br_status.consumer). */
bool br_slot_is_lead(const br_slot *s);
/* Set s's consumer state (box 0's and the receipt queue's: also the
 * lead's); whether anything changed. */
bool br_slot_state(br_conn *c, br_slot *s, br_cons cons, const char *reason);
/* Whether br_slot_state(c, s, cons, reason) would change anything. */
bool br_slot_state_differs(br_conn *c, const br_slot *s, br_cons cons, const char *reason);
/* s's bindings (s->bound) and why not, into its shared status. */
void br_slot_bind_state(br_conn *c, br_slot *s, const char *why);
/* The mailboxes are quorum queues (queue_type). */
bool br_quorum(const br_conn *c);

#endif
