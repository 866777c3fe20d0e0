/* SPDX-License-Identifier: Apache-2.0 */
/* broker/frames.h — reading what the broker sent, without blocking
 * (frames.c).  For broker/ only. */
#ifndef FLEETFS_BROKER_FRAMES_H
#define FLEETFS_BROKER_FRAMES_H

#include "broker/conn_int.h"

/* readable: poll() saw the socket readable (see READ_IDLE_MS) */
void br_read_frames(br_conn *c, bool readable);
/* rabbitmq-c holds frames or bytes already read from the socket */
static inline bool br_buffered(br_conn *c)
{
    return amqp_frames_enqueued(c->amqp) || amqp_data_in_buffer(c->amqp);
}

#endif
