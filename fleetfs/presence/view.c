/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/view.c — reading the table: peers/, roster, one lead's state and words,
 * a peer's liveness for a send, the roster link.
 * The table and its rules: presence.h, pr_int.h.
 */
#include "fleetfs/presence/pr_int.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

/* ------------------------------------------------------------------ */
/* reading                                                             */

bool pr_is_peer(presence *pr, const char *name)
{
    pr_lead *l;
    bool yes;
    g_mutex_lock(&pr->lock);
    l = g_hash_table_lookup(pr->leads, name);
    yes = l && l->listed;
    g_mutex_unlock(&pr->lock);
    return yes;
}

char **pr_peers(presence *pr)
{
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer v;
    g_mutex_lock(&pr->lock);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v))
        if (((pr_lead *)v)->listed)
            g_ptr_array_add(out, g_strdup(((pr_lead *)v)->id));
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, pri_cmp_str_ptr);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

static void info_of(presence *pr, const pr_lead *l, int64_t now, pr_info *out)
{
    memset(out, 0, sizeof *out);
    g_strlcpy(out->id, l->id, sizeof out->id);
    out->self = l->self;
    out->configured = l->configured;
    out->listed = l->listed;
    out->state = pri_state_of(pr, l, now);
    out->age_ms = l->heard ? now - l->heard_mono : -1;
    g_strlcpy(out->host, l->host, sizeof out->host);
    g_strlcpy(out->version, l->version, sizeof out->version);
    g_strlcpy(out->agent, l->agent, sizeof out->agent);
    g_strlcpy(out->started_at, l->started_at, sizeof out->started_at);
    g_strlcpy(out->last_at, l->last_at, sizeof out->last_at);
}

bool pr_get(presence *pr, const char *id, pr_info *out)
{
    pr_lead *l;
    g_mutex_lock(&pr->lock);
    l = g_hash_table_lookup(pr->leads, id);
    if (l)
        info_of(pr, l, pri_mono_ms(), out);
    g_mutex_unlock(&pr->lock);
    return l != NULL;
}

static gint cmp_info(gconstpointer a, gconstpointer b)
{
    return strcmp((*(pr_info *const *)a)->id, (*(pr_info *const *)b)->id);
}

GPtrArray *pr_list(presence *pr)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer v;
    int64_t now = pri_mono_ms();
    g_mutex_lock(&pr->lock);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_info *i = g_new(pr_info, 1);
        info_of(pr, v, now, i);
        g_ptr_array_add(out, i);
    }
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, cmp_info);
    return out;
}

/* pr_liveness for a lead: words (why it is not live) are "no heartbeat
 * heard from it", "stale 40s" or "left 3m". */
static int lead_liveness(presence *pr, const char *id, char *words, size_t n)
{
    pr_info i;
    bool settled;
    int64_t now = pri_mono_ms();
    char age[32];

    pr_lead *l;

    g_mutex_lock(&pr->lock);
    settled = pr->link_up && now - pr->link_since >= PR_STALE_AFTER * pr->o->heartbeat_ms;
    /* fleet_view=groups, auto narrowed: a lead first addressed just now was
     * not listened to before; give its heartbeat (asked for) three
     * intervals to come, from the first address of this spell (every send
     * addresses it again).  Hearing the whole fleet, there is no such wait */
    l = g_hash_table_lookup(pr->leads, id);
    if (l && !l->heard && l->addressed && pri_narrow_base_locked(pr) &&
        now - l->addressed_since < PR_STALE_AFTER * pr->o->heartbeat_ms)
        settled = false;
    g_mutex_unlock(&pr->lock);
    if (!pr_get(pr, id, &i))
        i.state = PR_NEVER;
    if (i.state == PR_LIVE)
        return 1;
    /* just (re)connected: the peers may be reconnecting too; do not call
     * them away until they have had three intervals to say hello (a lead
     * that said it left did leave) */
    if (!settled && i.state != PR_LEFT)
        return -1;
    if (i.state == PR_NEVER) {
        snprintf(words, n, "no heartbeat heard from it");
        return 0;
    }
    pri_fmt_age(i.age_ms, age, sizeof age);
    snprintf(words, n, "%s %s", i.state == PR_LEFT ? "left" : "stale", age);
    return 0;
}

int pr_liveness(presence *pr, const char *peer, char *why, size_t n)
{
    char host[NAME_MAX_LEN + 1], words[80];
    pr_agent_info a;
    int r;

    if (name_valid(peer)) {
        r = lead_liveness(pr, peer, words, sizeof words);
        if (r == 0)
            snprintf(why, n, "peer not live (%s)", words);
        return r;
    }
    if (!gid_valid(peer) || !id_host(peer, host))
        return -1; /* a group, or nothing: no one host to ask */
    r = lead_liveness(pr, host, words, sizeof words);
    if (r == 0)
        snprintf(why, n, "peer not live (its host %s: %s)", host, words);
    if (r == 1 && !pr_agent_get(pr, peer, &a)) {
        snprintf(why, n, "peer not live (its host %s does not list it)", host);
        r = 0;
    }
    return r;
}

bool pr_link_connecting(presence *pr)
{
    bool connecting;
    g_mutex_lock(&pr->lock);
    connecting = !pr->link_up && !pr->link_tried;
    g_mutex_unlock(&pr->lock);
    return connecting;
}

bool pr_link_up(presence *pr)
{
    bool up;
    g_mutex_lock(&pr->lock);
    up = pr->link_up;
    g_mutex_unlock(&pr->lock);
    return up;
}

uint64_t pr_rejected(presence *pr)
{
    uint64_t n;
    g_mutex_lock(&pr->lock);
    n = pr->rejected;
    g_mutex_unlock(&pr->lock);
    return n;
}

void pr_link_words(presence *pr, char *out, size_t n)
{
    char groups[64] = "";
    g_mutex_lock(&pr->lock);
    if (pr_scoped(pr))
        snprintf(groups, sizeof groups, ", to our groups every %lld ms",
                 (long long)pr->group_iv_ms);
    snprintf(out, n, "%s (heartbeat every %lld ms%s, stale after 3; discovery %s)",
             pr->link_up      ? "connected"
             : pr->link_tried ? "roster connection down"
                              : "roster connecting",
             (long long)pr->interval_ms, groups, pr->o->discovery ? "on" : "off");
    g_mutex_unlock(&pr->lock);
}
