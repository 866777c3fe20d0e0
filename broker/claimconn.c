/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claimconn.c — the claims connection made: its login (the side
 * connections' sequence, broker/sideconn.h, which also words a refused
 * synchronous call) and what is set up on it (channels, confirms, the
 * events exchange and queue); claims_int.h says what is shared.  Claims
 * thread only.
 */
#include "broker/claims_int.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"

int bc_open_login(bc_conn *c, const char *uri, char *why, size_t n)
{
    char name[200];
    /* cancel_notify: without it the broker drops our consumer silently
     * when the lock's queue goes (deleted, its node down): the claim would
     * look held.  test_sndbuf: as the mailbox connection's (session.c), a
     * test can fill the socket with a few announcements (t1107). */
    sc_params p = {.vhost = c->cfg.vhost,
                   .ca = c->cfg.ca,
                   .uri_env = c->cfg.uri_env,
                   .name = name,
                   .heartbeat_s = BC_HEARTBEAT_S,
                   .rpc_timeout_ms = RPC_TIMEOUT_MS,
                   .caps = SC_CAP_CANCEL_NOTIFY,
                   .test_sndbuf = true,
                   .who = "claims"};
    snprintf(name, sizeof name, "fleetfs %s@%s claims", c->cfg.coord_id, c->cfg.host);
    return sc_open_login(&p, uri, &c->amqp, c->shown, sizeof c->shown, why, n);
}

/* The events exchange (topic, non-durable; an operator's durable one is
 * used as it is; a per-host login may not make it: `fleetfs declare` does),
 * our own queue fleet.claimev.<coord_id>.<random> bound to claims.#,
 * consumed without acks.  A refusal by the login's permissions says what
 * the operator must run. */
int bc_setup(bc_conn *c, char *why, size_t n)
{
    amqp_bytes_t ex = amqp_cstring_bytes(BC_EXCHANGE);
    char qname[200];
    int code;

    if (!amqp_channel_open(c->amqp, CH_MAIN) || !amqp_channel_open(c->amqp, CH_PROBE) ||
        !amqp_channel_open(c->amqp, CH_EVENTS)) {
        bc_rpc_words(c, "cannot open a channel", why, n);
        return -1;
    }
    if (!amqp_confirm_select(c->amqp, CH_MAIN)) {
        bc_rpc_words(c, "cannot select publisher confirms", why, n);
        return -1;
    }
    c->next_tag = 1;
    if (!amqp_exchange_declare(c->amqp, CH_PROBE, ex, amqp_cstring_bytes("topic"), 0, 0, 0, 0,
                               amqp_empty_table)) {
        code = bc_channel_refused(c, CH_PROBE);
        if ((code != 403 && code != 406) || !amqp_channel_open(c->amqp, CH_PROBE)) {
            bc_rpc_words(c, "cannot declare exchange " BC_EXCHANGE, why, n);
            return -1;
        }
        if (!amqp_exchange_declare(c->amqp, CH_PROBE, ex, amqp_cstring_bytes("topic"), 1, 0, 0, 0,
                                   amqp_empty_table)) {
            bc_rpc_words(c, "cannot find exchange " BC_EXCHANGE, why, n);
            if (code == 403 && bc_channel_refused(c, CH_PROBE) == 404)
                snprintf(why, n,
                         "this login may not configure %s and it does not exist: an operator "
                         "must run `fleetfs-broker host update %s` (or `fleetfs declare %s`), "
                         "which makes it",
                         BC_EXCHANGE, c->cfg.coord_id, c->cfg.coord_id);
            return -1;
        }
    }
    snprintf(qname, sizeof qname, BC_EVENTS_PREFIX "%s.%08x%08x", c->cfg.coord_id, g_random_int(),
             g_random_int());
    if (!amqp_queue_declare(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), 0, 0, 1, 1,
                            amqp_empty_table)) {
        bc_rpc_words(c, "cannot declare the claims events queue", why, n);
        if (bc_channel_refused(c, CH_EVENTS) == 403)
            snprintf(why, n,
                     "this login may not declare its claims events queue " BC_EVENTS_PREFIX
                     "%s.*: it predates claims; an operator must run `fleetfs-broker host "
                     "update %s`, which gives it today's permissions",
                     c->cfg.coord_id, c->cfg.coord_id);
        return -1;
    }
    if (!amqp_queue_bind(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), ex,
                         amqp_cstring_bytes("claims.#"), amqp_empty_table)) {
        bc_rpc_words(c, "cannot bind the claims events queue to " BC_EXCHANGE, why, n);
        if (bc_channel_refused(c, CH_EVENTS) == 403)
            snprintf(why, n,
                     "this login may not bind to %s: it predates claims; an operator must run "
                     "`fleetfs-broker host update %s`, which gives it today's permissions",
                     BC_EXCHANGE, c->cfg.coord_id);
        return -1;
    }
    if (!amqp_basic_consume(c->amqp, CH_EVENTS, amqp_cstring_bytes(qname), amqp_empty_bytes, 0, 1,
                            1, amqp_empty_table)) {
        bc_rpc_words(c, "cannot consume the claims events queue", why, n);
        return -1;
    }
    return 0;
}
