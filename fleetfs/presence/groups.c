/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/groups.c — agents and groups (SPEC section 10) and hosts (section 11) as
 * presence sees them: the local set our heartbeat carries, every agent and
 * group heard, and the snapshot diff that tells watchers what changed.
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
/* agents and groups (SPEC section 10)                                 */

/* in's valid groups (sorted, each once), logging the others; *ok false
 * when one was left out. Never NULL. */
char **pri_groups_clean(const char *const *in, const char *who, bool *ok)
{
    GPtrArray *out = g_ptr_array_new();
    for (size_t i = 0; in && in[i]; i++) {
        bool dup = false;
        for (guint j = 0; j < out->len; j++)
            dup = dup || strcmp(out->pdata[j], in[i]) == 0;
        if (group_valid(in[i]) && strcmp(in[i], GROUP_ALL) != 0 && !dup &&
            out->len < ENV_HB_MAX_GROUPS) {
            g_ptr_array_add(out, g_strdup(in[i]));
            continue;
        }
        if (!dup) {
            char *q = g_strescape(in[i], NULL);
            log_warn("presence: group '%s' of %s left out of heartbeats (not a group name, "
                     "'all', or more than %d)",
                     q, who, ENV_HB_MAX_GROUPS);
            g_free(q);
            *ok = false;
        }
    }
    g_ptr_array_sort(out, pri_cmp_str_ptr);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

/* The local set in one string: equal strings, equal sets. */
static char *local_key_of(char **groups, GPtrArray *agents)
{
    GString *k = g_string_new(NULL);
    char *g = g_strjoinv(",", groups);
    g_string_append_printf(k, "%s\n", g);
    g_free(g);
    for (guint i = 0; i < agents->len; i++) {
        pr_agent *a = agents->pdata[i];
        g = g_strjoinv(",", a->groups);
        g_string_append_printf(k, "%s\x1f%s\x1f%s\n", a->gid, a->state, g);
        g_free(g);
    }
    return g_string_free(k, FALSE);
}

bool pr_set_local(presence *pr, const char *const *lead_groups, const pr_local_agent *agents,
                  size_t n)
{
    GPtrArray *na = g_ptr_array_new_with_free_func(pri_agent_free);
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    char host[NAME_MAX_LEN + 1], *key, **lg;
    bool ok = true;

    lg = pri_groups_clean(lead_groups, "the lead", &ok);
    for (size_t i = 0; i < n; i++) {
        const char *gid = agents[i].gid ? agents[i].gid : "";
        bool dup = false;
        pr_agent *a;
        for (guint j = 0; j < na->len; j++)
            dup = dup || strcmp(((pr_agent *)na->pdata[j])->gid, gid) == 0;
        if (!id_host(gid, host) || strcmp(host, pr->o->coord_id) != 0 || !gid_valid(gid) || dup) {
            char *q = g_strescape(gid, NULL);
            log_warn("presence: local agent '%s' left out of heartbeats: %s", q,
                     dup ? "listed twice" : "not an agent id <name>@<this coord_id>");
            g_free(q);
            ok = false;
            continue;
        }
        a = g_new0(pr_agent, 1);
        g_strlcpy(a->gid, gid, sizeof a->gid);
        pri_plain_copy(a->state, sizeof a->state, agents[i].state ? agents[i].state : "starting");
        a->groups = pri_groups_clean(agents[i].groups, gid, &ok);
        g_ptr_array_add(na, a);
    }
    g_ptr_array_sort(na, pri_cmp_agent);
    key = local_key_of(lg, na);
    g_mutex_lock(&pr->lock);
    if (!pr->local_key || strcmp(pr->local_key, key) != 0)
        pr->local_gen++;
    g_free(pr->local_key);
    pr->local_key = key;
    g_strfreev(pr->local_groups);
    pr->local_groups = lg;
    g_ptr_array_unref(pr->local_agents);
    pr->local_agents = na;
    pri_snap_diff_locked(pr, notes, pri_mono_ms());
    g_mutex_unlock(&pr->lock);
    pri_deliver_notes(pr, notes);
    return ok;
}

/* malloc'd copies (env_hb_free frees them) */
static char **strv_malloc(char **v, size_t *n)
{
    size_t k = v ? g_strv_length(v) : 0;
    char **out = calloc(k + 1, sizeof(char *));
    if (!out)
        abort();
    for (size_t i = 0; i < k; i++)
        if (!(out[i] = strdup(v[i])))
            abort();
    *n = k;
    return out;
}

void pri_local_to_hb_locked(presence *pr, env_heartbeat *h)
{
    guint n = pr->local_agents->len;

    h->ext = true;
    h->groups = strv_malloc(pr->local_groups, &h->n_groups);
    h->agents = calloc(n ? n : 1, sizeof(env_hb_agent));
    if (!h->agents)
        abort();
    h->n_agents = n;
    for (guint i = 0; i < n; i++) {
        pr_agent *a = pr->local_agents->pdata[i];
        g_strlcpy(h->agents[i].gid, a->gid, sizeof h->agents[i].gid);
        g_strlcpy(h->agents[i].state, a->state, sizeof h->agents[i].state);
        h->agents[i].groups = strv_malloc(a->groups, &h->agents[i].n_groups);
    }
}

/* Calls fn for every agent known: local ones (their host is our own lead
 * entry), then those of the other leads; not those of a lead unheard for
 * agent_expires: the broker has collected their mailboxes by then, or
 * will at once (doc/protocol.md, "Collecting agent mailboxes"). */
typedef void (*agent_fn)(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                         int64_t now, void *ud);

static void each_agent_locked(presence *pr, int64_t now, agent_fn fn, void *ud)
{
    pr_lead *self = g_hash_table_lookup(pr->leads, pr->o->coord_id);
    GHashTableIter it;
    gpointer v;

    for (guint i = 0; i < pr->local_agents->len; i++)
        fn(pr, pr->local_agents->pdata[i], self, true, now, ud);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *l = v;
        if (pr->o->agent_expires_ms > 0 && l->heard &&
            now - l->heard_mono >= pr->o->agent_expires_ms)
            continue;
        for (guint i = 0; !l->self && l->agents && i < l->agents->len; i++)
            fn(pr, l->agents->pdata[i], l, false, now, ud);
    }
}

/* group -> GPtrArray of member ids (unsorted) */
static void add_member(GHashTable *groups, const char *g, const char *id)
{
    GPtrArray *m = g_hash_table_lookup(groups, g);
    if (!m) {
        m = g_ptr_array_new_with_free_func(g_free);
        g_hash_table_insert(groups, g_strdup(g), m);
    }
    g_ptr_array_add(m, g_strdup(id));
}

static void member_agent(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                         int64_t now, void *ud)
{
    (void)pr;
    (void)host;
    (void)local;
    (void)now;
    add_member(ud, GROUP_ALL, a->gid);
    for (size_t i = 0; a->groups && a->groups[i]; i++)
        add_member(ud, a->groups[i], a->gid);
}

/* Every group and its members, sorted. */
static GHashTable *groups_locked(presence *pr, int64_t now)
{
    GHashTable *g =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    GHashTableIter it;
    gpointer k, v;

    add_member(g, GROUP_ALL, pr->o->coord_id);
    for (size_t i = 0; pr->local_groups[i]; i++)
        add_member(g, pr->local_groups[i], pr->o->coord_id);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *l = v;
        if (l->self || !l->ext)
            continue;
        add_member(g, GROUP_ALL, l->id);
        for (size_t i = 0; l->groups && l->groups[i]; i++)
            add_member(g, l->groups[i], l->id);
    }
    each_agent_locked(pr, now, member_agent, g);
    g_hash_table_iter_init(&it, g);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_ptr_array_sort(v, pri_cmp_str_ptr);
    return g;
}

static void snap_agent(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                       int64_t now, void *ud)
{
    char *groups = g_strjoinv(",", a->groups);
    (void)local;
    g_hash_table_insert(ud, g_strdup(a->gid),
                        g_strdup_printf("%s\x1f%s\x1f%d", a->state, groups,
                                        host ? (int)pri_state_of(pr, host, now) : (int)PR_NEVER));
    g_free(groups);
}

/* Compares what watchers of agents/ and groups/ would see now with what
 * they saw, notes the differences, and keeps the new picture. */
void pri_snap_diff_locked(presence *pr, GArray *notes, int64_t now)
{
    GHashTable *na = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTable *ng = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTable *groups = groups_locked(pr, now);
    GHashTableIter it;
    gpointer k, v;
    char path[200];
    bool any = false;

    each_agent_locked(pr, now, snap_agent, na);
    g_hash_table_iter_init(&it, groups);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        GPtrArray *m = v;
        g_ptr_array_add(m, NULL);
        g_hash_table_insert(ng, g_strdup(k), g_strjoinv("\n", (char **)m->pdata));
        g_ptr_array_remove_index(m, m->len - 1);
    }
    g_hash_table_destroy(groups);
    g_hash_table_iter_init(&it, pr->snap_agents);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!g_hash_table_contains(na, k)) {
            pri_note(notes, 2, "agents", k);
            any = true;
        }
    g_hash_table_iter_init(&it, na);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const char *was = g_hash_table_lookup(pr->snap_agents, k);
        if (!was)
            pri_note(notes, 1, "agents", k);
        else if (strcmp(was, v) != 0) {
            snprintf(path, sizeof path, "agents/%s/status", (char *)k);
            pri_note(notes, 0, path, NULL);
        }
        any = any || !was || strcmp(was, v) != 0;
    }
    g_hash_table_iter_init(&it, pr->snap_groups);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!g_hash_table_contains(ng, k)) {
            pri_note(notes, 2, "groups", k);
            any = true;
        }
    g_hash_table_iter_init(&it, ng);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const char *was = g_hash_table_lookup(pr->snap_groups, k);
        if (!was && strcmp(k, GROUP_ALL) != 0)
            pri_note(notes, 1, "groups", k);
        if (was && strcmp(was, v) != 0) {
            snprintf(path, sizeof path, "groups/%s/members", (char *)k);
            pri_note(notes, 0, path, NULL);
        }
        any = any || !was || strcmp(was, v) != 0;
    }
    if (any)
        pri_note(notes, 0, "roster", NULL);
    g_hash_table_destroy(pr->snap_agents);
    g_hash_table_destroy(pr->snap_groups);
    pr->snap_agents = na;
    pr->snap_groups = ng;
}

/* ---- reading ---- */

static void info_of_agent(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                          int64_t now, pr_agent_info *out)
{
    const char *at = strchr(a->gid, '@');
    memset(out, 0, sizeof *out);
    g_strlcpy(out->gid, a->gid, sizeof out->gid);
    g_strlcpy(out->name, a->gid, MIN(sizeof out->name, (size_t)(at - a->gid) + 1));
    g_strlcpy(out->host, at + 1, sizeof out->host);
    out->local = local;
    g_strlcpy(out->state, a->state, sizeof out->state);
    for (size_t i = 0; a->groups && a->groups[i] && i < ENV_HB_MAX_GROUPS; i++)
        g_strlcpy(out->groups[out->n_groups++], a->groups[i], sizeof out->groups[0]);
    out->presence = host ? pri_state_of(pr, host, now) : PR_NEVER;
    out->age_ms = host && host->heard ? now - host->heard_mono : -1;
}

static void list_agent(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                       int64_t now, void *ud)
{
    pr_agent_info *i = g_new(pr_agent_info, 1);
    info_of_agent(pr, a, host, local, now, i);
    g_ptr_array_add(ud, i);
}

static gint cmp_agent_info(gconstpointer a, gconstpointer b)
{
    return strcmp((*(pr_agent_info *const *)a)->gid, (*(pr_agent_info *const *)b)->gid);
}

GPtrArray *pr_agents(presence *pr)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&pr->lock);
    each_agent_locked(pr, pri_mono_ms(), list_agent, out);
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, cmp_agent_info);
    return out;
}

typedef struct {
    const char *gid;
    pr_agent_info *out;
    bool found;
} agent_query;

static void find_agent(presence *pr, const pr_agent *a, const pr_lead *host, bool local,
                       int64_t now, void *ud)
{
    agent_query *q = ud;
    if (!q->found && strcmp(a->gid, q->gid) == 0) {
        info_of_agent(pr, a, host, local, now, q->out);
        q->found = true;
    }
}

bool pr_agent_get(presence *pr, const char *gid, pr_agent_info *out)
{
    agent_query q = {gid, out, false};
    if (!gid_valid(gid))
        return false;
    g_mutex_lock(&pr->lock);
    each_agent_locked(pr, pri_mono_ms(), find_agent, &q);
    g_mutex_unlock(&pr->lock);
    return q.found;
}

void pr_agent_words(const pr_agent_info *a, char *out, size_t n)
{
    pr_info i;
    memset(&i, 0, sizeof i);
    i.state = a->presence;
    i.age_ms = a->age_ms;
    pr_words(&i, out, n);
}

char **pr_groups(presence *pr)
{
    GHashTable *g;
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;

    g_mutex_lock(&pr->lock);
    g = groups_locked(pr, pri_mono_ms());
    g_mutex_unlock(&pr->lock);
    g_hash_table_iter_init(&it, g);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, g_strdup(k));
    g_hash_table_destroy(g);
    g_ptr_array_sort(out, pri_cmp_str_ptr);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

char **pr_group_members(presence *pr, const char *g)
{
    GHashTable *all;
    GPtrArray *m, *out = NULL;

    if (!group_valid(g))
        return NULL;
    g_mutex_lock(&pr->lock);
    all = groups_locked(pr, pri_mono_ms());
    g_mutex_unlock(&pr->lock);
    m = g_hash_table_lookup(all, g);
    if (m) {
        out = g_ptr_array_new();
        for (guint i = 0; i < m->len; i++)
            g_ptr_array_add(out, g_strdup(m->pdata[i]));
        g_ptr_array_add(out, NULL);
    }
    g_hash_table_destroy(all);
    return out ? (char **)g_ptr_array_free(out, FALSE) : NULL;
}

char **pr_lead_groups(presence *pr, const char *id)
{
    pr_lead *l;
    char **out = NULL;

    g_mutex_lock(&pr->lock);
    l = id ? g_hash_table_lookup(pr->leads, id) : NULL;
    if (l && l->self)
        out = g_strdupv(pr->local_groups);
    else if (l && l->ext)
        out = l->groups ? g_strdupv(l->groups) : g_new0(char *, 1);
    g_mutex_unlock(&pr->lock);
    return out;
}

uint64_t pr_rejected_agents(presence *pr)
{
    uint64_t n;
    g_mutex_lock(&pr->lock);
    n = pr->rejected_agents;
    g_mutex_unlock(&pr->lock);
    return n;
}

/* ---- hosts (SPEC section 11) ---- */

char **pr_hosts(presence *pr)
{
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;
    g_mutex_lock(&pr->lock);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, g_strdup(k));
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, pri_cmp_str_ptr);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

bool pr_is_host(presence *pr, const char *id)
{
    bool known;
    g_mutex_lock(&pr->lock);
    known = g_hash_table_contains(pr->leads, id);
    g_mutex_unlock(&pr->lock);
    return known;
}

char **pr_host_profiles(presence *pr, const char *id)
{
    char **out = NULL;
    pr_lead *l;
    if (!strcmp(id, pr->o->coord_id)) {
        out = g_new0(char *, pr->o->profiles.n + 1);
        for (size_t i = 0; i < pr->o->profiles.n; i++)
            out[i] = g_strdup(pr->o->profiles.v[i].name);
        return pri_sorted_copy_free(out);
    }
    g_mutex_lock(&pr->lock);
    l = g_hash_table_lookup(pr->leads, id);
    if (l && l->profiles)
        out = g_strdupv(l->profiles);
    g_mutex_unlock(&pr->lock);
    return out;
}
