/* SPDX-License-Identifier: Apache-2.0 */
/* broker/rosterbind.c — whom the roster queue binds (design in roster.h):
 * the bindings wanted now (roster.#, or scoped: our ask key, our self word
 * or our groups, the leads ro_hear names, roster.# besides while wide) and
 * their sync with the broker (a refused scoped binding turns us to
 * roster.# for the mount: the fallback); what other threads say of whom to
 * hear (ro_hear, ro_wide) and the wake-up that tells the roster thread.
 * The thread itself, its connection and its heartbeats: roster.c, which
 * calls this file and is called by none of it (roster_int.h).
 */
#include "broker/roster.h"
#include "broker/roster_int.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/sideconn.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

gint rob_cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* After a refused synchronous call on the roster channel: when the broker
 * closed the channel (not the connection), answer close-ok and reopen it
 * (BROKER-FACTS.md), and return its reply code; 0 for anything else. */
int rob_channel_refused(ro_conn *r)
{
    int code = sc_channel_refused(r->amqp, RO_CH);
    if (!code || !amqp_channel_open(r->amqp, RO_CH))
        return 0;
    return code;
}

bool rob_scoped(ro_conn *r)
{
    return r->cfg.scoped && !r->fallback;
}

/* The bindings our queue should have now: roster.#, or (scoped) our ask key, our groups, the
 * leads ro_hear named, and our own key while in no group (in one, our group heartbeats come
 * back through the group's binding; doc/scaling.md "Third pass"). */
static GHashTable *wanted_bindings(ro_conn *r)
{
    GHashTable *w = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char k[300];

    if (!rob_scoped(r)) {
        g_hash_table_add(w, g_strdup(TOPO_ROSTER_BINDING));
        return w;
    }
    topo_roster_ask_key(r->cfg.coord_id, k, sizeof k);
    g_hash_table_add(w, g_strdup(k));
    g_mutex_lock(&r->lock);
    if (r->want_wide) /* roster.# hears what the group and lead keys would */
        g_hash_table_add(w, g_strdup(TOPO_ROSTER_BINDING));
    /* in no group: our self word, which one beat in self_every carries
     * (roster.# hears them all while wide) */
    if (!r->want_groups || !r->want_groups[0]) {
        if (!r->self_mode)
            r->self_n = 0; /* the next beat proves the round trip */
        r->self_mode = true;
        topo_roster_bind_self(r->cfg.coord_id, k, sizeof k);
        g_hash_table_add(w, g_strdup(k));
    } else {
        r->self_mode = false;
    }
    for (char **g = r->want_groups; !r->want_wide && g && *g; g++) {
        topo_roster_bind_group(*g, k, sizeof k);
        g_hash_table_add(w, g_strdup(k));
    }
    for (char **l = r->want_leads; !r->want_wide && l && *l; l++) {
        topo_roster_bind_lead(*l, k, sizeof k);
        g_hash_table_add(w, g_strdup(k));
    }
    g_mutex_unlock(&r->lock);
    return w;
}

static void set_bindings_count(ro_conn *r)
{
    g_mutex_lock(&r->lock);
    r->st.bindings = g_hash_table_size(r->bound);
    r->st.fallback = r->fallback;
    g_mutex_unlock(&r->lock);
}

/* Bind what is wanted and not bound, unbind what is bound and no longer
 * wanted.  A refused scoped binding (403: a per-host login whose topic
 * permissions predate fleet_view=groups) turns us to roster.# for the
 * life of this mount, said once; the caller then starts over. */
int rob_sync(ro_conn *r, char *why, size_t n)
{
    GHashTable *w = wanted_bindings(r);
    GHashTableIter it;
    gpointer k;
    GPtrArray *extra = g_ptr_array_new_with_free_func(g_free);
    amqp_bytes_t q = amqp_cstring_bytes(r->qname);
    int rc = 0;

    g_hash_table_iter_init(&it, w);
    while (rc == 0 && g_hash_table_iter_next(&it, &k, NULL)) {
        if (g_hash_table_contains(r->bound, k))
            continue;
        if (!amqp_queue_bind(r->amqp, RO_CH, q, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                             amqp_cstring_bytes(k), amqp_empty_table)) {
            char what[400];
            snprintf(what, sizeof what, "cannot bind the roster queue with %s", (char *)k);
            sc_rpc_words(r->amqp, what, why, n);
            if (rob_scoped(r) && rob_channel_refused(r) == 403) {
                r->fallback = true;
                log_warn("presence: the broker refused the fleet_view=groups binding %s (403: "
                         "this login's topic permissions on " TOPO_ROSTER_EXCHANGE " predate "
                         "it; an operator renews them with scripts/broker host update); hearing "
                         "the whole fleet (roster.#) instead, as fleet_view=all does, for the "
                         "life of this mount (fleet_view=auto cannot narrow)",
                         (char *)k);
            }
            rc = -1;
            break;
        }
        g_hash_table_add(r->bound, g_strdup(k));
    }
    g_hash_table_iter_init(&it, r->bound);
    while (rc == 0 && g_hash_table_iter_next(&it, &k, NULL))
        if (!g_hash_table_contains(w, k))
            g_ptr_array_add(extra, g_strdup(k));
    for (guint i = 0; rc == 0 && i < extra->len; i++) {
        const char *key = extra->pdata[i];
        if (!amqp_queue_unbind(r->amqp, RO_CH, q, amqp_cstring_bytes(TOPO_ROSTER_EXCHANGE),
                               amqp_cstring_bytes(key), amqp_empty_table)) {
            sc_rpc_words(r->amqp, "cannot unbind the roster queue", why, n);
            rc = -1;
            break;
        }
        g_hash_table_remove(r->bound, key);
    }
    g_ptr_array_unref(extra);
    g_hash_table_destroy(w);
    set_bindings_count(r);
    return rc;
}

void rob_wake(ro_conn *r)
{
    if (os_wake_fire(&r->wake) < 0 && errno != EAGAIN)
        log_warn("presence: cannot wake the roster thread: %s", strerror(errno));
}

static char **sorted_copy(const char *const *v, const char *skip)
{
    GPtrArray *out = g_ptr_array_new();
    for (; v && *v; v++)
        if ((!skip || strcmp(*v, skip) != 0) &&
            !g_ptr_array_find_with_equal_func(out, *v, g_str_equal, NULL))
            g_ptr_array_add(out, g_strdup(*v));
    g_ptr_array_sort(out, (GCompareFunc)rob_cmp_str);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

void ro_hear(ro_conn *r, const char *const *groups, const char *const *leads)
{
    char **g, **l;
    bool same;
    if (!r)
        return;
    g = sorted_copy(groups, "all");
    l = sorted_copy(leads, r->cfg.coord_id);
    g_mutex_lock(&r->lock);
    same = g_strv_equal((const char *const *)g, (const char *const *)r->want_groups) &&
           g_strv_equal((const char *const *)l, (const char *const *)r->want_leads);
    if (!same) {
        g_strfreev(r->want_groups);
        g_strfreev(r->want_leads);
        r->want_groups = g;
        r->want_leads = l;
        r->want_dirty = true;
    }
    g_mutex_unlock(&r->lock);
    if (same) {
        g_strfreev(g);
        g_strfreev(l);
        return;
    }
    rob_wake(r);
}

void ro_wide(ro_conn *r, bool wide)
{
    if (!r || !r->cfg.scoped)
        return;
    g_mutex_lock(&r->lock);
    if (r->want_wide != wide) {
        r->want_wide = wide;
        r->want_dirty = true;
    }
    g_mutex_unlock(&r->lock);
    rob_wake(r);
}
