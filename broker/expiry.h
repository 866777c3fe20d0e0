/* SPDX-License-Identifier: Apache-2.0 */
/* broker/expiry.h — an agent's mailbox is collected by the broker after
 * agent_expires with no reader (x-expires; doc/protocol.md, "Collecting
 * agent mailboxes").  The broker thread's part:
 *
 * - a mailbox made by a fleetfs from before agent_expires has no x-expires,
 *   and AMQP refuses a redeclare that adds it (406): such a "legacy"
 *   mailbox is declared again with the arguments it was made with and
 *   served as it is; the operator's policy (`fleetfs-broker agent-expires`)
 *   collects it;
 * - while a mailbox is consumed, its idle clock is renewed (a passive
 *   declare) every third of agent_expires: LavinMQ 1.0.1 starts that clock
 *   when a consumer is added, not when the last one leaves, and deletes a
 *   queue consumed for longer than x-expires the moment its consumer goes
 *   (measured; its queue.cr).  On RabbitMQ the renewal changes nothing.
 */
#ifndef FLEETFS_BROKER_EXPIRY_H
#define FLEETFS_BROKER_EXPIRY_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/conn_int.h"

/* Whether s is an agent's mailbox ("agent.<gid>.inbox"). */
bool br_expiry_agent(const br_slot *s);
/* The declare of s was refused with code (while declaring): true when it
 * is to be tried again at once as a legacy mailbox (without x-expires). */
bool br_expiry_refused(br_conn *c, br_slot *s, int code);
/* s is consumed now: says once that a legacy mailbox is served as it is,
 * and schedules the renewal. */
void br_expiry_consuming(br_conn *c, br_slot *s, int64_t now);
/* Renews every consumed agent mailbox whose time has come.  Returns -1
 * when the connection died. */
int br_expiry_renew(br_conn *c, int64_t now);
/* The next renewal due (0: none). */
int64_t br_expiry_next(const br_conn *c);

#endif
