/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/heartbeat.c — our heartbeat: the body each interval sends (signed), and the interval itself,
 * which grows with the number of leads heard (doc/scaling.md, step 3).
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
/* our heartbeat                                                       */

/* Signs and encodes h; when our agents do not fit one heartbeat, announces
 * as many as fit (h->n_agents shrinks; the caller restores it to free). */
static char *hb_body(presence *pr, env_heartbeat *h, size_t *len)
{
    size_t all = h->n_agents;
    char *body = NULL;
    bool shed;

    for (;;) {
        if (pr->key && sig_sign_hb(pr->key, h) < 0)
            return NULL;
        body = env_hb_encode(h, len);
        if (body != NULL || h->n_agents == 0)
            break;
        h->n_agents = h->n_agents * 9 / 10; /* too big: fewer, and sign again */
    }
    g_mutex_lock(&pr->lock);
    shed = body != NULL && h->n_agents < all && !pr->shed_logged;
    pr->shed_logged = pr->shed_logged || shed;
    g_mutex_unlock(&pr->lock);
    if (shed)
        log_warn("presence: our heartbeat can carry only %zu of our %zu agents (%d bytes at "
                 "most); the others are not announced: fewer agents, shorter names or fewer "
                 "groups (logged once)",
                 h->n_agents, all, ENV_HB_MAX_LEN);
    return body;
}

/* Our interval (doc/scaling.md, step 3): `heartbeat`, or longer when so
 * many leads heartbeat that each host would hear more than heartbeat_rate
 * a second.  N leads each every N/rate seconds make rate a second, however
 * many they are.  Whole seconds, so that a fleet near the bound does not
 * change it with every lead that comes and goes; never above 1 h.  Each
 * heartbeat announces its interval, and listeners judge staleness by it. */
int64_t pri_interval_locked(presence *pr, int64_t now, size_t *n_live)
{
    GHashTableIter it;
    gpointer v;
    size_t n = 1; /* ourselves */
    int64_t base = pr->o->heartbeat_ms, want;

    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v))
        if (!((pr_lead *)v)->self && pri_state_of(pr, v, now) == PR_LIVE)
            n++;
    *n_live = n;
    if (!pr->o->heartbeat_rate)
        return base;
    want = (int64_t)n * 1000 / pr->o->heartbeat_rate;
    if (want <= base)
        return base;
    want = (want + 999) / 1000 * 1000;
    return MIN(want, 3600000);
}

/* Our group interval (doc/presence.md, "Group heartbeats"): how often our
 * heartbeat carries our group words, so that it reaches every member of
 * our groups.  With G members heard live (ourselves included) each going
 * every G/group_rate seconds, a member hears about group_rate group
 * heartbeats a second, and the broker delivers about N x group_rate a
 * second, whatever the group size.  Never below our interval iv; whole
 * seconds, like the interval; never above 1 h.  iv itself when we are in
 * no group, not scoped, or group_rate is 0 (every heartbeat to the
 * groups). */
int64_t pri_group_iv_locked(presence *pr, int64_t now, int64_t iv, size_t *n_members)
{
    int64_t want;

    *n_members = pr_scoped(pr) ? pri_group_heard_locked(pr, now) : 0;
    if (!pr_scoped(pr) || !pr->o->group_rate || *n_members == 0)
        return iv;
    want = (int64_t)*n_members * 1000 / pr->o->group_rate;
    want = (want + 999) / 1000 * 1000;
    return CLAMP(want, iv, 3600000);
}

int64_t pr_group_interval_ms(presence *pr)
{
    int64_t gi;
    g_mutex_lock(&pr->lock);
    gi = pr->group_iv_ms;
    g_mutex_unlock(&pr->lock);
    return gi;
}

int64_t pr_interval_ms(presence *pr)
{
    int64_t iv;
    g_mutex_lock(&pr->lock);
    iv = pr->interval_ms;
    g_mutex_unlock(&pr->lock);
    return iv;
}

char *pr_heartbeat(presence *pr, const char *agent_words, bool leaving, size_t *len)
{
    int64_t iv, was, gi, gwas, gcur;
    bool say;
    size_t n_live, n_members;
    env_heartbeat h;
    int64_t now = env_now_ms();
    uint64_t gen;
    size_t n_agents;
    char *body;

    g_mutex_lock(&pr->lock);
    was = pr->interval_ms;
    iv = pr->interval_ms = pri_interval_locked(pr, pri_mono_ms(), &n_live);
    gi = pr->group_iv_ms = pri_group_iv_locked(pr, pri_mono_ms(), iv, &n_members);
    /* said when our group heartbeats start or stop going less often than
     * every heartbeat, or change by a quarter: not at every member */
    gcur = gi > iv ? gi : 0;
    gwas = pr->group_iv_logged;
    say = gcur != gwas &&
          (gcur == 0 || gwas == 0 || (gcur > gwas ? gcur - gwas : gwas - gcur) * 4 >= gwas);
    if (say)
        pr->group_iv_logged = gcur;
    g_mutex_unlock(&pr->lock);
    if (say && gcur)
        log_info("presence: %zu members of our groups heard (ourselves included): our "
                 "heartbeat goes to our groups every %lld ms now (group_rate=%u a second), to "
                 "the leads that name us every %lld ms",
                 n_members, (long long)gi, pr->o->group_rate, (long long)iv);
    else if (say)
        log_info("presence: %zu members of our groups heard (ourselves included): every "
                 "heartbeat of ours goes to our groups again (every %lld ms)",
                 n_members, (long long)iv);
    if (iv != was)
        log_info("presence: %zu leads heartbeat (ourselves included): ours goes every %lld ms "
                 "now, %lld before (heartbeat=%lld ms, heartbeat_rate=%u a second)",
                 n_live, (long long)iv, (long long)was, (long long)pr->o->heartbeat_ms,
                 pr->o->heartbeat_rate);
    memset(&h, 0, sizeof h);
    h.v = 1;
    g_strlcpy(h.from, pr->o->coord_id, sizeof h.from);
    g_strlcpy(h.host, pr->host, sizeof h.host);
    pri_plain_copy(h.version, sizeof h.version, FLEETFS_VERSION);
    env_time_format(now, h.sentAt);
    env_time_format(now + PR_STALE_AFTER * iv, h.expiresAt);
    g_strlcpy(h.startedAt, pr->started_at, sizeof h.startedAt);
    h.interval_ms = iv;
    /* fleet_view=groups: how often our heartbeat reaches our groups */
    h.has_group_iv = pr_scoped(pr);
    h.group_interval_ms = gi;
    pri_plain_copy(h.agent, sizeof h.agent,
                   leaving       ? "off (unmounting)"
                   : agent_words ? agent_words
                                 : "starting");
    h.leaving = leaving;
    /* the profiles this host offers (SPEC section 11): always announced,
     * [] when none, so a reader can tell none from a fleetfs before them */
    h.has_profiles = true;
    h.profiles = calloc(pr->o->profiles.n + 1, sizeof(char *));
    if (!h.profiles)
        abort();
    for (size_t i = 0; i < pr->o->profiles.n && i < ENV_HB_MAX_PROFILES; i++)
        if (!(h.profiles[h.n_profiles++] = strdup(pr->o->profiles.v[i].name)))
            abort();
    g_mutex_lock(&pr->lock);
    pri_local_to_hb_locked(pr, &h);
    gen = pr->local_gen;
    g_mutex_unlock(&pr->lock);
    n_agents = h.n_agents;
    body = hb_body(pr, &h, len);
    h.n_agents = n_agents;
    env_hb_free(&h);
    if (!body)
        return NULL;
    g_mutex_lock(&pr->lock);
    g_free(pr->agent_sent);
    pr->agent_sent = g_strdup(agent_words ? agent_words : "starting");
    pr->local_sent_gen = gen;
    g_mutex_unlock(&pr->lock);
    return body;
}
