/* SPDX-License-Identifier: Apache-2.0 */
/* options.h — fleetfs configuration (SPEC section 8): the option set, its
 * defaults, validation of every value from -o or a config file, the --help
 * text, and broker URI helpers. An fs_opts is owned by main until the mount
 * starts and is read-only afterwards. Strings are g_malloc'd (g_free). */
#ifndef FLEETFS_OPTIONS_H
#define FLEETFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleetfs/config/profile.h"

/* A local agent (SPEC section 10): from agents=, from an [agent NAME]
 * section of the config file, or both. */
typedef struct {
    char *name;    /* [a-z][a-z0-9_-]{0,31}; its gid is name@coord_id */
    char **groups; /* its own groups, NULL-terminated (an empty list: none of
                    * its own); NULL: the default groups (fs_opts.groups) */
    char *target;  /* herdr agent or pane label, or tmux pane title, to type
                    * into; NULL: the one named like the agent */
    bool listed;   /* named in agents= (the last one given) */
    bool section;  /* has an [agent NAME] section */
} fs_agent;

#define OPTS_MAX_GROUPS 16 /* per entity (groups=, an agent's groups) */

typedef struct {
    char *coord_id;
    char **peers; /* NULL-terminated, g_strfreev-able; empty = {NULL} */
    char *broker_uri_env;
    char *broker_uri;
    char *vhost;      /* NULL = from URI, else "/" */
    char *queue_type; /* "classic" | "quorum" */
    long max_length;
    int64_t message_ttl_ms;
    /* an agent mailbox's idle lifetime (x-expires, doc/protocol.md section 10b):
     * longer than message_ttl + expire_grace; 0 until opts_finish: 2 x message_ttl + expire_grace,
     * which keeps the rule whatever the two are */
    int64_t agent_expires_ms;
    int64_t expires_in_ms;   /* a message's default lifetime (expiresAt - sentAt); 0:
                                message_ttl.  At most message_ttl (opts_finish) */
    int64_t ask_timeout_ms;  /* a question's lifetime (ask) unless ask.json says; at most
                                message_ttl */
    int64_t expire_grace_ms; /* after expiresAt, wait this long for the receiver's word
                                before `sent` concludes expired by this host's clock */
    int prefetch;
    size_t max_message;
    int64_t send_timeout_ms;
    int64_t probe_timeout_ms;
    int64_t takeover_grace_ms; /* wait this long for a previous consumer of the inbox to go */
    char *state_dir;
    char *inject; /* herdr | tmux | none */
    char *inject_target;
    char *inject_commands;    /* ':'-separated programs the tmux backend types into */
    int64_t inject_settle_ms; /* tmux: from a paste's end to the carriage return */
    int64_t inject_quiet_ms;  /* tmux: a person's keys this recent hold typing */
    char *key;
    char *trusted_keys;
    char *ca;
    char *config;
    bool insecure;
    /* presence (doc/presence.md) */
    int64_t heartbeat_ms;     /* between heartbeats; stale after three */
    unsigned heartbeat_rate;  /* heartbeats a second a host should hear at most (our
                                 interval grows with the fleet); 0: fixed */
    unsigned group_rate;      /* fleet_view=groups: group heartbeats a second a host should
                                 hear at most (our group words go out every
                                 max(interval, G/rate s)); 0: every heartbeat */
    bool discovery;           /* peers/ also lists leads heard from */
    int64_t discovery_ttl_ms; /* a silent discovered lead leaves peers/ */
    bool fleet_view_all;      /* fleet_view=all: hear every heartbeat (roster.#);
                                 false (groups, auto): our groups, peers and addressed leads */
    bool fleet_view_auto;     /* fleet_view=auto (the default): as all while we hear at
                                 most view_limit leads, then as groups */
    unsigned view_limit;      /* fleet_view=auto: leads heard (not us) above which we narrow */
    int64_t census_every_ms;  /* least time between two censuses of the whole fleet */
    /* agents and groups (SPEC section 10, doc/agents.md) */
    fs_agent *agents; /* n_agents of them, in the order first given */
    size_t n_agents;
    char **groups; /* groups= : the lead's groups, and those of every local
                    * agent without its own; NULL-terminated, empty = {NULL};
                    * never holds "all" (every entity's group implicitly) */
    /* spawn (SPEC section 11) */
    char **spawn_from;      /* coord_ids allowed to spawn and stop here; empty = nobody */
    prof_set profiles;      /* [profile NAME] sections of the config file */
    int64_t spawn_ttl_ms;   /* a request's lifetime (its expiresAt) */
    int64_t spawn_grace_ms; /* then how long it may go unanswered before `failed` */
} fs_opts;

void opts_init(fs_opts *o);
bool opts_known(const char *key);
/* 0 ok; -1 and *err (g_free) naming the key and the accepted form. */
int opts_set(fs_opts *o, const char *key, const char *value, char **err);
/* GKeyFile with a group [fleetfs], whose every key goes through opts_set,
 * and any number of [agent NAME] sections (keys groups, target; anything
 * else, or a NAME that is not an agent name, is an error naming it).
 *
 * Agents: the local agents are those named in agents= together with those
 * that have a section; an agent in both is one agent, with its section's
 * groups and target. A later agents= (-o after the file) replaces the
 * earlier list but never removes an agent that has a section. */
int opts_load_file(fs_opts *o, const char *path, bool must_exist, char **err);
/* Derives state_dir when unset, checks coord_id is known, and that no two
 * entities (the lead and the local agents) would type into the same pane
 * (target, else the name; the lead's: inject_target, else coord_id). */
int opts_finish(fs_opts *o, char **err);
void opts_free(fs_opts *o);
/* Every option, its default, one line each. Static storage. */
const char *opts_help(void);

/* amqp://user:secret@h:p/v -> amqp://user:***@h:p/v; g_free. NULL -> NULL. */
char *uri_redact(const char *uri);
/* URIs separated by whitespace or commas -> NULL-terminated strv. */
char **uri_split(const char *list);

/* The groups entity a is in (a NULL: the lead): a's own, else groups=.
 * Never NULL; "all" is not listed. Owned by o. */
const char *const *opts_agent_groups(const fs_opts *o, const fs_agent *a);
/* The local agent called name, or NULL. */
const fs_agent *opts_agent(const fs_opts *o, const char *name);

/* Extras. */
/* The URI carries a password (a ':' in its user-info). */
bool uri_has_password(const char *uri);
/* "65536", "64K", "64KiB", "1M", "1MiB". 0 ok, -1 bad. */
int opts_parse_size(const char *s, uint64_t *bytes);

#endif
