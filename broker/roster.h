/* SPDX-License-Identifier: Apache-2.0 */
/* broker/roster.h — presence on the broker: the roster thread.
 *
 * Heartbeats go over their own AMQP connection, owned by one thread (like
 * conn.c's, since rabbitmq-c is not thread-safe), so presence neither waits
 * behind mailbox traffic nor disturbs it: a slow publish of a message never
 * delays a heartbeat, and a roster hiccup never drops the mailbox consumer.
 *
 * On every connection the thread declares the topic exchange `fleet.roster`
 * (non-durable: presence is soft state; when the login may not declare it,
 * or an operator made it durable, the one there is used), one exclusive
 * auto-delete queue roster.<coord_id>.<random> bound to `roster.#` (or, scoped, to our ask
 * key, our groups, the leads ro_hear names, and our own key while in no group:
 * doc/protocol.md section 11),
 * and consumes it without acks.  Every interval it asks its owner for a heartbeat body (the owner
 * signs it) and publishes it with routing key roster.<host>.<coord_id>,
 * non-persistent, with an AMQP expiration of ttl_ms (scoped: under our
 * group words every group interval, on (re)connecting, after our groups
 * change, when asked, and when leaving; else the plain key).  Each delivery's raw
 * body goes to the owner's `received` callback; this layer never parses
 * it.  Reconnection: capped exponential backoff over the URIs in turn; the
 * queue and binding are made anew on each connection.
 *
 * ro_stop(leaving=true) publishes one last heartbeat (the owner builds it
 * with leaving set) and closes the channel before the connection, so the
 * broker has routed it before we are gone.
 */
#ifndef FLEETFS_BROKER_ROSTER_H
#define FLEETFS_BROKER_ROSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ro_conn ro_conn;

typedef struct {
    char **uris;          /* NULL-terminated; may carry credentials, never printed */
    const char *vhost;    /* NULL or "": the URI's own */
    const char *ca;       /* CA file for amqps:// */
    const char *coord_id; /* routing key roster.<host>.<coord_id> */
    const char *host;     /* any text: reduced to [A-Za-z0-9_-] for the key */
    int64_t interval_ms;  /* between heartbeats */
    int64_t ttl_ms;       /* AMQP expiration of each heartbeat (scaled when the
                             heartbeat callback announces a longer interval) */
    const char *uri_env;  /* the variable the URIs came from, for messages (br_config's) */
    bool scoped;          /* fleet_view=groups: bind only what ro_hear names (and our
                             own key and ask key), publish with our groups in the key,
                             answer heartbeat requests; false: roster.# */
    unsigned self_every;  /* scoped, not wide, in no group: one heartbeat in this many
                             carries our self word, the one of ours we bind (0: 1) */
} ro_config;

typedef struct {
    /* On the roster thread: the next heartbeat body (malloc'd, *len set),
     * or NULL to skip this one; *interval_ms (preset to interval_ms) may
     * be set to the interval the body announces: the next heartbeat goes
     * then, and this one expires after three.  Scoped: *group_iv_ms
     * (preset to *interval_ms) is the group interval the body announces:
     * how often a heartbeat goes under our group words (topo_roster_group_due);
     * the others go under the plain key roster.<host>.<coord_id>. */
    char *(*heartbeat)(void *ud, bool leaving, size_t *len, int64_t *interval_ms,
                       int64_t *group_iv_ms);
    /* On the roster thread, for every delivery (ours included). */
    void (*received)(void *ud, const char *routing_key, const char *body, size_t len);
    /* The link went up or down. */
    void (*changed)(void *ud, bool up);
    void *ud;
} ro_callbacks;

typedef struct {
    bool up;
    int64_t since_ms; /* monotonic ms of the last change */
    char reason[256]; /* why not up, or "" */
    uint64_t published, received;
    uint64_t asks_in, asks_out; /* heartbeat requests received, published */
    unsigned bindings;          /* our queue's bindings now */
    bool fallback;              /* scoped, but the broker refused a binding: roster.# */
} ro_status;

ro_conn *ro_new(const ro_config *cfg, const ro_callbacks *cb);
void ro_run(ro_conn *r);
/* Publish a heartbeat soon (at most one a second from kicks). */
void ro_kick(ro_conn *r);
/* End the thread; leaving: publish a leaving heartbeat first when
 * connected.  Safe on a thread that never ran. */
/* ro_stop_begin asks the thread to stop (after the leaving heartbeat) and
 * returns at once, so other threads can be stopped meanwhile; ro_stop then
 * waits for it, bounded from the request (it asks itself when not asked). */
void ro_stop_begin(ro_conn *r, bool leaving);
void ro_stop(ro_conn *r, bool leaving);
void ro_free(ro_conn *r);
void ro_get_status(ro_conn *r, ro_status *st);
/* Scoped (cfg.scoped): whom to hear from now on.  groups (not "all") also
 * go into our heartbeats' routing key (a group just left stays in it for
 * three intervals, so its members hear that we left); leads are bound by
 * coord_id (ours only while in no group: in one, our group heartbeats come
 * back through the group's binding).  Both NULL-terminated, valid names (wire/names.h),
 * copied.  Any thread; the roster thread binds and unbinds. */
void ro_hear(ro_conn *r, const char *const *groups, const char *const *leads);
/* Scoped: wide binds roster.# besides (fleet_view=auto not narrowed, a
 * census: presence/census.c); not wide unbinds it.  Any thread. */
void ro_wide(ro_conn *r, bool wide);
/* Scoped: ask lead for its next heartbeat now (after binding what
 * ro_hear said, so its answer reaches us).  Any thread. */
void ro_ask(ro_conn *r, const char *lead);

#endif
