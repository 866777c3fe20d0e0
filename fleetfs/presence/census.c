/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/census.c — hearing the whole fleet though scoped: the
 * fleet_view=auto rule and the census (doc/presence.md "Whom a host
 * hears", doc/scaling.md "Fourth pass").
 *
 * fleet_view=auto (the default) starts wide: its roster queue is bound to
 * roster.# besides the scoped bindings, so it hears every lead, as
 * fleet_view=all does.  Once it hears more than view_limit leads live
 * (itself not counted) it narrows for the life of the mount: roster.# is
 * unbound and it hears what fleet_view=groups hears.  The broker's work
 * is then linear in the fleet; a lead out of view is still found by name
 * (face/paths.c), and the whole fleet by a census.
 *
 * A census (a write to the census file) hears the whole fleet for one
 * interval and two seconds: roster.# is bound for that window; a lead
 * heard then that is not in view is kept apart (pr->census_only: its line),
 * never listed, logged or announced; at the end the face snapshots the
 * roster and these lines into the census file, and they are dropped.  At
 * most one census starts per census_every.  Where we hear the whole fleet
 * already (fleet_view=all, auto not narrowed) a census is the roster now,
 * at no cost to the broker, and not rate-bounded.  A census in auto that
 * finds at most view_limit leads widens again.
 */
#include "fleetfs/presence/pr_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

#define PR_CENSUS_SLACK_MS 2000 /* past one interval: a heartbeat late by this much still counts */

bool pr_wide(presence *pr)
{
    bool w;
    g_mutex_lock(&pr->lock);
    w = !pri_narrow_locked(pr);
    g_mutex_unlock(&pr->lock);
    return w;
}

static void wall_now(char *out, size_t n)
{
    GDateTime *t = g_date_time_new_now_utc();
    char *s = g_date_time_format(t, "%Y-%m-%dT%H:%M:%SZ");
    g_strlcpy(out, s, n);
    g_free(s);
    g_date_time_unref(t);
}

bool pri_auto_narrow_locked(presence *pr, int64_t now)
{
    unsigned n;
    if (!pr->o->fleet_view_auto || pr->narrowed || pr->census_on || pr->whole)
        return false;
    n = pri_live_heard_locked(pr, now);
    if (n <= pr->o->view_limit)
        return false;
    pr->narrowed = true;
    pr->narrowed_heard = n;
    wall_now(pr->narrowed_at, sizeof pr->narrowed_at);
    return true;
}

/* A census-only lead's line, shaped as a roster line (face/status.c):
 * what its heartbeat said; neither configured nor in peers/. */
static char *census_line(const env_heartbeat *h)
{
    json_t *j = json_object(), *groups = json_null(), *agents = json_null();
    char *line;

    if (h->ext) {
        groups = json_array();
        json_array_append_new(groups, json_string(GROUP_ALL));
        for (size_t i = 0; i < h->n_groups; i++)
            json_array_append_new(groups, json_string(h->groups[i]));
        agents = json_array();
        for (size_t i = 0; i < h->n_agents; i++) {
            const env_hb_agent *a = &h->agents[i];
            json_t *aj = json_object(), *ag = json_array();
            const char *at = strchr(a->gid, '@');
            json_array_append_new(ag, json_string(GROUP_ALL));
            for (size_t k = 0; k < a->n_groups; k++)
                json_array_append_new(ag, json_string(a->groups[k]));
            json_object_set_new(aj, "gid", json_string(a->gid));
            json_object_set_new(aj, "name",
                                json_stringn(a->gid, at ? (size_t)(at - a->gid) : strlen(a->gid)));
            json_object_set_new(aj, "local", json_false());
            json_object_set_new(aj, "announced", json_true());
            json_object_set_new(aj, "state", json_string(a->state));
            json_object_set_new(aj, "groups", ag);
            json_array_append_new(agents, aj);
        }
    }
    json_object_set_new(j, "coord_id", json_string(h->from));
    json_object_set_new(j, "self", json_false());
    json_object_set_new(j, "configured", json_false());
    json_object_set_new(j, "inPeers", json_false());
    json_object_set_new(j, "host", json_string(h->host));
    json_object_set_new(j, "version", json_string(h->version));
    json_object_set_new(j, "presence", json_string(h->leaving ? "left" : "live"));
    json_object_set_new(j, "lastHeartbeat", json_string(h->sentAt));
    json_object_set_new(j, "ageSeconds", json_integer(0));
    json_object_set_new(j, "startedAt", json_string(h->startedAt));
    json_object_set_new(j, "messages", json_null());
    json_object_set_new(j, "consumers", json_null());
    json_object_set_new(j, "agent", json_string(h->agent));
    json_object_set_new(j, "groups", groups);
    json_object_set_new(j, "agents", agents);
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return line;
}

bool pri_census_take_locked(presence *pr, const env_heartbeat *h)
{
    char *line;
    if (!pr->census_on || !pri_narrow_base_locked(pr) || g_hash_table_contains(pr->leads, h->from))
        return false;
    if (pri_hb_shares_locked(pr, h))
        return false; /* in view: taken as any heartbeat */
    line = census_line(h);
    if (line) {
        g_hash_table_replace(pr->census_only, g_strdup(h->from), g_strdup(line));
        free(line);
    }
    return true;
}

static void fmt_every(int64_t ms, char *out, size_t n)
{
    if (ms % 1000 == 0)
        snprintf(out, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(out, n, "%lldms", (long long)ms);
}

int pr_census_begin(presence *pr, int64_t *window_ms)
{
    int64_t now = pri_mono_ms(), since;
    char every[32];
    int rc;

    *window_ms = 0;
    g_mutex_lock(&pr->lock);
    if (pr->census_on) {
        rc = 2;
    } else if (!pri_narrow_base_locked(pr)) {
        rc = 1; /* we hear the whole fleet already */
    } else if (pr->census_start && (since = now - pr->census_start) < pr->o->census_every_ms) {
        fmt_every(pr->o->census_every_ms, every, sizeof every);
        log_warn("presence: census refused: the last one started %llds ago and census_every=%s; "
                 "the next may start in %llds (its result is in the census file now)",
                 (long long)(since / 1000), every,
                 (long long)((pr->o->census_every_ms - since + 999) / 1000));
        rc = -EAGAIN;
    } else {
        pr->census_on = true;
        pr->census_start = now;
        g_hash_table_remove_all(pr->census_only);
        *window_ms =
            (pr->interval_ms > 0 ? pr->interval_ms : pr->o->heartbeat_ms) + PR_CENSUS_SLACK_MS;
        log_info("presence: census started: hearing the whole fleet (roster.#) for %lld ms, "
                 "one heartbeat interval and %d s",
                 (long long)*window_ms, PR_CENSUS_SLACK_MS / 1000);
        rc = 0;
    }
    g_mutex_unlock(&pr->lock);
    if (rc == 0 && pr->hooks.hear)
        pr->hooks.hear(pr->hooks.ud, NULL); /* bind roster.# now */
    return rc;
}

bool pr_census_running(presence *pr)
{
    bool on;
    g_mutex_lock(&pr->lock);
    on = pr->census_on;
    g_mutex_unlock(&pr->lock);
    return on;
}

void pr_census_end(presence *pr, const char *roster)
{
    GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
    GString *out = g_string_new(NULL);
    GHashTableIter it;
    gpointer v;
    gchar **rl = g_strsplit(roster ? roster : "", "\n", -1);
    unsigned heard = 0, limit = pr->o->view_limit;
    bool was_on, widened = false, narrowed = false;
    int64_t now = pri_mono_ms();

    for (gchar **p = rl; *p; p++)
        if (**p)
            g_ptr_array_add(lines, g_strdup(*p));
    g_strfreev(rl);
    g_mutex_lock(&pr->lock);
    was_on = pr->census_on;
    g_hash_table_iter_init(&it, pr->census_only);
    while (g_hash_table_iter_next(&it, NULL, &v))
        g_ptr_array_add(lines, g_strdup(v));
    heard = pri_live_heard_locked(pr, now) + g_hash_table_size(pr->census_only);
    g_hash_table_remove_all(pr->census_only);
    if (was_on) {
        pr->census_on = false;
        if (pr->o->fleet_view_auto && pr->narrowed && heard <= limit) {
            pr->narrowed = false; /* the fleet is small again: hear it all */
            widened = true;
        } else if (pri_narrow_base_locked(pr)) {
            narrowed = true;
        }
    }
    pr->census_heard = heard;
    wall_now(pr->census_at, sizeof pr->census_at);
    g_mutex_unlock(&pr->lock);
    /* by the text, which starts {"coord_id":"<id>" */
    g_ptr_array_sort(lines, pri_cmp_str_ptr);
    for (guint i = 0; i < lines->len; i++)
        g_string_append_printf(out, "%s\n", (char *)lines->pdata[i]);
    g_ptr_array_unref(lines);
    g_mutex_lock(&pr->lock);
    g_free(pr->census_text);
    pr->census_text = g_string_free(out, FALSE);
    g_mutex_unlock(&pr->lock);
    if (was_on) {
        log_info("presence: census done: %u lead(s) heard besides this one (the census file); "
                 "%s",
                 heard,
                 widened    ? "at most view_limit, so fleet_view=auto hears the whole fleet again"
                 : narrowed ? "back to hearing only our groups, configured peers and addressed "
                              "leads"
                            : "hearing the whole fleet as before");
        if (pr->hooks.hear)
            pr->hooks.hear(pr->hooks.ud, NULL); /* unbind roster.# when narrow */
    }
    if (pr->hooks.changed)
        pr->hooks.changed(pr->hooks.ud, "census");
}

void pr_whole_fleet(presence *pr)
{
    g_mutex_lock(&pr->lock);
    pr->whole = true;
    pr->narrowed = false;
    g_mutex_unlock(&pr->lock);
}

char *pr_census_text(presence *pr)
{
    char *t;
    g_mutex_lock(&pr->lock);
    t = g_strdup(pr->census_text ? pr->census_text : "");
    g_mutex_unlock(&pr->lock);
    return t;
}

void pr_census_words(presence *pr, char *out, size_t n)
{
    g_mutex_lock(&pr->lock);
    if (pr->census_on)
        snprintf(out, n, "running (started %llds ago)",
                 (long long)((pri_mono_ms() - pr->census_start) / 1000));
    else if (pr->census_at[0])
        snprintf(out, n, "%s: %u lead(s) heard besides this one", pr->census_at, pr->census_heard);
    else
        snprintf(out, n, "none yet (write to census to take one)");
    g_mutex_unlock(&pr->lock);
}
