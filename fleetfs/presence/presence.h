/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/presence.h — who is in the fleet: heartbeats in and out, the
 * presence table, discovery (doc/presence.md, SPEC sections 2, 3 and 9).
 *
 * The roster thread (broker/roster.c) moves raw bodies; this module builds
 * and signs our heartbeat (pr_heartbeat) and judges every heartbeat that
 * arrives (pr_received): it must decode, its routing key must name its
 * sender, its signature must verify against the key trusted for `from`
 * (unless -o insecure), it must be neither past its expiry nor from the
 * future beyond PR_SKEW_MS, and it must be newer than the last one believed
 * from that sender.  Only then does a lead appear or look live.  Anything
 * unverifiable is counted (rejected_heartbeat) and logged once per sender.
 *
 * States: live (heard within three of the sender's intervals, or of its
 * group intervals when we hear it only through a group: doc/presence.md),
 * stale (heard
 * before, not since), left (its last heartbeat said it was unmounting),
 * never (configured, never heard).  Discovered leads drop out of peers/
 * after discovery_ttl of silence; configured ones never do.
 *
 * Threads: pr_received on the roster thread, pr_tick on the notifier,
 * everything else on FUSE threads or the mailbox's sender; one lock guards
 * the table.  The hooks only enqueue (notifier), and are called unlocked.
 */
#ifndef FLEETFS_PRESENCE_H
#define FLEETFS_PRESENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#include "fleetfs/config/options.h"
#include "fleetfs/wire/envelope.h"

/* How far a heartbeat's clock may be off ours before it is ignored. */
#define PR_SKEW_MS 30000

typedef struct presence presence;

typedef enum { PR_NEVER, PR_LIVE, PR_STALE, PR_LEFT } pr_state;

typedef struct {
    /* a file changed (relpath as in the tree) */
    void (*changed)(void *ud, const char *relpath);
    /* dir/name appeared (added) or went away: directory watchers */
    void (*entry)(void *ud, const char *dir, const char *name, bool added);
    /* fleet_view=groups: whom to hear may have changed (pr_hear_lists);
     * ask: a lead addressed for the first time, to be asked for its
     * heartbeat now (NULL: none).  May be NULL. */
    void (*hear)(void *ud, const char *ask);
    void *ud;
} pr_hooks;

typedef struct {
    char id[64];
    bool self, configured, listed; /* listed: in peers/ */
    pr_state state;
    int64_t age_ms; /* since the last believed heartbeat; -1 never */
    char host[256];
    char version[64];
    char agent[256];
    char started_at[40];
    char last_at[40]; /* sentAt of the last believed heartbeat, "" never */
} pr_info;

/* Loads the key and the trust directory again (mb_set_security has
 * checked them already).  NULL and *err on failure. */
presence *pr_new(const fs_opts *o, const char *host, const pr_hooks *hooks, char **err);
void pr_free(presence *pr);

/* Our next heartbeat, signed; malloc'd (free), NULL on failure. */
char *pr_heartbeat(presence *pr, const char *agent_words, bool leaving, size_t *len);
/* The interval our last heartbeat announced: `heartbeat`, or longer with
 * more than heartbeat_rate x heartbeat leads live (doc/scaling.md). */
int64_t pr_interval_ms(presence *pr);
/* fleet_view=groups: how often (ms) our heartbeat carries our group words
 * (its group interval, announced in it): max(interval, G/group_rate s) with
 * G the members of our groups heard live; the interval otherwise. */
int64_t pr_group_interval_ms(presence *pr);
/* One delivery from the roster queue. */
void pr_received(presence *pr, const char *routing_key, const char *body, size_t len);
/* The roster link went up or down (status, and how sure pr_liveness is). */
void pr_link(presence *pr, bool up);
/* Once a second: staleness and drop-outs become notifications.  Returns
 * true when agent_words differ from the last heartbeat we sent (the caller
 * then asks the roster thread for one now). */
bool pr_tick(presence *pr, const char *agent_words);

/* name is a configured peer, or a discovered one still listed. */
bool pr_is_peer(presence *pr, const char *name);
/* The names in peers/, sorted; g_strfreev. */
char **pr_peers(presence *pr);
/* What is known of lead id (self included); false if nothing. */
bool pr_get(presence *pr, const char *id, pr_info *out);
/* Every lead known (self, configured, discovered), sorted by id;
 * g_free the array with g_ptr_array_unref (elements are owned). */
GPtrArray *pr_list(presence *pr);
/* "live (2s ago)", "stale (40s ago)", "left (unmounted 3m ago)", "never" */
void pr_words(const pr_info *i, char *out, size_t n);
const char *pr_state_name(pr_state s);
/* For an honest send: 1 live; 0 not live (why says "peer not live
 * (stale 40s)"); -1 presence cannot tell (roster link down or too new).
 * peer may be an agent's gid: live when its host is live and lists it;
 * why then says "peer not live (its host beta: stale 40s)" or "peer not
 * live (its host beta does not list it)". Anything else (a group) is -1. */
int pr_liveness(presence *pr, const char *peer, char *why, size_t n);

/* ---- whom we hear (fleet_view, doc/presence.md) --------------------------
 *
 * With fleet_view=groups this host hears the members of its groups (the
 * lead's and its local agents'), its configured peers, the leads it
 * addressed within discovery_ttl, and itself.  A lead outside all of them
 * is dropped from the table at the next pr_tick (logged "out of view"),
 * never shown stale: we no longer listen to it. */
/* fleet_view=groups */
bool pr_scoped(presence *pr);
/* What to bind (ro_hear): our groups (not "all") and the leads (configured
 * peers, addressed ones; not us).  g_strfreev both. */
void pr_hear_lists(presence *pr, char ***groups, char ***leads);
/* Scoped: we send to, had a message from, or looked up lead id (a coord_id,
 * or a gid: its host): it is heard (and, with discovery on, listed in
 * peers/) for discovery_ttl from now.  The first time, the hear hook is
 * told to ask it for a heartbeat.  Not scoped, or id is us: nothing. */
void pr_address(presence *pr, const char *id);
/* ---- the whole fleet though scoped (census.c) ----------------------------
 *
 * fleet_view=auto (the default) hears the whole fleet (roster.#, besides
 * the scoped bindings) until it hears more than view_limit leads, then
 * narrows to what fleet_view=groups hears, for the life of the mount.  A
 * census hears the whole fleet for one interval and two seconds. */
/* roster.# is to be bound now: fleet_view=all, auto not narrowed, or a
 * census on. */
bool pr_wide(presence *pr);
/* A census: 1 we hear the whole fleet already (snapshot the roster now
 * and pr_census_end it); 0 started (hear hook told: roster.# for
 * *window_ms; then pr_census_end); 2 one is running (wait for it:
 * pr_census_running); -EAGAIN refused by census_every (logged). */
int pr_census_begin(presence *pr, int64_t *window_ms);
bool pr_census_running(presence *pr);
/* End it: roster (the roster file's text now) and the leads heard only
 * for the census make the census text, sorted; those are dropped; auto
 * widens again when the fleet heard is at most view_limit.  Tells the
 * changed hook "census". */
void pr_census_end(presence *pr, const char *roster);
/* The roster thread hears roster.# for good (the broker refused a scoped
 * binding): fleet_view=auto never narrows from now (widens if it had). */
void pr_whole_fleet(presence *pr);
/* The last census's lines ("" none; g_free). */
char *pr_census_text(presence *pr);
/* For the root status: "running (...)", "<time>: N lead(s) heard ...",
 * "none yet ..." */
void pr_census_words(presence *pr, char *out, size_t n);
/* A lookup of an unknown peers/<id> probed and found no mailbox: not worth
 * probing again for 2 s (pr_absent_recent). */
void pr_absent(presence *pr, const char *id);
bool pr_absent_recent(presence *pr, const char *id);
/* "groups (2 groups, 3 leads addressed or configured)" or "all" */
void pr_view_words(presence *pr, char *out, size_t n);

uint64_t pr_rejected(presence *pr);
/* Our roster link is up. */
bool pr_link_up(presence *pr);
/* No answer from the roster thread yet: its first attempt is under way. */
bool pr_link_connecting(presence *pr);
/* "connected" or "down: reason" and counts, for the root status */
void pr_link_words(presence *pr, char *out, size_t n);

/* ---- agents and groups (SPEC section 10) ---------------------------------
 *
 * Every heartbeat this module builds carries the agents extension
 * (envelope.h): the lead's groups and this host's local agents, signed
 * with asig; an agentless host sends empty lists. Until pr_set_local is
 * called the lead's groups are groups= and there is no local agent.
 *
 * A heard heartbeat's extension is believed only with a valid asig (unless
 * insecure); with an extension whose asig does not verify, the whole
 * heartbeat is refused (counted in pr_rejected, logged once per sender),
 * and so is a heartbeat without the extension from a sender whose same run
 * (same startedAt) sent a verified one before (stripped in transit). An
 * agent entry whose gid does not live on the signing host is dropped: the
 * rest of the heartbeat is believed, the entry counted (pr_rejected_agents)
 * and logged once per sender. A heartbeat without the extension (a fleetfs
 * before agents) shows its lead with no agent and no group; such a lead is
 * not listed as a member of `all` (it does not read broadcasts).
 *
 * Heard agents go when their host's heartbeat stops listing them, and when
 * their host has been silent for discovery_ttl (whether or not the lead is
 * a configured peer); the discovery option does not hide agents. Our own
 * heartbeats coming back change nothing: local agents are what
 * pr_set_local said.
 *
 * Hooks: entry("agents", gid, added) when an agent appears or goes,
 * entry("groups", g, added) when a group does (never for "all", which is
 * always there), changed("agents/<gid>/status") when an agent's state,
 * groups or its host's presence state change, changed("groups/<g>/members")
 * when a group's members change, and changed("roster") with any of those. */

/* One local agent, as our heartbeat announces it. */
typedef struct {
    const char *gid;           /* <name>@<our coord_id> */
    const char *state;         /* its injector state in words; NULL "starting"; cut to
                                * ENV_HB_STATE_LEN - 1 bytes, controls made spaces */
    const char *const *groups; /* NULL-terminated group names (not "all", at most
                                * ENV_HB_MAX_GROUPS); NULL: none */
} pr_local_agent;

/* What our heartbeat announces from now on: the lead's groups
 * (NULL-terminated, NULL: none) and the local agents (replacing the
 * previous set). An agent whose gid is not valid or not on this host, a
 * second entry with the same gid, or bad groups, is left out and logged;
 * the function then returns false (the rest is taken). Bad lead groups
 * are left out likewise. Notifies watchers of what changed, and makes the
 * next pr_tick return true when the set differs from what the last
 * heartbeat carried (so one is sent at once). Any thread. */
bool pr_set_local(presence *pr, const char *const *lead_groups, const pr_local_agent *agents,
                  size_t n);

typedef struct {
    char gid[GID_MAX_LEN + 1];
    char name[AGENT_NAME_MAX_LEN + 1];                /* before the '@' */
    char host[NAME_MAX_LEN + 1];                      /* the coord_id of its host */
    bool local;                                       /* one of this host's agents */
    char state[ENV_HB_STATE_LEN];                     /* its agent state words */
    char groups[ENV_HB_MAX_GROUPS][NAME_MAX_LEN + 1]; /* sorted; "all" not listed */
    size_t n_groups;
    pr_state presence; /* its host's: live, stale, left (never: not heard yet) */
    int64_t age_ms;    /* since its host's last believed heartbeat; -1 never */
} pr_agent_info;

/* Every agent known, local and heard, sorted by gid; elements owned by the
 * array (g_ptr_array_unref). */
GPtrArray *pr_agents(presence *pr);
/* What is known of agent gid; false if nothing. */
bool pr_agent_get(presence *pr, const char *gid, pr_agent_info *out);
/* "live (2s ago)" etc. for the agent's host, as pr_words. */
void pr_agent_words(const pr_agent_info *a, char *out, size_t n);
/* Every group configured here (the lead's, the local agents') or heard
 * (heard leads' and agents'), and "all", sorted; g_strfreev. */
char **pr_groups(presence *pr);
/* The ids (coord_ids and gids) in group g, sorted; g_strfreev. "all":
 * this lead, every heard lead whose heartbeat carries the extension, and
 * every agent. NULL when g is not a group pr_groups lists. */
char **pr_group_members(presence *pr, const char *g);
/* The groups of lead id, sorted (g_strfreev): ours are what pr_set_local
 * (or groups=) said; another lead's what its last believed heartbeat said.
 * NULL when id is not known, or its heartbeats carry no agents extension
 * (never heard, or a fleetfs before agents). "all" is not listed. */
char **pr_lead_groups(presence *pr, const char *id);
/* Agent entries dropped because their gid named another host than the
 * heartbeat's signer. */
uint64_t pr_rejected_agents(presence *pr);

/* ---- hosts (SPEC section 11) ---------------------------------------------
 *
 * Every lead this table knows (ourselves, the configured peers, every one
 * ever heard, whether or not discovery lists it in peers/) is a host: a
 * place agents can be started. Hooks: entry("hosts", id, true) when a lead
 * is heard for the first time, changed("hosts/<id>/status") whenever what
 * peers/<id>/status shows of its presence changes, or its profiles do. */

/* Every host known, sorted; g_strfreev. */
char **pr_hosts(presence *pr);
bool pr_is_host(presence *pr, const char *id);
/* The profiles host id offers, sorted (g_strfreev): ours are the
 * [profile NAME] sections; another's what its last believed heartbeat
 * said (psig checked). NULL when unknown: never heard, or a fleetfs
 * before profiles. */
char **pr_host_profiles(presence *pr, const char *id);

#endif
