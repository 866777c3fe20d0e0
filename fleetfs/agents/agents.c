/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/agents/agents.c — this host's agents and the fleet's groups (design in
 * agents.h).
 *
 * Box numbers: the lead's mailbox is box 0; each agent registered gets the
 * next number, never reused while the daemon runs (a retired agent's last
 * deliveries can still be on their way from the broker thread; a new
 * agent must not be mistaken for it).
 *
 * An agent's records (seen set, history, sent log, injection journal) live
 * in state_dir/agents/<name>/, so an agent registered again (mkdir after
 * rmdir, or the next start) finds what it had consumed and sent.
 *
 * What the heartbeat announces: an agent whose mailbox is known to be in
 * the broker, bound (durable queue, durable bindings), so that a sender
 * who sees it can reach it — once its box was bound and consumed on this
 * run, or from the start when it was served here before (its records
 * exist).  It is not withdrawn while the broker connection blips (its
 * mailbox stays and takes messages meanwhile), only when it is retired.
 */
#include "fleetfs/agents/agents.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

struct ag_registry {
    const fs_opts *o;
    mailbox *mb;       /* the lead's: the model, and through its seam the broker */
    presence *pr;      /* NULL: presence is off */
    injector **inj;    /* where the injector is once it runs (atomic; NULL: none) */
    GMutex lock;       /* registering and retiring: one step each */
    unsigned next_box; /* the last broker box given to an agent */
    GHashTable *ready; /* gids whose mailbox is known to be in the broker */
    GHashTable *early; /* gids registered before their sandboxed start (ag_prepare) */
};

ag_registry *ag_new(const fs_opts *o, mailbox *lead, presence *pr, injector **inj)
{
    ag_registry *ag = g_new0(ag_registry, 1);
    ag->o = o;
    ag->mb = lead;
    ag->pr = pr;
    ag->inj = inj;
    g_mutex_init(&ag->lock);
    ag->ready = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    ag->early = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return ag;
}

void ag_free(ag_registry *ag)
{
    if (!ag)
        return;
    g_hash_table_destroy(ag->ready);
    g_hash_table_destroy(ag->early);
    g_mutex_clear(&ag->lock);
    g_free(ag);
}

/* The keys an entity's mailbox is bound with on fleet.msg: an agent's own
 * gid (a lead's is reached through the default exchange), broadcast.all,
 * and broadcast.<g> for each of its groups. */
static char **bind_keys(const char *gid, const char *const *groups)
{
    GPtrArray *k = g_ptr_array_new();
    if (gid)
        g_ptr_array_add(k, g_strdup(gid));
    g_ptr_array_add(k, g_strdup("broadcast." GROUP_ALL));
    for (const char *const *g = groups; g && *g; g++)
        g_ptr_array_add(k, g_strdup_printf("broadcast.%s", *g));
    g_ptr_array_add(k, NULL);
    return (char **)g_ptr_array_free(k, FALSE);
}

char **ag_lead_keys(const fs_opts *o)
{
    return bind_keys(NULL, opts_agent_groups(o, NULL));
}

/* Lock held: one more local agent, its mailbox and broker box. */
static int add_locked(ag_registry *ag, const char *name, const char *const *groups,
                      const char *target, bool serve, char **err)
{
    char gid[ADDR_MAX_LEN + 1];
    char *dir = g_build_filename(ag->o->state_dir, "agents", name, NULL);
    unsigned box = ++ag->next_box;
    char **keys;
    /* served here before: its durable mailbox and bindings are there */
    bool before = g_file_test(dir, G_FILE_TEST_IS_DIR);
    mailbox *mb = mb_agent_new(ag->mb, name, dir, groups, box, err);
    g_free(dir);
    if (!mb)
        return -1;
    snprintf(gid, sizeof gid, "%s@%s", name, ag->o->coord_id);
    if (before)
        g_hash_table_add(ag->ready, g_strdup(gid));
    keys = bind_keys(gid, groups);
    if (mb_agent_serve(mb, (const char *const *)keys, err) < 0) {
        g_strfreev(keys);
        mb_agent_retire(mb);
        return -1;
    }
    g_strfreev(keys);
    if (serve)
        inj_add(g_atomic_pointer_get(ag->inj), mb, target);
    log_info("agents: %s registered (mailbox agent.%s.inbox, box %u)", gid, gid, box);
    return 0;
}

int ag_start(ag_registry *ag, char **err)
{
    int rc = 0;
    g_mutex_lock(&ag->lock);
    for (size_t i = 0; i < ag->o->n_agents && rc == 0; i++) {
        const fs_agent *a = &ag->o->agents[i];
        rc = add_locked(ag, a->name, opts_agent_groups(ag->o, a), a->target, false, err);
    }
    g_mutex_unlock(&ag->lock);
    return rc;
}

void ag_serve(ag_registry *ag)
{
    GPtrArray *all = mb_entities(ag->mb);
    for (guint i = 1; i < all->len; i++) {
        const fs_agent *a = opts_agent(ag->o, mb_name(all->pdata[i]));
        inj_add(g_atomic_pointer_get(ag->inj), all->pdata[i], a ? a->target : NULL);
    }
    g_ptr_array_free(all, TRUE);
    ag_announce(ag);
}

int ag_mkdir(ag_registry *ag, const char *gid)
{
    char host[NAME_MAX_LEN + 1], name[AGENT_NAME_MAX_LEN + 1], *err = NULL;
    mailbox *there;
    int rc;
    if (!gid_valid(gid)) {
        log_warn("agents: mkdir agents/%.100s refused: not <name>@<coord_id> with name "
                 "[a-z][a-z0-9_-]{0,31}",
                 gid);
        return EINVAL;
    }
    id_host(gid, host);
    if (strcmp(host, ag->o->coord_id) != 0) {
        log_warn("agents: mkdir agents/%s refused: it lives on %s, and only %s's agents can be "
                 "registered here",
                 gid, host, ag->o->coord_id);
        return EPERM;
    }
    g_strlcpy(name, gid, MIN(sizeof name, (size_t)(strchr(gid, '@') - gid + 1)));
    g_mutex_lock(&ag->lock);
    there = mb_find(ag->mb, gid);
    if (there) {
        mb_unref(there);
        g_mutex_unlock(&ag->lock);
        return EEXIST;
    }
    rc = add_locked(ag, name, opts_agent_groups(ag->o, opts_agent(ag->o, name)),
                    opts_agent(ag->o, name) ? opts_agent(ag->o, name)->target : NULL, true, &err);
    g_mutex_unlock(&ag->lock);
    if (rc < 0) {
        log_warn("agents: cannot register %s: %s", gid, err);
        g_free(err);
        return EIO;
    }
    ag_announce(ag);
    return 0;
}

int ag_rmdir(ag_registry *ag, const char *gid)
{
    mailbox *mb;
    fe_code r;
    char detail[300] = "";
    g_mutex_lock(&ag->lock);
    mb = gid_valid(gid) ? mb_find(ag->mb, gid) : NULL;
    if (!mb) {
        g_mutex_unlock(&ag->lock);
        return ag_heard(ag, gid) ? EPERM : ENOENT; /* another host's: not ours to retire */
    }
    /* only an empty mailbox goes: what waits in it is never thrown away */
    r = mb_agent_unserve(mb, true, detail, sizeof detail);
    if (r == FE_OK) {
        inj_remove(g_atomic_pointer_get(ag->inj), mb);
        g_hash_table_remove(ag->ready, gid);
        mb_agent_retire(mb);
    }
    mb_unref(mb);
    g_mutex_unlock(&ag->lock);
    if (r != FE_OK) {
        log_warn("agents: rmdir %s refused: %s (%s)%s%s", gid,
                 r == FE_NOT_EMPTY ? "messages wait in its mailbox: read and ack them first"
                                   : fe_hint(r),
                 fe_name(r), detail[0] ? ": " : "", detail);
        return r == FE_NOT_EMPTY ? ENOTEMPTY : fe_errno(r);
    }
    log_info("agents: %s retired; its mailbox is deleted (it was empty)", gid);
    ag_announce(ag);
    return 0;
}

int ag_spawned(ag_registry *ag, const char *name, const char *pane, char **err)
{
    char gid[ADDR_MAX_LEN + 1];
    mailbox *there;
    int rc;
    snprintf(gid, sizeof gid, "%s@%s", name, ag->o->coord_id);
    g_mutex_lock(&ag->lock);
    there = mb_find(ag->mb, gid);
    if (there && g_hash_table_remove(ag->early, gid)) {
        /* registered before its start (a sandbox binds its home): served now */
        inj_add(g_atomic_pointer_get(ag->inj), there, pane);
        mb_unref(there);
        g_mutex_unlock(&ag->lock);
        ag_announce(ag);
        return 0;
    }
    if (there) {
        mb_unref(there);
        g_mutex_unlock(&ag->lock);
        *err = g_strdup_printf("%s is registered already", gid);
        return -1;
    }
    rc = add_locked(ag, name, opts_agent_groups(ag->o, NULL), pane, true, err);
    g_mutex_unlock(&ag->lock);
    if (rc == 0)
        ag_announce(ag);
    return rc;
}

int ag_prepare(ag_registry *ag, const char *name, char **err)
{
    char gid[ADDR_MAX_LEN + 1];
    mailbox *there;
    int rc;
    snprintf(gid, sizeof gid, "%s@%s", name, ag->o->coord_id);
    g_mutex_lock(&ag->lock);
    there = mb_find(ag->mb, gid);
    if (there) {
        mb_unref(there);
        g_mutex_unlock(&ag->lock);
        *err = g_strdup_printf("%s is registered already", gid);
        return -1;
    }
    rc = add_locked(ag, name, opts_agent_groups(ag->o, NULL), NULL, false, err);
    if (rc == 0)
        g_hash_table_add(ag->early, g_strdup(gid));
    g_mutex_unlock(&ag->lock);
    return rc;
}

int ag_retire(ag_registry *ag, const char *gid, char *detail, size_t n)
{
    mailbox *mb;
    fe_code r;
    g_mutex_lock(&ag->lock);
    g_hash_table_remove(ag->early, gid);
    mb = mb_find(ag->mb, gid);
    if (!mb) {
        g_mutex_unlock(&ag->lock);
        snprintf(detail, n, "%s was not registered", gid);
        return 0;
    }
    inj_remove(g_atomic_pointer_get(ag->inj), mb);
    r = mb_agent_unserve(mb, true, detail, n);
    if (r == FE_NOT_EMPTY) /* what waits in it stays, unbound: nothing is thrown away */
        r = mb_agent_unserve(mb, false, detail, n);
    g_hash_table_remove(ag->ready, gid);
    mb_agent_retire(mb);
    mb_unref(mb);
    g_mutex_unlock(&ag->lock);
    ag_announce(ag);
    if (r != FE_OK)
        log_warn("agents: %s retired, but its broker box was not removed cleanly: %s (%s)", gid,
                 detail, fe_name(r));
    else
        log_info("agents: %s retired (%s)", gid, detail);
    return r == FE_OK ? 0 : -1;
}

bool ag_heard(const ag_registry *ag, const char *gid)
{
    pr_agent_info ai;
    return ag->pr && gid_valid(gid) && pr_agent_get(ag->pr, gid, &ai);
}

/* Adds to set every group of every local entity. */
static void local_groups(const ag_registry *ag, GHashTable *set)
{
    GPtrArray *all = mb_entities(ag->mb);
    for (guint i = 0; i < all->len; i++) {
        char **g = mb_groups(all->pdata[i]);
        for (char **p = g; p && *p; p++)
            g_hash_table_add(set, g_strdup(*p));
        g_strfreev(g);
    }
    g_ptr_array_free(all, TRUE);
}

static char **sorted_keys(GHashTable *set)
{
    GList *keys = g_list_sort(g_hash_table_get_keys(set), (GCompareFunc)strcmp);
    GPtrArray *out = g_ptr_array_new();
    for (GList *l = keys; l; l = l->next)
        g_ptr_array_add(out, g_strdup(l->data));
    g_ptr_array_add(out, NULL);
    g_list_free(keys);
    return (char **)g_ptr_array_free(out, FALSE);
}

char **ag_groups(const ag_registry *ag)
{
    GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char **heard = ag->pr ? pr_groups(ag->pr) : NULL, **out;
    g_hash_table_add(set, g_strdup(GROUP_ALL));
    local_groups(ag, set);
    for (char **p = heard; p && *p; p++)
        g_hash_table_add(set, g_strdup(*p));
    g_strfreev(heard);
    out = sorted_keys(set);
    g_hash_table_destroy(set);
    return out;
}

bool ag_group_known(const ag_registry *ag, const char *g)
{
    char **all = ag_groups(ag);
    bool known = g_strv_contains((const char *const *)all, g);
    g_strfreev(all);
    return known;
}

char **ag_list(const ag_registry *ag)
{
    GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GPtrArray *all = mb_entities(ag->mb), *heard = ag->pr ? pr_agents(ag->pr) : NULL;
    char **out;
    for (guint i = 1; i < all->len; i++)
        g_hash_table_add(set, g_strdup(mb_id(all->pdata[i])));
    for (guint i = 0; heard && i < heard->len; i++)
        g_hash_table_add(set, g_strdup(((pr_agent_info *)heard->pdata[i])->gid));
    out = sorted_keys(set);
    g_ptr_array_free(all, TRUE);
    if (heard)
        g_ptr_array_unref(heard);
    g_hash_table_destroy(set);
    return out;
}

char **ag_members(const ag_registry *ag, const char *g)
{
    GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GPtrArray *all = mb_entities(ag->mb);
    char **heard = ag->pr ? pr_group_members(ag->pr, g) : NULL, **out;
    for (guint i = 0; i < all->len; i++) {
        char **mine = mb_groups(all->pdata[i]);
        if (!strcmp(g, GROUP_ALL) || g_strv_contains((const char *const *)mine, g))
            g_hash_table_add(set, g_strdup(mb_id(all->pdata[i])));
        g_strfreev(mine);
    }
    for (char **p = heard; p && *p; p++)
        g_hash_table_add(set, g_strdup(*p));
    out = sorted_keys(set);
    g_strfreev(heard);
    g_ptr_array_free(all, TRUE);
    g_hash_table_destroy(set);
    return out;
}

GString *ag_members_text(const ag_registry *ag, const char *g)
{
    GString *s = g_string_new(NULL);
    char **m = ag_members(ag, g);
    for (char **p = m; p && *p; p++)
        g_string_append_printf(s, "%s\n", *p);
    g_strfreev(m);
    return s;
}

void ag_announce(ag_registry *ag)
{
    GPtrArray *all = mb_entities(ag->mb);
    GArray *local = g_array_new(FALSE, TRUE, sizeof(pr_local_agent));
    GPtrArray *keep = g_ptr_array_new(); /* words and groups, freed below */
    char **lead_groups = mb_groups(ag->mb);
    if (!ag->pr) {
        g_array_free(local, TRUE);
        g_ptr_array_free(keep, TRUE);
        g_strfreev(lead_groups);
        g_ptr_array_free(all, TRUE);
        return;
    }
    for (guint i = 1; i < all->len; i++) {
        mailbox *mb = all->pdata[i];
        char *words;
        /* announced once reachable (see the top of this file) */
        g_mutex_lock(&ag->lock);
        if (!g_hash_table_contains(ag->ready, mb_id(mb)) && mb_agent_served(mb))
            g_hash_table_add(ag->ready, g_strdup(mb_id(mb)));
        if (!g_hash_table_contains(ag->ready, mb_id(mb))) {
            g_mutex_unlock(&ag->lock);
            continue;
        }
        g_mutex_unlock(&ag->lock);
        words = mb_injector_words(mb);
        char **groups = mb_groups(mb);
        pr_local_agent a = {
            .gid = mb_id(mb), .state = words, .groups = (const char *const *)groups};
        g_ptr_array_add(keep, words);
        g_ptr_array_add(keep, groups);
        g_array_append_val(local, a);
    }
    pr_set_local(ag->pr, (const char *const *)lead_groups, (pr_local_agent *)local->data,
                 local->len);
    for (guint i = 0; i < keep->len; i += 2) {
        g_free(keep->pdata[i]);
        g_strfreev(keep->pdata[i + 1]);
    }
    g_ptr_array_free(keep, TRUE);
    g_array_free(local, TRUE);
    g_strfreev(lead_groups);
    g_ptr_array_free(all, TRUE); /* the gids lived in these mailboxes until here */
}
