/* SPDX-License-Identifier: Apache-2.0 */
/* broker/quirks.c — see quirks.h. */
#include "broker/quirks.h"

#include <stdio.h>
#include <string.h>

bool br_is_lavinmq(const char *product)
{
    return product && strncmp(product, "LavinMQ", 7) == 0;
}

void br_queue_type_made(const char *product, const char *asked, char *out, size_t n)
{
    const char *a = asked && *asked ? asked : "classic";
    if (br_is_lavinmq(product) && strcmp(a, "classic") != 0)
        snprintf(out, n, "classic (asked %s: LavinMQ ignores x-queue-type; not replicated)", a);
    else
        snprintf(out, n, "%s", a);
}

const char *br_mismatch_hint(const char *text)
{
    if (text && strstr(text, "inequivalent arg"))
        return "";
    return " (the broker does not say which argument differs: compare the queue's arguments "
           "(x-max-length, x-message-ttl, x-queue-type, x-overflow, x-dead-letter-exchange, and "
           "x-expires on an agent's) "
           "with this fleet's, e.g. scripts/broker ctl -- list_queues -q name arguments, or "
           "the broker's management UI)";
}

bool br_is_low_disk_refusal(int code, const char *text)
{
    return code == 406 && text && strstr(text, "low on disk space");
}
