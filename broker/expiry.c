/* SPDX-License-Identifier: Apache-2.0 */
/* broker/expiry.c — agent mailboxes and their x-expires (expiry.h). */
#include "broker/expiry.h"

#include <string.h>

#include <amqp.h>

#include "broker/chan.h"
#include "broker/state.h"
#include "fleetfs/base/log.h"

#define RENEW_MIN_MS 1000

bool br_expiry_agent(const br_slot *s)
{
    return strncmp(s->queue, "agent.", 6) == 0;
}

bool br_expiry_refused(br_conn *c, br_slot *s, int code)
{
    if (code != 406 || !br_expiry_agent(s) || c->cfg.agent_expires_ms <= 0)
        return false;
    /* legacy already: a real mismatch; the next attempt asks with
     * x-expires again (the mailbox may have been made anew meanwhile) */
    s->legacy = !s->legacy;
    return s->legacy;
}

void br_expiry_consuming(br_conn *c, br_slot *s, int64_t now)
{
    if (!br_expiry_agent(s) || c->cfg.agent_expires_ms <= 0)
        return;
    if (s->legacy)
        log_warn("broker: %s was made without x-expires (by a fleetfs from before "
                 "agent_expires; the broker refused adding it, 406): served as it is; the broker "
                 "collects it only under the policy `fleetfs-broker agent-expires` sets "
                 "(doc/operations.md, \"Upgrading: agent mailboxes\")",
                 s->queue);
    s->renew_ms = now + MAX(c->cfg.agent_expires_ms / 3, RENEW_MIN_MS);
}

int br_expiry_renew(br_conn *c, int64_t now)
{
    for (guint i = 0; i < c->slots->len && c->connected; i++) {
        br_slot *s = c->slots->pdata[i];
        char text[256];
        int code;
        if (!s->consuming || !s->renew_ms || s->renew_ms > now)
            continue;
        s->renew_ms = now + MAX(c->cfg.agent_expires_ms / 3, RENEW_MIN_MS);
        if (amqp_queue_declare(c->amqp, s->ch, amqp_cstring_bytes(s->queue), 1, 1, 0, 0,
                               amqp_empty_table)) {
            br_heard(c);
            continue;
        }
        if (br_rpc_failure(c, s->ch, &code, text, sizeof text) < 0) {
            br_drop_connection(c, text);
            return -1;
        }
        /* the channel closed (the consumer with it): the next round
         * declares and consumes it again */
        log_warn("broker: renewing %s's idle clock (passive declare) was refused: %d %s; "
                 "consuming it again",
                 s->queue, code, text);
        s->consuming = s->declared = false;
        s->renew_ms = 0;
    }
    return 0;
}

int64_t br_expiry_next(const br_conn *c)
{
    int64_t next = 0;
    for (guint i = 0; i < c->slots->len; i++) {
        const br_slot *s = c->slots->pdata[i];
        if (s->consuming && s->renew_ms && (!next || s->renew_ms < next))
            next = s->renew_ms;
    }
    return next;
}
