/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/scope.c — whom this host hears with fleet_view=groups
 * (doc/presence.md, doc/scaling.md step 2): its groups, its configured
 * peers, the leads it addressed within discovery_ttl, itself.  The lists
 * for the roster thread's bindings, the addressed leads, which heard
 * leads are still in view, and so a lead's state (pri_state_of: live or
 * stale by its interval, or by its group interval where only a group
 * binding hears it).
 * The table and its rules: presence.h, pr_int.h.
 */
#include "fleetfs/presence/pr_int.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

#define PR_ABSENT_MS 2000 /* an absent mailbox is not probed again this soon */
#define PR_ABSENT_MAX 1024

bool pr_scoped(presence *pr)
{
    return !pr->o->fleet_view_all;
}

/* fleet_view=auto not narrowed hears what fleet_view=all does (census.c
 * says when it narrows); a census makes any scoped host wide a while */
bool pri_narrow_base_locked(presence *pr)
{
    return pr_scoped(pr) && (!pr->o->fleet_view_auto || pr->narrowed);
}

bool pri_narrow_locked(presence *pr)
{
    return pri_narrow_base_locked(pr) && !pr->census_on;
}

unsigned pri_live_heard_locked(presence *pr, int64_t now)
{
    GHashTableIter it;
    gpointer v;
    unsigned n = 0;
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v))
        if (!((pr_lead *)v)->self && pri_state_of(pr, v, now) == PR_LIVE)
            n++;
    return n;
}

/* Our groups: the lead's and every local agent's, into set. */
static void our_groups_locked(presence *pr, GHashTable *set)
{
    for (char **g = pr->local_groups; g && *g; g++)
        g_hash_table_add(set, *g);
    for (guint i = 0; i < pr->local_agents->len; i++) {
        pr_agent *a = pr->local_agents->pdata[i];
        for (char **g = a->groups; g && *g; g++)
            g_hash_table_add(set, *g);
    }
    g_hash_table_remove(set, GROUP_ALL);
}

/* We are in a group (the lead or a local agent; "all" does not count). */
static bool our_groups_any_locked(presence *pr)
{
    GHashTable *ours = g_hash_table_new(g_str_hash, g_str_equal);
    bool any;
    our_groups_locked(pr, ours);
    any = g_hash_table_size(ours) > 0;
    g_hash_table_destroy(ours);
    return any;
}

bool pri_addressed_locked(presence *pr, const pr_lead *l, int64_t now)
{
    return l->addressed && now - l->addressed_mono < pr->o->discovery_ttl_ms;
}

/* l's last heartbeat names one of the groups in ours (its lead's groups
 * or its agents'). */
static bool lead_shares(GHashTable *ours, const pr_lead *l)
{
    bool shares = false;
    for (char **g = l->groups; !shares && g && *g; g++)
        shares = g_hash_table_contains(ours, *g);
    for (guint i = 0; !shares && l->agents && i < l->agents->len; i++) {
        pr_agent *a = l->agents->pdata[i];
        for (char **g = a->groups; !shares && g && *g; g++)
            shares = g_hash_table_contains(ours, *g);
    }
    return shares;
}

/* l still heard with fleet_view=groups: ourselves, a configured peer, an
 * addressed lead, or one whose last heartbeat shares a group with us. */
bool pri_in_view_locked(presence *pr, const pr_lead *l, int64_t now)
{
    GHashTable *ours;
    bool shares;

    if (!pri_narrow_locked(pr) || l->self || l->configured || pri_addressed_locked(pr, l, now))
        return true;
    ours = g_hash_table_new(g_str_hash, g_str_equal);
    our_groups_locked(pr, ours);
    shares = lead_shares(ours, l);
    g_hash_table_destroy(ours);
    return shares;
}

/* The group members we hear live (ourselves included when we are in a
 * group): the G of our group interval.  0 when we are in no group. */
size_t pri_group_heard_locked(presence *pr, int64_t now)
{
    GHashTable *ours = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTableIter it;
    gpointer v;
    size_t n = 0;

    our_groups_locked(pr, ours);
    if (g_hash_table_size(ours) > 0) {
        n = 1; /* ourselves */
        g_hash_table_iter_init(&it, pr->leads);
        while (g_hash_table_iter_next(&it, NULL, &v))
            if (!((pr_lead *)v)->self && lead_shares(ours, v) &&
                pri_state_of(pr, v, now) == PR_LIVE)
                n++;
    }
    g_hash_table_destroy(ours);
    return n;
}

/* A heartbeat from a lead not in the table: worth taking with
 * fleet_view=groups only when it shares a group with us (a lead leaving our
 * group keeps the group in its key for three intervals: its heartbeats
 * after the one that said so are not news).  Configured and addressed
 * leads are always in the table. */
bool pri_hb_in_view_locked(presence *pr, const env_heartbeat *h)
{
    return !pri_narrow_locked(pr) || pri_hb_shares_locked(pr, h);
}

/* h names one of our groups (its lead's or an agent's). */
bool pri_hb_shares_locked(presence *pr, const env_heartbeat *h)
{
    GHashTable *ours;
    bool shares = false;

    ours = g_hash_table_new(g_str_hash, g_str_equal);
    our_groups_locked(pr, ours);
    for (size_t i = 0; !shares && h->groups && h->groups[i]; i++)
        shares = g_hash_table_contains(ours, h->groups[i]);
    for (size_t i = 0; !shares && i < h->n_agents; i++)
        for (char **g = h->agents[i].groups; !shares && g && *g; g++)
            shares = g_hash_table_contains(ours, *g);
    g_hash_table_destroy(ours);
    return shares;
}

void pr_hear_lists(presence *pr, char ***groups, char ***leads)
{
    GHashTable *set = g_hash_table_new(g_str_hash, g_str_equal);
    GPtrArray *g = g_ptr_array_new(), *l = g_ptr_array_new();
    GHashTableIter it;
    gpointer k, v;
    int64_t now = pri_mono_ms();

    g_mutex_lock(&pr->lock);
    our_groups_locked(pr, set);
    g_hash_table_iter_init(&it, set);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(g, g_strdup(k));
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *ld = v;
        if (!ld->self && (ld->configured || pri_addressed_locked(pr, ld, now)))
            g_ptr_array_add(l, g_strdup(ld->id));
    }
    g_mutex_unlock(&pr->lock);
    g_hash_table_destroy(set);
    g_ptr_array_sort(g, pri_cmp_str_ptr);
    g_ptr_array_sort(l, pri_cmp_str_ptr);
    g_ptr_array_add(g, NULL);
    g_ptr_array_add(l, NULL);
    *groups = (char **)g_ptr_array_free(g, FALSE);
    *leads = (char **)g_ptr_array_free(l, FALSE);
}

void pr_address(presence *pr, const char *id)
{
    char host[NAME_MAX_LEN + 1];
    GArray *notes;
    pr_lead *l;
    bool first = false;
    int64_t now = pri_mono_ms();

    if (!pr_scoped(pr) || !id || !id_host(id, host) || strcmp(host, pr->o->coord_id) == 0)
        return;
    notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    g_mutex_lock(&pr->lock);
    l = g_hash_table_lookup(pr->leads, host);
    if (!l) {
        l = pri_lead_new(pr, host);
        pri_note(notes, 1, "hosts", l->id);
        pri_note(notes, 0, "roster", NULL);
    }
    first = !pri_addressed_locked(pr, l, now) && !l->configured;
    if (!pri_addressed_locked(pr, l, now))
        l->addressed_since = now; /* bound by name from now: pri_stale_after_locked */
    l->addressed = true;
    l->addressed_mono = now;
    g_hash_table_remove(pr->absent, host);
    if (!l->listed && pr->o->discovery) {
        l->listed = true;
        pri_note(notes, 1, "peers", l->id);
        log_info(
            "presence: lead %s addressed (this host hears only what it needs): now in peers/, its "
            "heartbeats heard for discovery_ttl after the last message to or from it",
            l->id);
    }
    g_mutex_unlock(&pr->lock);
    pri_deliver_notes(pr, notes);
    if (first && pr->hooks.hear)
        pr->hooks.hear(pr->hooks.ud, host);
}

void pr_absent(presence *pr, const char *id)
{
    int64_t *at = g_new(int64_t, 1);
    *at = pri_mono_ms();
    g_mutex_lock(&pr->lock);
    if (g_hash_table_size(pr->absent) >= PR_ABSENT_MAX)
        g_hash_table_remove_all(pr->absent);
    g_hash_table_replace(pr->absent, g_strdup(id), at);
    g_mutex_unlock(&pr->lock);
}

bool pr_absent_recent(presence *pr, const char *id)
{
    int64_t *at;
    bool recent;
    g_mutex_lock(&pr->lock);
    at = g_hash_table_lookup(pr->absent, id);
    recent = at && pri_mono_ms() - *at < PR_ABSENT_MS;
    g_mutex_unlock(&pr->lock);
    return recent;
}

void pr_view_words(presence *pr, char *out, size_t n)
{
    char **g, **l, at[40];
    bool wide, census;
    unsigned heard, limit = pr->o->view_limit, then;

    if (!pr_scoped(pr)) {
        snprintf(out, n, "all (every lead's heartbeat)");
        return;
    }
    g_mutex_lock(&pr->lock);
    wide = !pri_narrow_base_locked(pr);
    census = pr->census_on;
    heard = pri_live_heard_locked(pr, pri_mono_ms());
    then = pr->narrowed_heard;
    g_strlcpy(at, pr->narrowed_at, sizeof at);
    g_mutex_unlock(&pr->lock);
    if (wide) {
        snprintf(out, n, "auto (the whole fleet: %u lead(s) heard live, view_limit %u)", heard,
                 limit);
        return;
    }
    pr_hear_lists(pr, &g, &l);
    if (pr->o->fleet_view_auto)
        snprintf(out, n,
                 "auto (narrowed at %s: %u leads heard, more than view_limit %u; now hearing %u "
                 "group(s), %u lead(s) configured or addressed, and the members of those "
                 "groups%s)",
                 at, then, limit, g_strv_length(g), g_strv_length(l),
                 census ? "; a census hears the whole fleet now" : "");
    else
        snprintf(out, n,
                 "groups (hearing %u group(s), %u lead(s) configured or addressed, and "
                 "the members of those groups%s)",
                 g_strv_length(g), g_strv_length(l),
                 census ? "; a census hears the whole fleet now" : "");
    g_strfreev(g);
    g_strfreev(l);
}

/* How long after its last heartbeat l is stale (doc/presence.md, "Group
 * heartbeats"): three of its intervals, or three of its group intervals
 * when we hear it only through a group binding (fleet_view=groups, and it
 * is neither configured nor addressed): only every group interval does its
 * heartbeat carry its groups.  Ourselves likewise: in a group we bind no
 * key of our own (broker/roster.c), and we announce our interval as our
 * group interval when in none.  A lead addressed just now was bound by
 * name a moment ago: until its first heartbeat since (asked for) it is
 * judged as before, for three intervals; then by its interval. */
int64_t pri_stale_after_locked(presence *pr, const pr_lead *l, int64_t now)
{
    int64_t iv = l->interval_ms, gi = MAX(l->group_iv_ms, l->interval_ms);

    if (!pri_narrow_locked(pr))
        return PR_STALE_AFTER * iv;
    if (l->self && !our_groups_any_locked(pr))
        /* in no group we bind only our self word: our own come back every
         * ENV_HB_SELF_EVERY heartbeats (doc/protocol.md section 11) */
        return PR_STALE_AFTER * ENV_HB_SELF_EVERY * iv;
    if (l->self) /* in a group, our own come back only as group heartbeats */
        return PR_STALE_AFTER * gi;
    if (l->configured)
        return PR_STALE_AFTER * iv;
    if (!pri_addressed_locked(pr, l, now))
        return PR_STALE_AFTER * gi;
    if (l->heard_mono >= l->addressed_since || now - l->addressed_since >= PR_STALE_AFTER * iv)
        return PR_STALE_AFTER * iv;
    return PR_STALE_AFTER * gi;
}

pr_state pri_state_of(presence *pr, const pr_lead *l, int64_t now)
{
    if (!l->heard)
        return PR_NEVER;
    if (l->left)
        return PR_LEFT;
    return now - l->heard_mono < pri_stale_after_locked(pr, l, now) ? PR_LIVE : PR_STALE;
}
