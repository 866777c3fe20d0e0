/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/presence.c — the presence table (design in presence.h).
 *
 * Time: "how long ago" is measured on our own monotonic clock from when a
 * heartbeat was believed, never from the sender's sentAt, so a peer whose
 * clock is off still shows the right age; sentAt only decides whether a
 * heartbeat is too old, from the future, or older than one believed before
 * (a replay).  Staleness uses the sender's own interval, so leads with
 * different heartbeat settings judge each other correctly.
 *
 * Notifications: a heartbeat that changes what a reader would see (a new
 * lead, a state, host, version or agent change) wakes watchers of `roster`
 * and of peers/<id>/status at once; staleness and drop-outs are found by
 * pr_tick.  A heartbeat that changes nothing but the age wakes nobody.
 *
 * Agents and groups (SPEC section 10; the rules are in presence.h): each
 * lead entry holds what its last believed heartbeat said of its agents and
 * groups; the local set is what pr_set_local said. What watchers of agents/
 * and groups/ are told is found by comparing two snapshots — every agent's
 * state, groups and host presence, and every group's members — before and
 * after each change (snap_diff_locked), rather than by reasoning about
 * each kind of change: a few hundred short strings a heartbeat, and no
 * notification can be forgotten.
 */
#include "fleetfs/presence/pr_int.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

static void lead_free(gpointer p)
{
    pr_lead *l = p;
    g_strfreev(l->groups);
    g_strfreev(l->profiles);
    if (l->agents)
        g_ptr_array_unref(l->agents);
    g_free(l);
}

presence *pr_new(const fs_opts *o, const char *host, const pr_hooks *hooks, char **err)
{
    presence *pr = g_new0(presence, 1);
    g_mutex_init(&pr->lock);
    pr->o = o;
    pr->hooks = *hooks;
    g_strlcpy(pr->host, host && env_text_plain(host, strlen(host)) ? host : "unknown",
              sizeof pr->host);
    env_time_format(env_now_ms(), pr->started_at);
    pr->interval_ms = o->heartbeat_ms; /* until the first heartbeat says otherwise */
    pr->group_iv_ms = o->heartbeat_ms;
    pr->leads = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, lead_free);
    pr->logged_agents = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    pr->snap_agents = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->snap_groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->local_agents = g_ptr_array_new_with_free_func(pri_agent_free);
    pr->local_groups = g_new0(char *, 1);
    pr->logged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    pr->absent = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->census_only = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->link_since = pri_mono_ms();
    if (!o->insecure) {
        pr->key = sig_load_secret(o->key, err);
        pr->trust_stamp = sig_trust_stamp(o->trusted_keys); /* before: see sign.h */
        if (pr->key)
            pr->trust = sig_trust_load_quiet(o->trusted_keys, err); /* the mailbox warns */
        if (!pr->key || !pr->trust) {
            pr_free(pr);
            return NULL;
        }
    }
    for (char **p = o->peers; p && *p; p++) {
        pr_lead *l = pri_lead_new(pr, *p);
        l->configured = l->listed = true;
    }
    if (!g_hash_table_lookup(pr->leads, o->coord_id))
        pri_lead_new(pr, o->coord_id);
    ((pr_lead *)g_hash_table_lookup(pr->leads, o->coord_id))->self = true;
    {
        /* the lead's groups until pr_set_local says otherwise; nobody
         * watches yet, so the first snapshot is told to no one */
        bool ok = true;
        GArray *none = g_array_new(FALSE, TRUE, sizeof(pr_note));
        g_strfreev(pr->local_groups);
        pr->local_groups = pri_groups_clean((const char *const *)o->groups, "the lead", &ok);
        pri_snap_diff_locked(pr, none, pri_mono_ms());
        g_array_free(none, TRUE);
    }
    return pr;
}

void pr_free(presence *pr)
{
    if (!pr)
        return;
    sig_key_free(pr->key);
    sig_trust_free(pr->trust);
    g_hash_table_destroy(pr->leads);
    g_hash_table_destroy(pr->logged);
    g_hash_table_destroy(pr->logged_agents);
    g_hash_table_destroy(pr->snap_agents);
    g_hash_table_destroy(pr->snap_groups);
    g_hash_table_destroy(pr->absent);
    g_hash_table_destroy(pr->census_only);
    g_free(pr->census_text);
    g_ptr_array_unref(pr->local_agents);
    g_strfreev(pr->local_groups);
    g_free(pr->local_key);
    g_free(pr->agent_sent);
    g_mutex_clear(&pr->lock);
    g_free(pr);
}
