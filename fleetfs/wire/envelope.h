/* SPDX-License-Identifier: Apache-2.0 */
/* envelope.h — the wire envelope of SPEC section 4: what one AMQP message
 * body holds (a coordination message or a delivery receipt), its JSON
 * encoding and strict decoding, RFC 3339 times, and the byte string a
 * signature covers. Pure functions; an envelope belongs to whoever holds it. */
#ifndef FLEETFS_ENVELOPE_H
#define FLEETFS_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/wire/names.h"

#define ENV_ID_LEN 32
#define ENV_TYPE_COORD "coord"
#define ENV_TYPE_RECEIPT "receipt"
#define ENV_TYPE_HEARTBEAT "heartbeat"

/* Who may appear where (SPEC section 10, names.h):
 *   from       an id: a coord_id, or a gid <agent>@<coord_id>; the key that
 *              must sign is the one trusted for its host (id_host)
 *   to         coord: an id or "group:<g>" (a broadcast); receipt: an id
 *              (the entity whose message this receipt is about)
 *   recipient  receipts only: the id of the entity whose mailbox got the
 *              message (one msgId has many recipients in a broadcast). ""
 *              means `from` itself, and is how a lead's own receipts go, so
 *              lead-to-lead receipts stay byte-identical to what shipped and
 *              an old daemon verifies them. When set, it must live on the
 *              host of `from` (decode refuses it otherwise) and it is signed
 *              (env_signing_fields), so a receipt cannot be re-aimed at
 *              another recipient. */
typedef struct {
    int v;
    char type[16];
    char msgId[ENV_ID_LEN + 1];
    char from[ADDR_MAX_LEN + 1];
    char to[ADDR_MAX_LEN + 1];
    char sentAt[40];
    char expiresAt[40];
    char replyTo[ENV_ID_LEN + 1];     /* "" when absent */
    char ref[ENV_ID_LEN + 1];         /* receipts, "" otherwise */
    char state[24];                   /* receipts */
    char recipient[ADDR_MAX_LEN + 1]; /* receipts, "" = from (see above) */
    char detail[256];                 /* receipts, optional */
    char sig[100];                    /* base64, "" when absent */
    char *body;                       /* malloc'd, NUL-terminated */
    size_t body_len;
} envelope;

/* 128 random bits as 32 lowercase hex digits. */
void env_new_msgid(char out[ENV_ID_LEN + 1]);
/* Wall clock, milliseconds since the Unix epoch. */
int64_t env_now_ms(void);
/* RFC 3339 UTC with milliseconds: 2026-11-29T09:27:41.123Z */
void env_time_format(int64_t ms, char out[40]);
/* 0 and *ms on success, -1 on anything that is not an RFC 3339 date-time
 * (Z or +hh:mm/-hh:mm offset, optional fraction of any length). */
int env_time_parse(const char *s, int64_t *ms);

/* Compact one-line JSON, keys in SPEC order; NULL if e cannot be encoded
 * (e.g. body not UTF-8). malloc'd, caller frees. */
char *env_encode(const envelope *e, size_t *len);
/* Strict decode of untrusted bytes. 0 ok (out->body malloc'd, never NULL);
 * -1 with a short reason in why, out->body NULL. */
int env_decode(const char *json, size_t len, size_t max_body, envelope *out, char *why,
               size_t whylen);
/* For a log line about bytes that did not decode: the msgId and claimed
 * sender when they can be read and are well-formed, else "?". A sender id
 * that does not fit 64 bytes (a long gid) is shown as "?" too. */
void env_peek(const char *json, size_t len, char id[ENV_ID_LEN + 1], char from[64]);
/* Frees e->body; safe to call twice. */
void env_free(envelope *e);
/* The length-prefixed fields a signature covers (8-byte big-endian length,
 * then the bytes) for v, type, msgId, from, to, sentAt, expiresAt, replyTo,
 * body, for receipts also ref and state, and for a receipt whose recipient
 * is set, recipient last (a receipt without one has exactly the eleven
 * fields it always had). 0 ok (*buf malloc'd), -1 on allocation failure. */
int env_signing_fields(const envelope *e, unsigned char **buf, size_t *len);
/* One JSON Lines entry of the inbox file, ending in "\n". malloc'd. */
char *env_inbox_line(const envelope *e, const char *receivedAt, bool redelivered, size_t *len);

/* Extras. */
/* s is exactly 32 lowercase hex digits. */
bool env_id_valid(const char *s);
/* The id of the entity a receipt is from: e->recipient, or e->from when
 * that is empty. */
const char *env_receipt_recipient(const envelope *e);
/* s is a state a receipt may carry: injected, confirmed, acked, uncertain,
 * rejected. */
bool env_receipt_state_valid(const char *s);

/* ---- heartbeats (SPEC section 3, doc/protocol.md) ----------------------
 * A heartbeat is its own envelope type, published on the fleet.roster
 * exchange, never into a mailbox (env_decode refuses it):
 *
 *   {"v":1,"type":"heartbeat","from":"beta","host":"h2","version":"0.4.0",
 *    "sentAt":"..","expiresAt":"..","startedAt":"..","interval":5000,
 *    "agent":"ready: ..","leaving":false,"sig":"<base64 ed25519>"}
 *
 * interval: the sender's heartbeat interval in ms (1..3600000); a receiver
 * calls the sender stale after three of them.
 *
 * host, version and agent are plain text: UTF-8 without control characters
 * (C0, DEL, C1), so they can go into a `key: value` status line as they are.
 * The signature covers the length-prefixed fields v, type, from, host,
 * version, sentAt, expiresAt, startedAt, interval (decimal), agent, leaving
 * ("true"/"false").
 *
 * Agents and groups (SPEC section 10) ride in the same heartbeat, in members
 * an older fleetfs ignores:
 *
 *   "groups":["build"],
 *   "agents":[{"gid":"w1@beta","state":"ready: idle","groups":["build"]}],
 *   "asig":"<base64 ed25519>"
 *
 * groups: the lead's groups; agents: the host's local agents, each with its
 * state words (plain text, < ENV_HB_STATE_LEN bytes) and groups (absent =
 * none). Groups are group names other than "all", at most ENV_HB_MAX_GROUPS
 * per entity; at most ENV_HB_MAX_AGENTS agents; gids must be valid (whether
 * each lives on `from`'s host is the receiver's judgement, presence.c).
 * `sig` stays exactly as above (an old fleetfs verifies it and believes the
 * lead); `asig` signs the same eleven fields followed by the extension
 * (env_hb_agents_signing_fields), so the agent list cannot be altered or
 * grafted onto another heartbeat. A heartbeat with none of the three
 * members is an old one (ext false); one that has any of them has ext true.
 * Unknown members inside an agent object are ignored (a later version may
 * add some; they are not signed).
 *
 * Profiles (SPEC section 11) ride likewise, in two more members that every
 * older fleetfs ignores:
 *
 *   "profiles":["worker","reviewer"],"psig":"<base64 ed25519>"
 *
 * the names of the [profile NAME] sections the sender offers (sorted, at
 * most ENV_HB_MAX_PROFILES, each an agent name; [] = none offered).
 * `psig` signs env_hb_signing_fields followed by the word "profiles", the
 * count and each name (env_hb_profiles_signing_fields): neither sig nor
 * asig changes, so a fleetfs before profiles still believes the rest. A
 * heartbeat without the member (a fleetfs before profiles) has
 * has_profiles false: its host's profiles are unknown, not none.
 *
 * The group interval (fleet_view=groups, doc/protocol.md section 11) rides
 * likewise, in two more members that every older fleetfs ignores:
 *
 *   "groupInterval":25000,"gsig":"<base64 ed25519>"
 *
 * how often (ms, 1..3600000, never below interval) the sender's heartbeats
 * carry its group words in the routing key; the others go under the plain
 * key, which reaches only the leads that bound the sender by name. A
 * receiver that hears the sender only through a group judges it stale after
 * three group intervals. `gsig` signs env_hb_signing_fields followed by the
 * word "groupInterval" and the decimal value (env_hb_group_signing_fields).
 * A heartbeat without the member (a fleetfs before it) has has_group_iv
 * false: every heartbeat of it goes to its groups. */
#define ENV_HB_MAX_PROFILES 64
/* A scoped host in no group binds, of its own heartbeats, only those whose
 * key carries the word s=<its coord_id>: every ENV_HB_SELF_EVERY-th one (and
 * the first on a connection), so the broker copies its own heartbeat back
 * to it every 30 s at the defaults, not every 5 s (doc/protocol.md section
 * 11).  Its own line is judged stale after three such rounds. */
#define ENV_HB_SELF_EVERY 6
#define ENV_HB_MAX_LEN 131072   /* bytes: RabbitMQ's default frame_max */
#define ENV_HB_OLD_MAX_LEN 4096 /* what a fleetfs before agents accepts */
#define ENV_HB_MAX_AGENTS 1024
#define ENV_HB_MAX_GROUPS 16
#define ENV_HB_STATE_LEN 128 /* agent state words, with the NUL */

typedef struct {
    char gid[GID_MAX_LEN + 1];
    char state[ENV_HB_STATE_LEN];
    char **groups; /* n_groups names, NULL-terminated; malloc'd */
    size_t n_groups;
} env_hb_agent;

typedef struct {
    int v;
    char from[64];
    char host[256];
    char version[64];
    char sentAt[40];
    char expiresAt[40];
    char startedAt[40];
    int64_t interval_ms;
    char agent[256];
    bool leaving;
    char sig[100]; /* base64, "" when absent */
    /* the SPEC section 10 extension (above); all malloc'd, env_hb_free */
    bool ext;      /* groups/agents/asig are (to be) on the wire */
    char **groups; /* the lead's, n_groups, NULL-terminated */
    size_t n_groups;
    env_hb_agent *agents;
    size_t n_agents;
    char asig[100]; /* base64, "" when absent */
    /* the SPEC section 11 extension: offered profiles (malloc'd, env_hb_free) */
    bool has_profiles; /* profiles/psig are (to be) on the wire */
    char **profiles;   /* n_profiles names, NULL-terminated; NULL when none */
    size_t n_profiles;
    char psig[100]; /* base64, "" when absent */
    /* the group interval (above) */
    bool has_group_iv; /* groupInterval/gsig are (to be) on the wire */
    int64_t group_interval_ms;
    char gsig[100]; /* base64, "" when absent */
} env_heartbeat;

/* Compact JSON, malloc'd; NULL when a field is not plain text or the
 * extension breaks a rule above. Writes groups/agents/asig only when
 * h->ext (so an old-format heartbeat encodes exactly as before). */
char *env_hb_encode(const env_heartbeat *h, size_t *len);
/* Strict decode of untrusted bytes (at most ENV_HB_MAX_LEN): 0 ok, -1 with
 * a short reason (and *out left with nothing to free). On success call
 * env_hb_free(out) when done (a heartbeat without groups and agents
 * members allocates nothing, so callers from before agents leak nothing).
 * groups and agents[].groups are NULL when the member is absent. */
int env_hb_decode(const char *json, size_t len, env_heartbeat *out, char *why, size_t whylen);
/* Frees the extension's allocations and empties it; safe twice. */
void env_hb_free(env_heartbeat *h);
/* The bytes asig covers: env_hb_signing_fields, then (each length-prefixed
 * like the rest) the number of lead groups in decimal, each group, the
 * number of agents, and per agent its gid, state, number of groups and each
 * group. 0 ok (*buf malloc'd), -1. */
int env_hb_agents_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len);
/* The bytes psig covers: env_hb_signing_fields, then (length-prefixed)
 * "profiles", the number of profiles in decimal and each name. 0 ok (*buf
 * malloc'd), -1. */
int env_hb_profiles_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len);
/* The bytes gsig covers: env_hb_signing_fields, then (length-prefixed)
 * "groupInterval" and its value in decimal. 0 ok (*buf malloc'd), -1. */
int env_hb_group_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len);
/* The bytes a heartbeat's signature covers; 0 ok (*buf malloc'd), -1. */
int env_hb_signing_fields(const env_heartbeat *h, unsigned char **buf, size_t *len);
/* s is UTF-8 without C0, DEL or C1 control characters. */
bool env_text_plain(const char *s, size_t n);

#endif
