/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/receive.c — heartbeats in: each one judged (sender, time, replay), verified
 * against the trusted key, taken into the table, and the notes for watchers;
 * staleness and drop-outs found by pr_tick.
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
/* heartbeats in                                                       */

static bool listed_now(presence *pr, const pr_lead *l, int64_t now)
{
    if (l->self)
        return false;
    if (l->configured)
        return true;
    if (pr->o->discovery && pri_addressed_locked(pr, l, now))
        return true;
    return pr->o->discovery && l->heard && now - l->heard_mono < pr->o->discovery_ttl_ms;
}

static void note_lead(GArray *notes, const pr_lead *l)
{
    char path[160];
    pri_note(notes, 0, "roster", NULL);
    snprintf(path, sizeof path, "hosts/%s/status", l->id);
    pri_note(notes, 0, path, NULL);
    if (!l->self) {
        snprintf(path, sizeof path, "peers/%s/status", l->id);
        pri_note(notes, 0, path, NULL);
    }
}

/* Count a heartbeat we do not believe; log once per sender. */
static void reject_locked(presence *pr, const char *sender, const char *why)
{
    pr->rejected++;
    if (g_hash_table_contains(pr->logged, sender))
        return;
    if (g_hash_table_size(pr->logged) >= PR_LOGGED_MAX) {
        if (g_hash_table_size(pr->logged) == PR_LOGGED_MAX)
            log_warn("presence: rejected heartbeats from more than %d senders; no longer "
                     "logging new ones (status counts them in rejected_heartbeat)",
                     PR_LOGGED_MAX);
        else
            return;
    } else {
        log_warn("presence: heartbeat from %s rejected: %s; it is not shown as present (logged "
                 "once per sender; status counts them in rejected_heartbeat)",
                 sender, why);
    }
    g_hash_table_add(pr->logged, g_strdup(sender));
}

static void trust_fresh_locked(presence *pr, bool force)
{
    char *err = NULL;
    if (sig_trust_refresh(&pr->trust, pr->o->trusted_keys, false, &pr->trust_stamp,
                          &pr->trust_checked, force, &err) < 0) {
        log_warn("presence: cannot re-read trusted_keys %s: %s; the keys read before stay "
                 "trusted until it can be read",
                 pr->o->trusted_keys, err);
        g_free(err);
    }
}

static sig_result verify_locked(presence *pr, const env_heartbeat *h)
{
    sig_result r;
    trust_fresh_locked(pr, false);
    r = sig_verify_hb(pr->trust, h);
    if (r == SIG_UNKNOWN_KEY || r == SIG_BAD) { /* added or replaced since the last look */
        int64_t was = pr->trust_stamp;
        trust_fresh_locked(pr, true);
        if (pr->trust_stamp != was)
            r = sig_verify_hb(pr->trust, h);
    }
    return r;
}

/* The sender part of a routing key roster.<host>.<coord_id>, escaped for
 * the log (it is anyone's text). */
static char *rk_sender(const char *rk)
{
    const char *dot = strrchr(rk, '.');
    return g_strescape(dot ? dot + 1 : rk, NULL);
}

/* NULL when h may be believed; else why not.  *ignore: not a forgery,
 * just out of time (too old, from the future, or a replay). */
static const char *judge_locked(presence *pr, const char *rk, const env_heartbeat *h, int64_t *sent,
                                bool *ignore)
{
    int64_t exp, now = env_now_ms();
    const char *dot = strrchr(rk, '.');
    pr_lead *l;

    *ignore = false;
    if (!dot || strcmp(dot + 1, h->from) != 0)
        return "its routing key does not name its sender";
    if (!pr->o->insecure) {
        sig_result r = verify_locked(pr, h);
        if (r != SIG_OK)
            return r == SIG_UNSIGNED      ? "no signature"
                   : r == SIG_UNKNOWN_KEY ? "no trusted key for the sender in trusted_keys"
                                          : "the signature does not match the sender's key";
        if (h->ext && sig_verify_hb_agents(pr->trust, h) != SIG_OK)
            return "its agents and groups are not signed by the sender's key (asig)";
        if (h->has_profiles && sig_verify_hb_profiles(pr->trust, h) != SIG_OK)
            return "its profiles are not signed by the sender's key (psig)";
        if (h->has_group_iv && sig_verify_hb_group(pr->trust, h) != SIG_OK)
            return "its group interval is not signed by the sender's key (gsig)";
    }
    l = g_hash_table_lookup(pr->leads, h->from);
    if (!h->ext && l && l->ext_started[0] && strcmp(l->ext_started, h->startedAt) == 0)
        return "it lacks the agents list its earlier heartbeats of the same run carried "
               "(stripped in transit?)";
    *ignore = true;
    if (env_time_parse(h->sentAt, sent) < 0 || env_time_parse(h->expiresAt, &exp) < 0)
        return "bad times";
    if (*sent > now + PR_SKEW_MS)
        return "sent from the future (clock skew beyond 30 s?)";
    if (exp + PR_SKEW_MS < now)
        return "past its expiry (old, or a replay)";
    if (l && l->heard && *sent <= l->sent_ms)
        return "not newer than the last one believed (a replay?)";
    return NULL;
}

static pr_agent *agent_of(const env_hb_agent *in)
{
    pr_agent *a = g_new0(pr_agent, 1);
    g_strlcpy(a->gid, in->gid, sizeof a->gid);
    g_strlcpy(a->state, in->state, sizeof a->state);
    a->groups = g_strdupv(in->groups);
    if (!a->groups)
        a->groups = g_new0(char *, 1);
    g_qsort_with_data(a->groups, (gint)g_strv_length(a->groups), sizeof(char *),
                      (GCompareDataFunc)pri_cmp_str_data, NULL);
    return a;
}

/* What l's believed heartbeat h says of its agents and groups. */
static void take_ext_locked(presence *pr, pr_lead *l, const env_heartbeat *h)
{
    GPtrArray *agents = g_ptr_array_new_with_free_func(pri_agent_free);
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    char host[NAME_MAX_LEN + 1];
    size_t foreign = 0;

    l->ext = h->ext;
    g_strlcpy(l->ext_started, h->ext ? h->startedAt : "", sizeof l->ext_started);
    g_strfreev(l->groups);
    l->groups = g_strdupv(h->groups);
    if (l->groups)
        g_qsort_with_data(l->groups, (gint)g_strv_length(l->groups), sizeof(char *),
                          (GCompareDataFunc)pri_cmp_str_data, NULL);
    for (size_t i = 0; i < h->n_agents; i++) {
        const env_hb_agent *a = &h->agents[i];
        if (!id_host(a->gid, host) || strcmp(host, h->from) != 0) {
            foreign++;
            continue;
        }
        if (g_hash_table_contains(seen, a->gid))
            continue;
        g_hash_table_add(seen, (gpointer)a->gid);
        g_ptr_array_add(agents, agent_of(a));
    }
    g_hash_table_destroy(seen);
    g_ptr_array_sort(agents, pri_cmp_agent);
    if (l->agents)
        g_ptr_array_unref(l->agents);
    l->agents = agents;
    if (foreign == 0)
        return;
    pr->rejected_agents += foreign;
    if (g_hash_table_size(pr->logged_agents) < PR_LOGGED_MAX &&
        !g_hash_table_contains(pr->logged_agents, h->from)) {
        g_hash_table_add(pr->logged_agents, g_strdup(h->from));
        log_warn("presence: heartbeat from %s lists %zu agent(s) of another host; those are "
                 "not shown (a host speaks for its own agents only; logged once per sender, "
                 "counted in rejected_agents)",
                 h->from, foreign);
    }
}

/* l's host has been silent for discovery_ttl: its agents and groups go. */
static void drop_ext_locked(pr_lead *l, int64_t now)
{
    if (l->agents && l->agents->len > 0)
        log_info("presence: %s silent for %llds (discovery_ttl): its %u agent(s) dropped from "
                 "agents/",
                 l->id, (long long)((now - l->heard_mono) / 1000), l->agents->len);
    if (l->agents)
        g_ptr_array_unref(l->agents);
    l->agents = NULL;
    g_strfreev(l->groups);
    l->groups = NULL;
    l->ext = false;
}

void pr_received(presence *pr, const char *routing_key, const char *body, size_t len)
{
    env_heartbeat h;
    char why[160];
    const char *bad;
    bool ignore, changed, appeared = false;
    int64_t sent = 0, now = pri_mono_ms();
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    pr_lead *l;
    pr_state before;

    if (env_hb_decode(body, len, &h, why, sizeof why) < 0) {
        char *who = rk_sender(routing_key);
        g_mutex_lock(&pr->lock);
        reject_locked(pr, who, why);
        g_mutex_unlock(&pr->lock);
        g_free(who);
        pri_deliver_notes(pr, notes);
        return;
    }
    g_mutex_lock(&pr->lock);
    bad = judge_locked(pr, routing_key, &h, &sent, &ignore);
    if (bad && !ignore) {
        reject_locked(pr, h.from, bad);
        g_mutex_unlock(&pr->lock);
        pri_deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    if (bad) {
        pr->ignored++;
        g_mutex_unlock(&pr->lock);
        pri_deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    l = g_hash_table_lookup(pr->leads, h.from);
    if (!l && pri_census_take_locked(pr, &h)) { /* out of view, heard for a census */
        g_mutex_unlock(&pr->lock);
        pri_deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    if (!l && !pri_hb_in_view_locked(pr, &h)) {
        /* fleet_view=groups: not ours to hear (it is leaving a group of
         * ours, or we left it) */
        pr->ignored++;
        g_mutex_unlock(&pr->lock);
        pri_deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    if (!l) {
        l = pri_lead_new(pr, h.from);
        pri_note(notes, 1, "hosts", l->id);
    }
    before = pri_state_of(pr, l, now);
    changed = !l->heard || l->left != h.leaving || strcmp(l->host, h.host) != 0 ||
              strcmp(l->version, h.version) != 0 || strcmp(l->agent, h.agent) != 0 ||
              strcmp(l->started_at, h.startedAt) != 0;
    if (!l->self) {
        char **profiles = h.has_profiles ? pri_sorted_copy(h.profiles) : NULL;
        changed = changed || !pri_strv_same(l->profiles, profiles);
        g_strfreev(l->profiles);
        l->profiles = profiles;
    }
    l->heard = true;
    l->heard_mono = now;
    l->sent_ms = sent;
    l->interval_ms = h.interval_ms;
    l->group_iv_ms = h.has_group_iv ? h.group_interval_ms : h.interval_ms;
    l->left = h.leaving;
    g_strlcpy(l->host, h.host, sizeof l->host);
    g_strlcpy(l->version, h.version, sizeof l->version);
    g_strlcpy(l->agent, h.agent, sizeof l->agent);
    g_strlcpy(l->started_at, h.startedAt, sizeof l->started_at);
    g_strlcpy(l->last_at, h.sentAt, sizeof l->last_at);
    if (changed || before != pri_state_of(pr, l, now)) {
        l->shown = pri_state_of(pr, l, now);
        note_lead(notes, l);
    }
    if (!l->listed && listed_now(pr, l, now)) {
        l->listed = true;
        appeared = !l->configured;
        if (appeared) {
            pri_note(notes, 1, "peers", l->id);
            log_info("presence: discovered lead %s on host %s (now in peers/)", l->id, l->host);
        }
    }
    if (before != PR_LIVE && pri_state_of(pr, l, now) == PR_LIVE && !appeared && !l->self)
        log_info("presence: %s is live%s", l->id, before == PR_NEVER ? "" : " again");
    if (h.leaving && !l->self)
        log_info("presence: %s left (its fleetfs unmounted cleanly)", l->id);
    take_ext_locked(pr, l, &h);
    pri_snap_diff_locked(pr, notes, now);
    g_mutex_unlock(&pr->lock);
    pri_deliver_notes(pr, notes);
    env_hb_free(&h);
}

void pr_link(presence *pr, bool up)
{
    g_mutex_lock(&pr->lock);
    pr->link_up = up;
    pr->link_tried = true;
    pr->link_since = pri_mono_ms();
    g_mutex_unlock(&pr->lock);
    if (pr->hooks.changed)
        pr->hooks.changed(pr->hooks.ud, "status");
}

bool pr_tick(presence *pr, const char *agent_words)
{
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    GHashTableIter it;
    gpointer v;
    int64_t now = pri_mono_ms();
    bool agent_changed, hear_changed = false, narrowed;
    unsigned dropped = 0;

    g_mutex_lock(&pr->lock);
    /* fleet_view=auto hearing more than view_limit: what is out of view
     * now goes quietly below, said in one line after */
    narrowed = pri_auto_narrow_locked(pr, now);
    agent_changed = pr->agent_sent && agent_words && strcmp(pr->agent_sent, agent_words) != 0;
    agent_changed = agent_changed || (pr->agent_sent && pr->local_gen != pr->local_sent_gen);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *l = v;
        pr_state s = pri_state_of(pr, l, now);
        if (s != l->shown) {
            if (s == PR_STALE && !l->self)
                log_warn("presence: %s is stale: no heartbeat for %llds (3 of its %s, %lld ms "
                         "each); its host or fleetfs may be down or cut off from the broker",
                         l->id, (long long)((now - l->heard_mono) / 1000),
                         pri_stale_after_locked(pr, l, now) > PR_STALE_AFTER * l->interval_ms
                             ? "group intervals"
                             : "intervals",
                         (long long)(pri_stale_after_locked(pr, l, now) / PR_STALE_AFTER));
            l->shown = s;
            note_lead(notes, l);
        }
        if (!l->self && l->heard && (l->ext || l->agents) &&
            now - l->heard_mono >= pr->o->discovery_ttl_ms)
            drop_ext_locked(l, now);
        if (l->addressed && !pri_addressed_locked(pr, l, now)) {
            l->addressed = false; /* discovery_ttl since the last message to or from it */
            hear_changed = true;
        }
        if (!l->self && !l->configured && l->heard && !pri_in_view_locked(pr, l, now)) {
            /* fleet_view=groups: we no longer listen to it (it left our
             * groups, or we left its): gone from our view, not stale */
            if (l->listed)
                pri_note(notes, 2, "peers", l->id);
            if (narrowed)
                dropped++;
            else
                log_info("presence: %s out of view (fleet_view=groups: it shares no group with "
                         "us and is neither a configured peer nor addressed); dropped from "
                         "peers/ and hosts/",
                         l->id);
            pri_note(notes, 0, "roster", NULL);
            pri_note(notes, 2, "hosts", l->id);
            g_hash_table_iter_remove(&it);
            continue;
        }
        if (!l->self && !l->configured && !pri_addressed_locked(pr, l, now) &&
            now - l->heard_mono >= pr->o->discovery_ttl_ms) {
            /* a discovered lead silent for discovery_ttl is forgotten */
            if (l->listed) {
                pri_note(notes, 2, "peers", l->id);
                log_info("presence: %s silent for %llds (discovery_ttl): dropped from peers/",
                         l->id, (long long)((now - l->heard_mono) / 1000));
            }
            pri_note(notes, 0, "roster", NULL);
            g_hash_table_iter_remove(&it);
        }
    }
    pri_snap_diff_locked(pr, notes, now);
    if (narrowed) {
        log_warn("presence: %u leads heard live, more than view_limit=%u (fleet_view=auto): "
                 "from now this host hears only its groups, its configured peers and the leads "
                 "it addresses, so the broker's work stays linear in the fleet; %u dropped from "
                 "peers/ and hosts/ (still reachable by name; write to census for the whole "
                 "fleet once, or set fleet_view=all to hear it always)",
                 pr->narrowed_heard, pr->o->view_limit, dropped);
        pri_note(notes, 0, "status", NULL);
        hear_changed = true;
    }
    g_mutex_unlock(&pr->lock);
    pri_deliver_notes(pr, notes);
    if (hear_changed && pr->hooks.hear)
        pr->hooks.hear(pr->hooks.ud, NULL);
    return agent_changed;
}
