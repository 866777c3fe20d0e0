/* SPDX-License-Identifier: Apache-2.0 */
/* broker/quirks.h — where the brokers fleetfs runs on differ, by what a
 * broker says it is (the `product` of its connection.start: "RabbitMQ",
 * "LavinMQ"), so that status and the error messages say what the broker
 * really did (broker/ only; doc/operations.md, "Running on LavinMQ").
 */
#ifndef FLEETFS_BROKER_QUIRKS_H
#define FLEETFS_BROKER_QUIRKS_H

#include <stdbool.h>
#include <stddef.h>

/* product is a broker's product name, or "product version..." */
bool br_is_lavinmq(const char *product);

/* The queue type the broker makes for a declare that asks for `asked`
 * (classic or quorum; NULL: classic), in words for status: "quorum" on
 * RabbitMQ; on LavinMQ, which accepts x-queue-type quorum and makes its
 * one ordinary kind of queue, "classic (asked quorum: LavinMQ ignores
 * x-queue-type; not replicated)". */
void br_queue_type_made(const char *product, const char *asked, char *out, size_t n);

/* LavinMQ (1.0.1) answers a declare of an exchange or queue that exists as
 * declared with ok without checking the login's configure rights: such an
 * answer proves nothing about them there (a bind that needs them is
 * refused later, 403; boxes.c takes that as the declare's refusal). */

/* After a 406 on a queue declare: "" when the broker's text names the
 * argument that differs (RabbitMQ: "inequivalent arg 'x-max-length'"),
 * else a sentence saying how to find it (LavinMQ's text names none). */
const char *br_mismatch_hint(const char *text);

/* LavinMQ (1.0.1) has no disk alarm and no connection.blocked: while its
 * data directory has under two segments free (16 MB by default) it closes
 * the channel of every publish with 406 "Server low on disk space", and
 * says nothing when space comes back.  True for that refusal (a channel
 * close's code and text); fleetfs then treats the publishing connection
 * as blocked with BR_LOW_DISK_REASON, as under RabbitMQ's disk alarm, and
 * its canary asks again until a publish is taken (conn.c). */
bool br_is_low_disk_refusal(int code, const char *text);
#define BR_LOW_DISK_REASON                                                                      \
    "low on disk (LavinMQ refuses every publish, 406 Server low on disk space, while its data " \
    "directory has under two segments free, 16 MB by default)"

#endif
