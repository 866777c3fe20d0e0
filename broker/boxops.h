/* SPDX-License-Identifier: Apache-2.0 */
/* broker/boxops.h — what callers ask of the boxes, carried out by the
 * broker thread (boxops.c; the callers' side is broker/conn.h).  For
 * broker/ only. */
#ifndef FLEETFS_BROKER_BOXOPS_H
#define FLEETFS_BROKER_BOXOPS_H

#include "broker/conn_int.h"

void br_do_box_add(br_conn *c, br_req *r);
void br_do_box_remove(br_conn *c, br_req *r);
void br_do_ack(br_conn *c, br_req *r);

#endif
