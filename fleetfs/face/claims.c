/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/claims.c — claims/ (design in claims.h, doc/claims.md).
 *
 * The table maps a claim's name to what we know of its holder.  Three
 * sources, each checked by the next: the broker's grant (ours: only what
 * bc_take granted and the claims thread has not reported lost), the
 * fleet's announcements (fleet.claims: a holder's take, note, release, and
 * its answer to a newcomer's sync), and probes of the lock's consumer
 * count, which remove what the broker no longer holds.  Work per event and
 * per probe is a hash lookup; a listing copies the names once and sorts
 * them; the round-robin of probes walks the table once a second at most.
 */
#include "fleetfs/face/claims.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/claims.h"
#include "fleetfs/base/duration.h"
#include "fleetfs/base/errors.h"
#include "fleetfs/base/log.h"
#include "fleetfs/face/fleet.h"
#include "fleetfs/wire/names.h"

#define TAKE_TIMEOUT_MS \
    5000 /* below BC_GRACE_MS: a stalled take answers before a holder gives up */
#define WATCH_MS (10 * 60 * 1000) /* a name found taken is probed this long */
#define NOTE_MAX 1024

typedef struct {
    char host[256];
    char coord[NAME_MAX_LEN + 1];
    char agent[ADDR_MAX_LEN + 1]; /* the local agent of coord that took it; "": the lead */
    int64_t since_ms;             /* wall clock, ms since the epoch */
    uint64_t token;
    char *note;
    bool mine;
    bool unknown;       /* held, the broker says; its holder not heard from yet */
    int64_t lease_ms;   /* its lease's length (0: none), renewed by each write of lease */
    int64_t lease_end;  /* ours: when it runs out, monotonic ms */
    int64_t lease_endw; /* the same, wall clock ms (for every host's holder) */
} entry;

struct claims {
    struct fleet *f;
    bc_conn *bc;
    GMutex lock;        /* guards the rest */
    GHashTable *tab;    /* name -> entry */
    GHashTable *watch;  /* name -> monotonic ms until which it is probed */
    GQueue hot;         /* names looked up, most recent first: probed next */
    GHashTable *hot_at; /* name -> its link in hot */
    GHashTable *leased; /* names of ours with a lease, checked every 500 ms */
    guint rr;           /* round-robin cursor over tab */
};

static int64_t mono_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static void entry_free(gpointer p)
{
    entry *e = p;
    g_free(e->note);
    g_free(e);
}

static void announce_change(claims *c, const char *name, bool added)
{
    notifier *nt = g_atomic_pointer_get(&c->f->nt);
    if (nt)
        nt_entry(nt, "claims", name, added);
}

/* The same in a local agent's own claims/ (agents/<gid>/claims/): its
 * watchers see its own claims come and go. */
static void announce_agent(claims *c, const char *agent, const char *name, bool added)
{
    notifier *nt = g_atomic_pointer_get(&c->f->nt);
    char *dir;
    if (!nt || !agent || !agent[0])
        return;
    dir = g_strdup_printf("agents/%s/claims", agent);
    nt_entry(nt, dir, name, added);
    g_free(dir);
}

static void told(void *ud, fe_code res, const char *detail)
{
    if (res != FE_OK)
        log_warn("claims: the message to %s was not delivered (%s: %s); it learns of the claim "
                 "from its claims/ only",
                 (char *)ud, fe_errno_text(fe_errno(res)), detail ? detail : "");
    g_free(ud);
}

/* A local agent that held a claim is told it is no longer its own: one
 * message from the lead into its inbox (typed into its pane when it has
 * one), as any message from the lead.  Never under c->lock. */
static void tell_agent(claims *c, const char *agent, const char *name, uint64_t token,
                       const char *what)
{
    char detail[300];
    char *text;
    fe_code res;

    if (!agent || !agent[0])
        return;
    text = g_strdup_printf("fleetfs: your claim %s (token %llu) is no longer yours: %s. Stop "
                           "acting on it (its token is stale); take it again (fleet_claim, or "
                           "mkdir agents/%s/claims/%s) for a new token.",
                           name, (unsigned long long)token, what, agent, name);
    res = mb_send_start(c->f->mb, agent, NULL, text, strlen(text), told, g_strdup(agent), detail,
                        sizeof detail);
    if (res != FE_OK)
        told(g_strdup(agent), res, detail);
    else
        log_info("claims: %s told that it lost %s (token %llu)", agent, name,
                 (unsigned long long)token);
    g_free(text);
}

/* An event's JSON (g_free). */
static char *event_json(const char *op, const char *name, const entry *e)
{
    json_t *o = json_pack("{s:s,s:s}", "op", op, "name", name ? name : "");
    char *s, *out;
    if (e) {
        json_object_set_new(o, "host", json_string(e->host));
        json_object_set_new(o, "coord", json_string(e->coord));
        if (e->agent[0])
            json_object_set_new(o, "agent", json_string(e->agent));
        json_object_set_new(o, "since", json_integer(e->since_ms));
        json_object_set_new(o, "token", json_integer((json_int_t)e->token));
        json_object_set_new(o, "note", json_string(e->note ? e->note : ""));
        if (e->lease_ms) {
            json_object_set_new(o, "lease", json_integer(e->lease_ms));
            json_object_set_new(o, "leaseEnds", json_integer(e->lease_endw));
        }
    }
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    out = g_strdup(s);
    free(s);
    return out;
}

static void announce(claims *c, const char *op, const char *name, const entry *e)
{
    char *body = event_json(op, name, e);
    bc_announce(c->bc, name, body);
    g_free(body);
}

/* ---- on the claims thread ---- */

void cl_event(void *ud, const char *body, size_t len)
{
    claims *c = ud;
    json_t *o = json_loadb(body, len, 0, NULL);
    const char *op = json_string_value(json_object_get(o, "op"));
    const char *name = json_string_value(json_object_get(o, "name"));
    const char *coord = json_string_value(json_object_get(o, "coord"));
    json_int_t token = json_integer_value(json_object_get(o, "token"));
    const char *agent;
    entry *e;

    if (!o || !op || (coord && !strcmp(coord, c->f->opts->coord_id))) {
        json_decref(o);
        return; /* not an event, or ours */
    }
    if (!strcmp(op, "sync")) {
        GHashTableIter it;
        gpointer k, v;
        g_mutex_lock(&c->lock);
        g_hash_table_iter_init(&it, c->tab);
        while (g_hash_table_iter_next(&it, &k, &v))
            if (((entry *)v)->mine)
                announce(c, "held", k, v);
        g_mutex_unlock(&c->lock);
        json_decref(o);
        return;
    }
    if (!name || !name_valid(name) || !coord || token <= 0) {
        json_decref(o);
        return;
    }
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    if (!strcmp(op, "release")) {
        if (e && !e->mine && e->token <= (uint64_t)token) {
            g_hash_table_remove(c->tab, name);
            announce_change(c, name, false);
        }
    } else if (!strcmp(op, "take") || !strcmp(op, "held") || !strcmp(op, "note") ||
               !strcmp(op, "lease")) {
        bool added = !e;
        if (e && e->mine) {
            log_warn("claims: %s says it holds %s (token %lld) which the broker granted us "
                     "(token %llu); ours is checked at the next probe",
                     coord, name, (long long)token, (unsigned long long)e->token);
        } else if (!e || e->token <= (uint64_t)token) {
            if (!e) {
                e = g_new0(entry, 1);
                g_hash_table_insert(c->tab, g_strdup(name), e);
            }
            g_strlcpy(e->host, json_string_value(json_object_get(o, "host")) ?: "", sizeof e->host);
            g_strlcpy(e->coord, coord, sizeof e->coord);
            agent = json_string_value(json_object_get(o, "agent"));
            g_strlcpy(e->agent, agent && gid_valid(agent) ? agent : "", sizeof e->agent);
            e->since_ms = json_integer_value(json_object_get(o, "since"));
            e->token = (uint64_t)token;
            g_free(e->note);
            e->note = g_strdup(json_string_value(json_object_get(o, "note")) ?: "");
            e->lease_ms = json_integer_value(json_object_get(o, "lease"));
            e->lease_endw = json_integer_value(json_object_get(o, "leaseEnds"));
            e->unknown = false;
            if (added)
                announce_change(c, name, true);
        }
    }
    g_mutex_unlock(&c->lock);
    json_decref(o);
}

static void on_lost(void *ud, const char *name, const char *why)
{
    claims *c = ud;
    entry *e;
    char agent[ADDR_MAX_LEN + 1] = "";
    uint64_t token = 0;
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    if (e && e->mine) {
        log_warn("claims: lost claim %s (token %llu%s%s): %s; it is no longer ours: stop acting "
                 "on it (its token is stale) and take it again with mkdir for a new token",
                 name, (unsigned long long)e->token, e->agent[0] ? ", taken by " : "", e->agent,
                 why);
        g_strlcpy(agent, e->agent, sizeof agent);
        token = e->token;
        g_hash_table_remove(c->tab, name);
        announce_change(c, name, false);
        announce_agent(c, agent, name, false);
    }
    g_mutex_unlock(&c->lock);
    tell_agent(c, agent, name, token, why);
}

/* Every 500 ms (the claims watchdog's thread): a lease of ours that ran
 * out unrenewed is given up (bc_expire: the claims thread lets go and
 * reports it lost, so the log, the listing and the agent hear of it as of
 * any loss), and the fleet is told it is free. */
static void on_tick(void *ud)
{
    claims *c = ud;
    GHashTableIter it;
    gpointer k;
    int64_t now = mono_ms();

    g_mutex_lock(&c->lock);
    g_hash_table_iter_init(&it, c->leased);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
        entry *e = g_hash_table_lookup(c->tab, k);
        char why[160];
        if (!e || !e->mine || !e->lease_ms) {
            g_hash_table_iter_remove(&it);
            continue;
        }
        if (now < e->lease_end)
            continue;
        snprintf(why, sizeof why, "its lease of %lld ms ran out without a renewal",
                 (long long)e->lease_ms);
        if (bc_expire(c->bc, k, why)) {
            entry copy = *e;
            copy.note = NULL;
            announce(c, "release", k, &copy);
        }
        g_hash_table_iter_remove(&it);
    }
    g_mutex_unlock(&c->lock);
}

static void on_changed(void *ud, bool up)
{
    claims *c = ud;
    if (up) /* a newcomer: every holder says what it holds */
        announce(c, "sync", NULL, NULL);
}

/* This second's probes: the names watched (found taken by a mkdir here),
 * then the table round-robin. */
static char **on_to_probe(void *ud, unsigned max)
{
    claims *c = ud;
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer k, v;
    int64_t now = mono_ms();
    guint i = 0, size;

    g_mutex_lock(&c->lock);
    g_hash_table_iter_init(&it, c->watch);
    while (g_hash_table_iter_next(&it, &k, &v) && out->len < max) {
        if (*(int64_t *)v < now)
            g_hash_table_iter_remove(&it);
        else
            g_ptr_array_add(out, g_strdup(k));
    }
    while (out->len < max && c->hot.head) {
        char *h = g_queue_pop_head(&c->hot);
        g_hash_table_remove(c->hot_at, h);
        if (g_hash_table_contains(c->tab, h) && !g_hash_table_contains(c->watch, h))
            g_ptr_array_add(out, h);
        else
            g_free(h);
    }
    size = g_hash_table_size(c->tab);
    if (c->rr >= size)
        c->rr = 0;
    g_hash_table_iter_init(&it, c->tab);
    while (out->len < max && g_hash_table_iter_next(&it, &k, &v)) {
        if (i++ < c->rr || g_hash_table_contains(c->watch, k))
            continue;
        g_ptr_array_add(out, g_strdup(k));
        c->rr = i;
    }
    if (i >= size)
        c->rr = 0;
    g_mutex_unlock(&c->lock);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

void cl_probed(void *ud, const char *name, int consumers)
{
    claims *c = ud;
    entry *e;
    if (consumers < 0)
        return;
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    if (consumers == 0 && e && !e->mine) {
        g_hash_table_remove(c->tab, name);
        announce_change(c, name, false);
    } else if (consumers == 0 && e && e->mine) {
        log_warn("claims: the broker shows no consumer on the lock of %s, which we hold "
                 "(token %llu); checked again at the next probe",
                 name, (unsigned long long)e->token);
    } else if (consumers > 0 && !e && g_hash_table_contains(c->watch, name)) {
        e = g_new0(entry, 1);
        e->unknown = true;
        g_hash_table_insert(c->tab, g_strdup(name), e);
        announce_change(c, name, true);
    }
    g_mutex_unlock(&c->lock);
}

/* ---- any thread ---- */

claims *cl_new(struct fleet *f, char **uris)
{
    claims *c = g_new0(claims, 1);
    bc_config cfg = {.uris = uris,
                     .vhost = f->opts->vhost,
                     .ca = f->opts->ca,
                     .coord_id = f->opts->coord_id,
                     .host = f->host,
                     .uri_env = f->opts->broker_uri_env};
    bc_callbacks cb = {.lost = on_lost,
                       .event = cl_event,
                       .changed = on_changed,
                       .to_probe = on_to_probe,
                       .probed = cl_probed,
                       .tick = on_tick,
                       .ud = c};
    c->f = f;
    g_mutex_init(&c->lock);
    c->tab = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, entry_free);
    c->watch = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->hot_at = g_hash_table_new(g_str_hash, g_str_equal);
    c->leased = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_queue_init(&c->hot);
    c->bc = bc_new(&cfg, &cb);
    return c;
}

void cl_run(claims *c)
{
    if (c)
        bc_run(c->bc);
}

void cl_stop_begin(claims *c)
{
    if (c)
        bc_stop_begin(c->bc);
}

void cl_stop(claims *c)
{
    if (c)
        bc_stop(c->bc);
}

void cl_free(claims *c)
{
    if (!c)
        return;
    bc_stop(c->bc);
    if (bc_left_behind(c->bc)) /* its callbacks reach c: leaked on purpose */
        return;
    bc_free(c->bc);
    g_hash_table_destroy(c->tab);
    g_hash_table_destroy(c->watch);
    g_hash_table_destroy(c->hot_at);
    g_hash_table_destroy(c->leased);
    g_queue_clear_full(&c->hot, g_free);
    g_mutex_clear(&c->lock);
    g_free(c);
}

static void watch(claims *c, const char *name, int64_t ms)
{
    int64_t *until = g_new(int64_t, 1);
    *until = mono_ms() + ms;
    g_hash_table_replace(c->watch, g_strdup(name), until);
}

/* A lookup of another's claim puts it first in line for a probe (the
 * latest first): a mkdir of a listed name never reaches us (the kernel
 * answers EEXIST from the lookup), so a claim whose holder died must leave
 * the listing soon after someone looks at it, not after the whole
 * round-robin. */
bool cl_known(claims *c, const char *name)
{
    entry *e;
    bool k;
    if (!c || !name)
        return false;
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    k = e != NULL;
    if (e && !e->mine) {
        GList *l = g_hash_table_lookup(c->hot_at, name);
        if (l) {
            g_queue_unlink(&c->hot, l);
            g_queue_push_head_link(&c->hot, l);
        } else {
            g_queue_push_head(&c->hot, g_strdup(name));
            g_hash_table_insert(c->hot_at, c->hot.head->data, c->hot.head);
        }
    }
    g_mutex_unlock(&c->lock);
    return k;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **cl_list(claims *c)
{
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;
    if (c) {
        g_mutex_lock(&c->lock);
        g_ptr_array_set_size(out, 0);
        g_hash_table_iter_init(&it, c->tab);
        while (g_hash_table_iter_next(&it, &k, NULL))
            g_ptr_array_add(out, g_strdup(k));
        g_mutex_unlock(&c->lock);
        g_ptr_array_sort(out, cmp_str);
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

GString *cl_render(claims *c, const char *name, const char *viewer)
{
    GString *g = g_string_new(NULL);
    entry *e;
    json_t *o;
    char *s;

    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    if (!e) {
        g_mutex_unlock(&c->lock);
        return g;
    }
    o = json_pack("{s:s,s:b}", "name", name, "mine",
                  e->mine && (!viewer || !strcmp(e->agent, viewer)));
    if (e->unknown) {
        json_object_set_new(o, "holder", json_null());
    } else {
        GDateTime *t = g_date_time_new_from_unix_utc(e->since_ms / 1000);
        char *iso = g_date_time_format(t, "%Y-%m-%dT%H:%M:%SZ");
        json_object_set_new(o, "host", json_string(e->host));
        json_object_set_new(o, "holder", json_string(e->coord));
        json_object_set_new(o, "agent", e->agent[0] ? json_string(e->agent) : json_null());
        json_object_set_new(o, "since", json_string(iso));
        json_object_set_new(o, "sinceMs", json_integer(e->since_ms));
        json_object_set_new(o, "token", json_integer((json_int_t)e->token));
        json_object_set_new(o, "note", json_string(e->note ? e->note : ""));
        json_object_set_new(o, "lease",
                            e->lease_ms ? json_integer(e->lease_ms / 1000) : json_null());
        if (e->lease_ms) {
            GDateTime *le = g_date_time_new_from_unix_utc(e->lease_endw / 1000);
            char *les = g_date_time_format(le, "%Y-%m-%dT%H:%M:%SZ");
            json_object_set_new(o, "leaseEnds", json_string(les));
            g_free(les);
            g_date_time_unref(le);
        }
        g_free(iso);
        g_date_time_unref(t);
    }
    g_mutex_unlock(&c->lock);
    s = json_dumps(o, JSON_INDENT(2));
    g_string_append(g, s);
    g_string_append_c(g, '\n');
    free(s);
    json_decref(o);
    return g;
}

int cl_take(claims *c, const char *name, const char *agent, const char *note, char *why, size_t n)
{
    entry mine = {0}, *e;
    char *record;
    uint64_t token = 0;
    int rc;

    if (!name_valid(name)) {
        char shown[80];
        g_strlcpy(shown, name, sizeof shown);
        log_clean(shown);
        log_warn("claims: mkdir claims/%s refused (EINVAL): a claim name is [a-z0-9] then up "
                 "to 62 of [a-z0-9_-], like a peer name",
                 shown);
        snprintf(why, n, "not a valid claim name");
        return EINVAL;
    }
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    rc = e && e->mine ? EEXIST : 0;
    g_mutex_unlock(&c->lock);
    if (rc) {
        snprintf(why, n, "held by this mount already");
        log_info("claims: mkdir claims/%s failed (EEXIST): %s", name, why);
        return rc;
    }
    g_strlcpy(mine.host, c->f->host, sizeof mine.host);
    g_strlcpy(mine.coord, c->f->opts->coord_id, sizeof mine.coord);
    g_strlcpy(mine.agent, agent ? agent : "", sizeof mine.agent);
    mine.since_ms = g_get_real_time() / 1000;
    mine.note = (char *)(note ? note : "");
    record = event_json("record", name, &mine);
    rc = bc_take(c->bc, name, record, &token, TAKE_TIMEOUT_MS, why, n);
    g_free(record);
    g_mutex_lock(&c->lock);
    if (rc == 0) {
        e = g_new0(entry, 1);
        *e = mine;
        e->note = g_strdup(mine.note);
        e->token = token;
        e->mine = true;
        g_hash_table_replace(c->tab, g_strdup(name), e);
        g_hash_table_remove(c->watch, name);
        announce(c, "take", name, e);
        /* the mkdir was in one of the two directories: the other is told */
        if (agent && agent[0])
            announce_change(c, name, true);
    } else if (rc == EEXIST) {
        watch(c, name, WATCH_MS);
        e = g_hash_table_lookup(c->tab, name);
        snprintf(why, n, "the broker refused the lock: another connection holds it (%s%s)",
                 e && !e->unknown ? "holder " : "its holder not heard from yet",
                 e && !e->unknown ? e->coord : "");
        if (!e) {
            e = g_new0(entry, 1);
            e->unknown = true;
            g_hash_table_insert(c->tab, g_strdup(name), e);
        }
    } else if (rc == EALREADY) {
        snprintf(why, n, "held by this mount already");
    }
    g_mutex_unlock(&c->lock);
    if (rc == 0) {
        log_info("claims: took %s (token %llu)%s%s", name, (unsigned long long)token,
                 agent && agent[0] ? " for " : "", agent && agent[0] ? agent : "");
        return 0;
    }
    if (rc == EEXIST || rc == EALREADY) {
        /* listed from now on: the kernel answers the next mkdir EEXIST
         * itself, so this line comes once per refusal the broker made */
        log_info("claims: mkdir claims/%s failed (EEXIST): %s", name, why);
        return EEXIST;
    }
    if (rc == ENOTCONN) {
        log_warn("claims: mkdir claims/%s failed (ENOTCONN): %s; nothing was taken, try again "
                 "once the broker is reachable",
                 name, why);
        return ENOTCONN;
    }
    if (rc == ETIMEDOUT) {
        log_warn("claims: mkdir claims/%s failed (EAGAIN): no answer from the broker within "
                 "%d ms; nothing is held (a late grant is released at once), try again",
                 name, TAKE_TIMEOUT_MS);
        return EAGAIN;
    }
    if (rc == EMFILE) {
        log_warn("claims: mkdir claims/%s failed (ENOSPC): %s; release some first", name, why);
        return ENOSPC;
    }
    log_warn("claims: mkdir claims/%s failed (EIO): %s", name, why);
    return EIO;
}

int cl_mkdir(claims *c, const char *name, const char *agent)
{
    char why[300];
    return c ? cl_take(c, name, agent, NULL, why, sizeof why) : ENOTCONN;
}

/* The rule of cl_release and cl_note: 0 when agent (NULL: the lead) may
 * act on e. */
static int may_act(const entry *e, const char *agent)
{
    if (!e)
        return ENOENT;
    if (!e->mine)
        return EPERM;
    return agent && strcmp(e->agent, agent) != 0 ? EPERM : 0;
}

int cl_release(claims *c, const char *name, const char *agent)
{
    entry *e, copy = {0};
    int rc;

    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    rc = may_act(e, agent);
    if (e)
        copy = *e;
    g_mutex_unlock(&c->lock);
    if (rc)
        return rc;
    rc = bc_release(c->bc, name, TAKE_TIMEOUT_MS);
    if (rc == ENOENT) /* lost meanwhile: the thread said so */
        rc = 0;
    if (rc)
        return rc == ETIMEDOUT ? EAGAIN : rc;
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    if (e && e->mine)
        g_hash_table_remove(c->tab, name);
    copy.note = NULL;
    announce(c, "release", name, &copy);
    /* the rmdir was in one of the two directories: the other is told */
    if (agent)
        announce_change(c, name, false);
    else
        announce_agent(c, copy.agent, name, false);
    g_mutex_unlock(&c->lock);
    log_info("claims: released %s (token %llu)%s%s%s", name, (unsigned long long)copy.token,
             copy.agent[0] ? " of " : "", copy.agent,
             copy.agent[0] && !agent ? " by the lead" : "");
    if (!agent) {
        char what[300];
        snprintf(what, sizeof what, "the lead %s released it (rmdir claims/%s)",
                 c->f->opts->coord_id, name);
        tell_agent(c, copy.agent, name, copy.token, what);
    }
    return 0;
}

int cl_note(claims *c, const char *name, const char *agent, const char *buf, size_t len)
{
    entry *e;
    int rc = 0;
    char *note;

    if (len > NOTE_MAX || !g_utf8_validate(buf, (gssize)len, NULL))
        return EINVAL;
    note = g_strndup(buf, len);
    g_strchomp(note);
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    rc = may_act(e, agent);
    if (!rc) {
        g_free(e->note);
        e->note = note;
        note = NULL;
        announce(c, "note", name, e);
    }
    g_mutex_unlock(&c->lock);
    g_free(note);
    return rc;
}

int cl_lease(claims *c, const char *name, const char *agent, const char *buf, size_t len)
{
    char text[64];
    int64_t ms;
    entry *e;
    int rc;

    if (len == 0 || len >= sizeof text)
        return EINVAL;
    memcpy(text, buf, len);
    text[len] = '\0';
    g_strstrip(text);
    if (parse_duration(text, &ms) != 0 || ms < 1000 || ms > CL_LEASE_MAX_MS)
        return EINVAL;
    g_mutex_lock(&c->lock);
    e = g_hash_table_lookup(c->tab, name);
    rc = may_act(e, agent);
    if (!rc) {
        e->lease_ms = ms;
        e->lease_end = mono_ms() + ms;
        e->lease_endw = g_get_real_time() / 1000 + ms;
        g_hash_table_add(c->leased, g_strdup(name));
        announce(c, "lease", name, e);
    }
    g_mutex_unlock(&c->lock);
    return rc;
}
