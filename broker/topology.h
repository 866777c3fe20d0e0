/* SPDX-License-Identifier: Apache-2.0 */
/* broker/topology.h — the queues and exchanges every fleetfs declares
 * identically (SPEC section 3).  The broker refuses a declare whose
 * arguments differ from the existing queue's (406), so the argument table
 * lives in exactly one place: here.  Called on the broker thread only.
 */
#ifndef FLEETFS_BROKER_TOPOLOGY_H
#define FLEETFS_BROKER_TOPOLOGY_H

#include <amqp.h>
#include <glib.h>

#include "broker/conn.h"

#define TOPO_DLX "fleet.dlx"
#define TOPO_DLQ "fleet.dlq"
#define TOPO_DLQ_MAX_LENGTH 10000

/* The mailbox arguments: x-max-length, x-overflow, x-message-ttl,
 * x-dead-letter-exchange, x-queue-type.  entries must hold TOPO_MAILBOX_ARGS. */
#define TOPO_MAILBOX_ARGS 5
amqp_table_t topo_mailbox_args(const br_config *cfg, amqp_table_entry_t *entries);
/* An agent's mailbox: the mailbox arguments and, with expires, x-expires
 * (cfg->agent_expires_ms; broker/expiry.h).  entries must hold
 * TOPO_AGENT_ARGS. */
#define TOPO_AGENT_ARGS (TOPO_MAILBOX_ARGS + 1)
amqp_table_t topo_agent_args(const br_config *cfg, amqp_table_entry_t *entries, bool expires);

/* The dead-letter queue's arguments: capped, and of the fleet's queue type
 * (quorum on a cluster, so that it survives the loss of a node like the
 * mailboxes do).  entries must hold TOPO_DLQ_ARGS. */
#define TOPO_DLQ_ARGS 2
/* The binding of lead.<host>.dead to fleet.dead (headers): x-match all,
 * BR_HEADER_HOST = host.  entries must hold 2. */
amqp_table_t topo_dead_binding(const char *host, amqp_table_entry_t *entries);
amqp_table_t topo_dlq_args(const br_config *cfg, amqp_table_entry_t *entries);

/* Presence (broker/roster.c): the topic exchange, the binding every
 * reader's own queue gets, and that queue's arguments (capped, so a stuck
 * reader holds at most TOPO_ROSTER_QUEUE_MAX heartbeats).  entries must
 * hold TOPO_ROSTER_ARGS. */
#define TOPO_ROSTER_EXCHANGE "fleet.roster"
#define TOPO_ROSTER_BINDING "roster.#"
#define TOPO_ROSTER_QUEUE_MAX 10000
#define TOPO_ROSTER_ARGS 1
amqp_table_t topo_roster_args(amqp_table_entry_t *entries);
/* The own presence queue: "roster.<coord_id>.<16 random hex digits>", new on
 * every connection.  Named after its owner, not left to the broker
 * (amq.gen-...), so that a per-host login can be given configure and read
 * rights on exactly its own (doc/security.md). */
void topo_roster_queue(const char *coord_id, char *out, size_t n);
/* "roster.<host>.<coord_id>" ("_" for an empty host). */
void topo_roster_key(const char *host, const char *coord_id, char *out, size_t n);

/* fleet_view=groups (doc/protocol.md section 11): a heartbeat's key carries
 * one "g=<group>" word per group of its host, between the host word and the
 * coord_id; a host binds what it needs instead of roster.#. */
#define TOPO_ROSTER_GROUP_WORD "g="
#define TOPO_ROSTER_KEY_MAX 255 /* an AMQP short string */
/* The keys one heartbeat is published under (g_ptr_array_unref; one unless
 * the groups do not fit one key): "roster.<host>.g=<g1>...<coord_id>",
 * host "_" when empty or when the groups would not fit with it. */
GPtrArray *topo_roster_keys(const char *host, const char *const *groups, const char *coord_id);
/* "roster.#.<coord_id>": every heartbeat of that lead. */
void topo_roster_bind_lead(const char *coord_id, char *out, size_t n);
/* "roster.#.g=<group>.#": every heartbeat of a member of group. */
void topo_roster_bind_group(const char *group, char *out, size_t n);
/* Scoped and in no group, a host binds only those of its own heartbeats
 * whose key carries "s=<coord_id>" (one in ENV_HB_SELF_EVERY, wire/envelope.h):
 * "roster.<host>.s=<coord_id>.<coord_id>" ("_" for an empty or too long
 * host); its binding "roster.#.s=<coord_id>.#".  Every such key still ends
 * in .<coord_id>, so whoever binds the lead or roster.# gets it as any. */
#define TOPO_ROSTER_SELF_WORD "s="
void topo_roster_self_key(const char *host, const char *coord_id, char *out, size_t n);
void topo_roster_bind_self(const char *coord_id, char *out, size_t n);
/* "ask.<coord_id>": a request for that lead's next heartbeat now; never
 * matches roster.#. */
#define TOPO_ROSTER_ASK_PREFIX "ask."
void topo_roster_ask_key(const char *coord_id, char *out, size_t n);

/* Whether a heartbeat published now carries the group words (a "group
 * beat", doc/presence.md "Group heartbeats"): forced ones always, the
 * first, and every one when group_iv <= iv; else the first beat in a new
 * slot of the wall clock, slots being group_iv long and shifted by phase
 * (a hash of our first group): the members of a group, whose group
 * intervals agree, send their group beats within the same interval, so
 * that each member's queue takes them in one burst, not one at a time (the
 * broker's cost per delivery falls by half and more: doc/scaling.md, "Third
 * pass").  group_iv is the smaller of the one our last group beat
 * announced and ours now (a receiver that hears us only through a group
 * judges us by what our last group beat said); a clock that jumps, or a
 * last group beat more than group_iv + iv ago, makes one due too.  now and
 * last_group are wall-clock ms; last_group < 0: none yet. */
bool topo_roster_group_due(int64_t now, int64_t last_group, int64_t last_group_iv, int64_t iv,
                           int64_t group_iv, uint32_t phase, bool forced);
/* The phase of a group's slots: djb2 of its name (h = 5381, h = h * 33 + c,
 * 32 bits), so that every member computes the same; 0 for NULL. */
uint32_t topo_group_phase(const char *group);
/* The roster thread's record of its group beats. */
typedef struct {
    int64_t last;    /* when the last group beat went (wall-clock ms); -1 none */
    int64_t last_iv; /* the group interval it announced */
    int64_t until;   /* every beat is a group beat until then (monotonic ms: groups changed) */
    bool force;      /* the next beat is one: (re)connected, asked, groups changed */
} topo_group_beats;
/* Whether the beat going now (mono, wall: ms) is a group beat
 * (topo_roster_group_due, forced also by g->force, g->until or forced); if
 * so it is recorded as the last. */
bool topo_group_beat(topo_group_beats *g, int64_t mono, int64_t wall, int64_t iv, int64_t group_iv,
                     uint32_t phase, bool forced);

/* "lead.<id>.inbox" or "lead.<id>.receipts". */
void topo_consumer_queue(bool inbox, const char *id, char *out, size_t n);
void topo_receipts_queue(const char *id, char *out, size_t n);

#endif
