/* SPDX-License-Identifier: Apache-2.0 */
/* broker/declare.h — what an operator makes for a host before it mounts
 * (`fleetfs declare`, run by `scripts/broker host add`).
 *
 * With per-host logins (doc/security.md) a host may configure nothing but
 * its own queues, so the fleet-wide objects and a host's mailbox must be
 * made by someone who may: the operator, with a login that has configure
 * rights on the vhost.  One short synchronous connection, on the calling
 * thread (no broker thread runs in this mode).  The arguments come from
 * broker/topology.c, the same table every fleetfs declares with, so the
 * queues made here are the ones the host's fleetfs expects (a difference
 * would be a 406 at its start).
 */
#ifndef FLEETFS_BROKER_DECLARE_H
#define FLEETFS_BROKER_DECLARE_H

#include <stddef.h>

#include <amqp.h>

#include "broker/conn.h"

/* Connects to cfg->uris[0] (vhost cfg->vhost when set, CA cfg->ca) and
 * makes, when missing, fleet.dlx (fanout, durable), fleet.dlq (durable,
 * capped) bound to it, fleet.roster and fleet.msg (topic, durable: a
 * per-host login cannot make them again after a broker restart), fleet.dead
 * (headers, durable) bound to fleet.dlx, and lead.<name>.dead (capped like
 * fleet.dlq) bound to fleet.dead by the header fleet-host = name (the
 * dead letters of name's messages, broker/death.h); then declares
 * lead.<name>.inbox and lead.<name>.receipts with the fleet's arguments
 * (an existing queue with other arguments is an error, 406).  Returns 0,
 * or -1 with why (no password in it).  made (when not NULL): the queue
 * type the broker really made (broker/quirks.h: LavinMQ ignores quorum). */
int br_declare_host(const br_config *cfg, const char *name, char *why, size_t n, char *made,
                    size_t mn);

/* The operator's one synchronous connection (also `fleetfs dlq`, dlq.h):
 * connected and logged in to cfg->uris[0] (cfg->vhost, cfg->ca), with
 * channel 1 open; NULL with why (no password in it).  product (may be
 * NULL): the broker's product name.  br_operator_close closes it. */
amqp_connection_state_t br_operator_connect(const br_config *cfg, char *why, size_t n,
                                            char *product, size_t pn);
void br_operator_close(amqp_connection_state_t a);

#endif
