/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/config/optset.c — an option set as a whole, from birth to free:
 * the defaults (opts_init), the checks that need every option set first
 * (opts_finish: a name for the lead, no two entities typing into one pane,
 * lifetimes that fit inside message_ttl, the profiles, state_dir found),
 * and opts_free.  One option's own value is checked by its setter in
 * options.c when it is set; what is checked here is how options agree.
 */
#include "fleetfs/config/options.h"
#include "fleetfs/config/opts_int.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/config/profile.h"
#include "fleetfs/wire/names.h"
#include "herdr/foreground.h"

/* Short host name, lowercased, if it is a valid lead name. */
static char *opts_host_name(char *raw, size_t rawsz)
{
    char *dot, *name;

    if (gethostname(raw, rawsz) != 0)
        raw[0] = '\0';
    raw[rawsz - 1] = '\0';
    dot = strchr(raw, '.');
    if (dot != NULL)
        *dot = '\0';
    name = g_ascii_strdown(raw, -1);
    if (!name_valid(name)) {
        g_free(name);
        return NULL;
    }
    return name;
}

void opts_init(fs_opts *o)
{
    char raw[256];

    memset(o, 0, sizeof(*o));
    o->coord_id = opts_host_name(raw, sizeof(raw));
    o->peers = g_new0(char *, 1);
    o->spawn_from = g_new0(char *, 1);
    o->broker_uri_env = g_strdup("FLEET_BROKER_URI");
    o->queue_type = g_strdup("classic");
    o->max_length = 10000;
    o->message_ttl_ms = 7 * OPTS_DAY_MS;
    o->expire_grace_ms = 10 * 1000;
    o->prefetch = 64;
    o->max_message = 65536;
    o->send_timeout_ms = 5000;
    o->probe_timeout_ms = 2000;
    o->takeover_grace_ms = 15000;
    o->inject = g_strdup("auto");
    o->inject_commands = g_strdup(FG_DEFAULT_COMMANDS);
    o->inject_settle_ms = 500;
    o->inject_quiet_ms = 3000;
    o->insecure = false;
    o->heartbeat_ms = 5000;
    o->heartbeat_rate = 200;
    o->group_rate = 2;
    o->discovery = true;
    o->discovery_ttl_ms = 10 * 60 * 1000;
    o->fleet_view_all = false;
    o->fleet_view_auto = true;
    o->view_limit = 100;
    o->census_every_ms = 60 * 1000;
    o->groups = g_new0(char *, 1);
    o->spawn_ttl_ms = 60 * 1000;
    o->spawn_grace_ms = 330 * 1000;
}

/* The pane each entity is typed into, by what names it. */
static const char *opts_target_of(const fs_agent *a)
{
    return a->target != NULL ? a->target : a->name;
}

static int opts_check_targets(const fs_opts *o, char **err)
{
    const char *lead = o->inject_target != NULL ? o->inject_target : o->coord_id;

    for (size_t i = 0; i < o->n_agents; i++) {
        const char *t = opts_target_of(&o->agents[i]);
        char *q = opts_quote(t);

        if (strcmp(t, lead) == 0)
            *err = g_strdup_printf("agent '%s' and the lead would type into the same pane '%s': "
                                   "give one of them its own (target = in [agent %s], or "
                                   "inject_target=)",
                                   o->agents[i].name, q, o->agents[i].name);
        for (size_t j = 0; *err == NULL && j < i; j++)
            if (strcmp(t, opts_target_of(&o->agents[j])) == 0)
                *err = g_strdup_printf("agents '%s' and '%s' would type into the same pane "
                                       "'%s': give one of them its own (target = in its "
                                       "[agent NAME] section)",
                                       o->agents[j].name, o->agents[i].name, q);
        g_free(q);
        if (*err != NULL)
            return -1;
    }
    return 0;
}

int opts_finish(fs_opts *o, char **err)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char raw[256];

    *err = NULL;
    if (o->coord_id == NULL) {
        char *q;

        if (gethostname(raw, sizeof(raw)) != 0)
            raw[0] = '\0';
        raw[sizeof(raw) - 1] = '\0';
        q = opts_quote(raw);
        *err = g_strdup_printf("coord_id: the host name '%s' does not give a valid "
                               "lead name (" OPTS_NAME_FORM "); set one with "
                               "-o coord_id=NAME",
                               q);
        g_free(q);
        return -1;
    }
    if (opts_check_targets(o, err) < 0)
        return -1;
    if (o->expires_in_ms > o->message_ttl_ms) {
        *err = g_strdup_printf("expires_in: %lld ms is longer than message_ttl (%lld ms): a "
                               "receiver would refuse such messages; choose at most message_ttl",
                               (long long)o->expires_in_ms, (long long)o->message_ttl_ms);
        return -1;
    }
    if (o->agent_expires_ms == 0)
        o->agent_expires_ms = 2 * o->message_ttl_ms + o->expire_grace_ms;
    if (o->agent_expires_ms <= o->message_ttl_ms + o->expire_grace_ms) {
        *err = g_strdup_printf(
            "agent_expires: %lld ms is not longer than message_ttl + expire_grace (%lld ms): "
            "the broker could delete an agent's mailbox while a message in it can still be "
            "delivered; choose more than %lld ms (doc/protocol.md, \"Collecting agent mailboxes\")",
            (long long)o->agent_expires_ms, (long long)(o->message_ttl_ms + o->expire_grace_ms),
            (long long)(o->message_ttl_ms + o->expire_grace_ms));
        return -1;
    }
    if (o->ask_timeout_ms == 0) /* 2 minutes, unless messages live shorter */
        o->ask_timeout_ms = MIN(2 * 60 * 1000, o->message_ttl_ms);
    if (o->ask_timeout_ms > o->message_ttl_ms || o->ask_timeout_ms < 1000) {
        *err = g_strdup_printf("ask_timeout: %lld ms is not from 1s to message_ttl (%lld ms): "
                               "choose a question's lifetime in that range",
                               (long long)o->ask_timeout_ms, (long long)o->message_ttl_ms);
        return -1;
    }
    if (prof_check(&o->profiles, o->inject, o->inject_commands, err) < 0)
        return -1;
    if (o->state_dir != NULL)
        return 0;
    if (xdg != NULL && xdg[0] == '/')
        o->state_dir = g_build_filename(xdg, "fleetfs", o->coord_id, NULL);
    else if (home != NULL && home[0] == '/')
        o->state_dir = g_build_filename(home, ".local", "state", "fleetfs", o->coord_id, NULL);
    else {
        *err = g_strdup("state_dir: neither XDG_STATE_HOME nor HOME is an "
                        "absolute path; set -o state_dir=PATH");
        return -1;
    }
    return 0;
}

void opts_free(fs_opts *o)
{
    g_free(o->coord_id);
    g_strfreev(o->peers);
    g_strfreev(o->spawn_from);
    prof_set_free(&o->profiles);
    g_free(o->broker_uri_env);
    g_free(o->broker_uri);
    g_free(o->vhost);
    g_free(o->queue_type);
    g_free(o->state_dir);
    g_free(o->inject);
    g_free(o->inject_target);
    g_free(o->inject_commands);
    g_free(o->key);
    g_free(o->trusted_keys);
    g_free(o->ca);
    g_free(o->config);
    for (size_t i = 0; i < o->n_agents; i++)
        opts_agent_clear(&o->agents[i]);
    g_free(o->agents);
    g_strfreev(o->groups);
    memset(o, 0, sizeof(*o));
}
