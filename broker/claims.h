/* SPDX-License-Identifier: Apache-2.0 */
/* broker/claims.h — fleet-wide claims on the broker: the claims thread.
 *
 * A claim NAME is two durable queues the broker keeps (doc/claims.md):
 *   fleet.claim.NAME     the lock: held while our exclusive consumer is on
 *                        it (basic.consume exclusive=1); another connection's
 *                        consume is refused 403 "in exclusive use"; the
 *                        broker drops the consumer when our channel or
 *                        connection ends, so the claim is free again
 *   fleet.claimtok.NAME  the fencing token: one persistent message whose
 *                        body starts with the decimal token.  Only a holder
 *                        of the lock takes it (basic.get until empty, the
 *                        largest token seen wins), publishes token+1 with a
 *                        publisher confirm, then acks what it took: a
 *                        holder that dies before its ack leaves both, and
 *                        the next holder still starts from the largest.
 * A grant is told only after the broker confirmed the new token.
 *
 * Everything goes over one AMQP connection of its own, owned by one thread
 * (rabbitmq-c is not thread-safe), like the roster's: channel 1 gets
 * tokens and publishes them (confirm mode), and nothing else; channel 2
 * probes (passive declares, whose 404 closes only that channel); channel 3
 * publishes and consumes the fleet's claim events (exchange fleet.claims,
 * topic, non-durable: soft state, each mount binds its own exclusive queue
 * to claims.#), apart from the token's calls; each claim held has a
 * channel of its own, since a refused consume closes its channel.
 *
 * Losing the connection loses every claim held on it: the `lost` callback
 * says so for each, and nothing is re-taken behind the owner's back.  While
 * holding claims the thread makes a round trip every second; none for
 * BC_GRACE_MS and it gives the connection up (and with it the claims)
 * itself, before the broker, which waits for missed AMQP heartbeats
 * (BC_HEARTBEAT_S), can hand them to another.
 */
#ifndef FLEETFS_BROKER_CLAIMS_H
#define FLEETFS_BROKER_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BC_EXCHANGE "fleet.claims"
#define BC_LOCK_PREFIX "fleet.claim."
#define BC_TOKEN_PREFIX "fleet.claimtok."
/* each mount's events queue: fleet.claimev.<coord_id>.<random>, so that a
 * per-host login can be allowed exactly its own (doc/security.md) */
#define BC_EVENTS_PREFIX "fleet.claimev."
#define BC_HEARTBEAT_S 10
#define BC_GRACE_MS 6000
#define BC_MAX_HELD 1000 /* claims one mount may hold (one channel each) */

typedef struct bc_conn bc_conn;

typedef struct {
    char **uris;          /* NULL-terminated; may carry credentials, never printed */
    const char *vhost;    /* NULL or "": the URI's own */
    const char *ca;       /* CA file for amqps:// */
    const char *coord_id; /* for the connection's name */
    const char *host;
    const char *uri_env; /* the variable the URIs came from, for messages */
} bc_config;

typedef struct {
    /* On the claims thread: a claim we held is no longer ours (why: the
     * reason, for the log and the agent). */
    void (*lost)(void *ud, const char *name, const char *why);
    /* On the claims thread: one event of the fleet's (fleet.claims). */
    void (*event)(void *ud, const char *body, size_t len);
    /* On the claims thread: the connection went up or down. */
    void (*changed)(void *ud, bool up);
    /* On the claims thread, about once a second while connected: up to max
     * names whose lock to probe now (NULL-terminated, g_strfreev'd by the
     * thread), and each probe's answer: consumers on the lock (0: free,
     * -1: the probe failed). */
    char **(*to_probe)(void *ud, unsigned max);
    void (*probed)(void *ud, const char *name, int consumers);
    /* On the watchdog's thread, every 500 ms (leases: face/claims.c). */
    void (*tick)(void *ud);
    void *ud;
} bc_callbacks;

bc_conn *bc_new(const bc_config *cfg, const bc_callbacks *cb);
void bc_run(bc_conn *c);
/* Tells the thread to stop, never waits (the unmount tells every broker
 * thread first, then waits for them together: one bound, not one each). */
void bc_stop_begin(bc_conn *c);
/* Ends the thread: the claims held are released with the connection.
 * Bounded like the broker threads' (BC_STOP_WAIT_MS from bc_stop_begin, a
 * kick of the socket, as long again); a thread still running after that
 * is left behind (bc_left_behind) and bc_free frees nothing. */
void bc_stop(bc_conn *c);
bool bc_left_behind(bc_conn *c);
void bc_free(bc_conn *c);
bool bc_up(bc_conn *c);

/* Take name (a valid claim name) for us.  record: the holder's words, kept
 * after the token in the token message (the broker's copy).  0 and *token;
 * or EEXIST (another connection holds it), ENOTCONN (no connection),
 * ETIMEDOUT (no answer within timeout_ms: if the broker granted it after,
 * the thread releases it at once), EALREADY (we hold it), EMFILE (we hold
 * BC_MAX_HELD), EIO (the broker refused: why says). */
int bc_take(bc_conn *c, const char *name, const char *record, uint64_t *token, int timeout_ms,
            char *why, size_t n);
/* Release name: 0, or ENOENT (not ours), ENOTCONN, ETIMEDOUT. */
int bc_release(bc_conn *c, const char *name, int timeout_ms);
/* Give name up now, if we hold it (a lease ran out): queued, never
 * waits; the lost callback says so with why.  false: not connected. */
bool bc_expire(bc_conn *c, const char *name, const char *why);
/* The watchdog, twice a second on a thread of its own (bc_run starts it;
 * public for the record): a claims thread
 * that shows no progress for BC_GRACE_MS while connected is blocked in a
 * send the broker does not take (RPCs are bounded; a send is not): its
 * socket is shut down, so the send fails and the thread gives the
 * connection, and every claim on it, up (the lost callback) before the
 * broker can hand them to another. */
void bc_watchdog(bc_conn *c);
/* Publish one event to the fleet (routing key claims.<name>, or
 * claims._ for none); queued, never waits.  false: not connected. */
bool bc_announce(bc_conn *c, const char *name, const char *body);

#endif
