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
#include "fleetfs/presence/presence.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

#define PR_STALE_AFTER 3  /* intervals */
#define PR_LOGGED_MAX 256 /* senders whose rejection we remember having logged */

_Static_assert(ENV_HB_MAX_GROUPS == OPTS_MAX_GROUPS, "a heartbeat must carry every group groups= "
                                                     "allows");

/* An agent as a heartbeat (or pr_set_local) gave it. */
typedef struct {
    char gid[GID_MAX_LEN + 1];
    char state[ENV_HB_STATE_LEN];
    char **groups; /* sorted, NULL-terminated */
} pr_agent;

typedef struct {
    char id[64];
    bool configured, self;
    bool heard;          /* a heartbeat was believed */
    int64_t heard_mono;  /* when (monotonic ms) */
    int64_t sent_ms;     /* its sentAt (wall ms): later ones must be newer */
    int64_t interval_ms; /* the sender's */
    bool left;
    bool listed;    /* in peers/ (announced to directory watchers) */
    pr_state shown; /* what watchers were last told */
    char host[256], version[64], agent[256], started_at[40], last_at[40];
    /* the agents extension of its last believed heartbeat */
    bool ext;
    char ext_started[40]; /* startedAt of the run that sent a verified one */
    char **groups;        /* the lead's, sorted; NULL none */
    GPtrArray *agents;    /* pr_agent*, sorted by gid; NULL none */
    /* the profiles extension (SPEC section 11): what it offers, sorted;
     * NULL: unknown (never heard, or a fleetfs before profiles) */
    char **profiles;
} pr_lead;

struct presence {
    GMutex lock;
    const fs_opts *o;
    pr_hooks hooks;
    char host[256];
    char started_at[40];
    sig_key *key;     /* NULL with insecure */
    sig_trust *trust; /* follows the directory (sig_trust_refresh) */
    int64_t trust_stamp;
    int64_t trust_checked;
    GHashTable *leads;  /* id -> pr_lead* */
    GHashTable *logged; /* sender -> 1: its rejection was logged */
    uint64_t rejected;
    uint64_t ignored; /* too old, from the future, or a replay */
    bool link_up;
    bool link_tried;    /* the roster thread reported once: up, or a failure */
    int64_t link_since; /* monotonic ms */
    char *agent_sent;   /* agent words of our last heartbeat */
    /* agents and groups */
    char **local_groups;     /* the lead's, sorted */
    GPtrArray *local_agents; /* pr_agent*, sorted by gid */
    char *local_key;         /* the local set in one string, to see changes */
    uint64_t local_gen;      /* bumped when the local set changes */
    uint64_t local_sent_gen; /* what our last heartbeat carried */
    uint64_t rejected_agents;
    GHashTable *logged_agents; /* sender -> 1: its foreign agents were logged */
    bool shed_logged;
    GHashTable *snap_agents; /* gid -> description, as watchers last saw it */
    GHashTable *snap_groups; /* group -> members, likewise */
    int64_t interval_ms;     /* our last heartbeat's (interval_locked) */
};

typedef struct {
    char path[200];
    char name[GID_MAX_LEN + 1];
    int kind; /* 0 changed(path), 1 entry added, 2 entry removed */
} pr_note;

static void local_to_hb_locked(presence *pr, env_heartbeat *h);
static void snap_diff_locked(presence *pr, GArray *notes, int64_t now);
static void deliver_notes(presence *pr, GArray *notes);
static char **groups_clean(const char *const *in, const char *who, bool *ok);

static int64_t mono_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static void agent_free(gpointer p)
{
    pr_agent *a = p;
    g_strfreev(a->groups);
    g_free(a);
}

static void lead_free(gpointer p)
{
    pr_lead *l = p;
    g_strfreev(l->groups);
    g_strfreev(l->profiles);
    if (l->agents)
        g_ptr_array_unref(l->agents);
    g_free(l);
}

static pr_lead *lead_new(presence *pr, const char *id)
{
    pr_lead *l = g_new0(pr_lead, 1);
    g_strlcpy(l->id, id, sizeof l->id);
    g_hash_table_insert(pr->leads, l->id, l);
    return l;
}

static gint cmp_str_data(gconstpointer a, gconstpointer b, gpointer ud)
{
    (void)ud;
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A sorted g_strdupv of a NULL-terminated list (an empty one when NULL). */
static char **sorted_copy(char **v)
{
    char **out = v ? g_strdupv(v) : g_new0(char *, 1);
    g_qsort_with_data(out, (gint)g_strv_length(out), sizeof(char *), (GCompareDataFunc)cmp_str_data,
                      NULL);
    return out;
}

static gint cmp_str_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **sorted_copy_free(char **v)
{
    char **out = sorted_copy(v);
    g_strfreev(v);
    return out;
}

/* Both NULL, or both lists with the same names in the same order. */
static bool strv_same(char **a, char **b)
{
    if (!a || !b)
        return a == b;
    return g_strv_equal((const gchar *const *)a, (const gchar *const *)b);
}

static gint cmp_agent(gconstpointer a, gconstpointer b)
{
    return strcmp((*(pr_agent *const *)a)->gid, (*(pr_agent *const *)b)->gid);
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
    pr->leads = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, lead_free);
    pr->logged_agents = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    pr->snap_agents = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->snap_groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    pr->local_agents = g_ptr_array_new_with_free_func(agent_free);
    pr->local_groups = g_new0(char *, 1);
    pr->logged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    pr->link_since = mono_ms();
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
        pr_lead *l = lead_new(pr, *p);
        l->configured = l->listed = true;
    }
    if (!g_hash_table_lookup(pr->leads, o->coord_id))
        lead_new(pr, o->coord_id);
    ((pr_lead *)g_hash_table_lookup(pr->leads, o->coord_id))->self = true;
    {
        /* the lead's groups until pr_set_local says otherwise; nobody
         * watches yet, so the first snapshot is told to no one */
        bool ok = true;
        GArray *none = g_array_new(FALSE, TRUE, sizeof(pr_note));
        g_strfreev(pr->local_groups);
        pr->local_groups = groups_clean((const char *const *)o->groups, "the lead", &ok);
        snap_diff_locked(pr, none, mono_ms());
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
    g_ptr_array_unref(pr->local_agents);
    g_strfreev(pr->local_groups);
    g_free(pr->local_key);
    g_free(pr->agent_sent);
    g_mutex_clear(&pr->lock);
    g_free(pr);
}

/* ------------------------------------------------------------------ */
/* our heartbeat                                                       */

/* words cut to fit n bytes on a character boundary, controls made spaces */
static void plain_copy(char *out, size_t n, const char *in)
{
    size_t len = 0;
    g_strlcpy(out, in ? in : "", n);
    len = strlen(out);
    while (len > 0 && !g_utf8_validate(out, (gssize)len, NULL))
        out[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            out[i] = ' ';
    if (!env_text_plain(out, len))
        g_strlcpy(out, "unknown", n);
}

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

static pr_state state_of(const pr_lead *l, int64_t now);

/* Our interval (doc/scaling.md, step 3): `heartbeat`, or longer when so
 * many leads heartbeat that each host would hear more than heartbeat_rate
 * a second.  N leads each every N/rate seconds make rate a second, however
 * many they are.  Whole seconds, so that a fleet near the bound does not
 * change it with every lead that comes and goes; never above 1 h.  Each
 * heartbeat announces its interval, and listeners judge staleness by it. */
static int64_t interval_locked(presence *pr, int64_t now, size_t *n_live)
{
    GHashTableIter it;
    gpointer v;
    size_t n = 1; /* ourselves */
    int64_t base = pr->o->heartbeat_ms, want;

    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v))
        if (!((pr_lead *)v)->self && state_of(v, now) == PR_LIVE)
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
    int64_t iv, was;
    size_t n_live;
    env_heartbeat h;
    int64_t now = env_now_ms();
    uint64_t gen;
    size_t n_agents;
    char *body;

    g_mutex_lock(&pr->lock);
    was = pr->interval_ms;
    iv = pr->interval_ms = interval_locked(pr, mono_ms(), &n_live);
    g_mutex_unlock(&pr->lock);
    if (iv != was)
        log_info("presence: %zu leads heartbeat (ourselves included): ours goes every %lld ms "
                 "now, %lld before (heartbeat=%lld ms, heartbeat_rate=%u a second)",
                 n_live, (long long)iv, (long long)was, (long long)pr->o->heartbeat_ms,
                 pr->o->heartbeat_rate);
    memset(&h, 0, sizeof h);
    h.v = 1;
    g_strlcpy(h.from, pr->o->coord_id, sizeof h.from);
    g_strlcpy(h.host, pr->host, sizeof h.host);
    plain_copy(h.version, sizeof h.version, FLEETFS_VERSION);
    env_time_format(now, h.sentAt);
    env_time_format(now + PR_STALE_AFTER * iv, h.expiresAt);
    g_strlcpy(h.startedAt, pr->started_at, sizeof h.startedAt);
    h.interval_ms = iv;
    plain_copy(h.agent, sizeof h.agent,
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
    local_to_hb_locked(pr, &h);
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

/* ------------------------------------------------------------------ */
/* heartbeats in                                                       */

static pr_state state_of(const pr_lead *l, int64_t now)
{
    if (!l->heard)
        return PR_NEVER;
    if (l->left)
        return PR_LEFT;
    return now - l->heard_mono < PR_STALE_AFTER * l->interval_ms ? PR_LIVE : PR_STALE;
}

static bool listed_now(presence *pr, const pr_lead *l, int64_t now)
{
    if (l->self)
        return false;
    if (l->configured)
        return true;
    return pr->o->discovery && l->heard && now - l->heard_mono < pr->o->discovery_ttl_ms;
}

static void note(GArray *notes, int kind, const char *path, const char *name)
{
    pr_note n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    g_strlcpy(n.path, path, sizeof n.path);
    if (name)
        g_strlcpy(n.name, name, sizeof n.name);
    g_array_append_val(notes, n);
}

static void note_lead(GArray *notes, const pr_lead *l)
{
    char path[160];
    note(notes, 0, "roster", NULL);
    snprintf(path, sizeof path, "hosts/%s/status", l->id);
    note(notes, 0, path, NULL);
    if (!l->self) {
        snprintf(path, sizeof path, "peers/%s/status", l->id);
        note(notes, 0, path, NULL);
    }
}

static void deliver_notes(presence *pr, GArray *notes)
{
    for (guint i = 0; i < notes->len; i++) {
        pr_note *n = &g_array_index(notes, pr_note, i);
        if (n->kind == 0 && pr->hooks.changed)
            pr->hooks.changed(pr->hooks.ud, n->path);
        else if (n->kind != 0 && pr->hooks.entry)
            pr->hooks.entry(pr->hooks.ud, n->path, n->name, n->kind == 1);
    }
    g_array_free(notes, TRUE);
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
                      (GCompareDataFunc)cmp_str_data, NULL);
    return a;
}

/* What l's believed heartbeat h says of its agents and groups. */
static void take_ext_locked(presence *pr, pr_lead *l, const env_heartbeat *h)
{
    GPtrArray *agents = g_ptr_array_new_with_free_func(agent_free);
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    char host[NAME_MAX_LEN + 1];
    size_t foreign = 0;

    l->ext = h->ext;
    g_strlcpy(l->ext_started, h->ext ? h->startedAt : "", sizeof l->ext_started);
    g_strfreev(l->groups);
    l->groups = g_strdupv(h->groups);
    if (l->groups)
        g_qsort_with_data(l->groups, (gint)g_strv_length(l->groups), sizeof(char *),
                          (GCompareDataFunc)cmp_str_data, NULL);
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
    g_ptr_array_sort(agents, cmp_agent);
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
    int64_t sent = 0, now = mono_ms();
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    pr_lead *l;
    pr_state before;

    if (env_hb_decode(body, len, &h, why, sizeof why) < 0) {
        char *who = rk_sender(routing_key);
        g_mutex_lock(&pr->lock);
        reject_locked(pr, who, why);
        g_mutex_unlock(&pr->lock);
        g_free(who);
        deliver_notes(pr, notes);
        return;
    }
    g_mutex_lock(&pr->lock);
    bad = judge_locked(pr, routing_key, &h, &sent, &ignore);
    if (bad && !ignore) {
        reject_locked(pr, h.from, bad);
        g_mutex_unlock(&pr->lock);
        deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    if (bad) {
        pr->ignored++;
        g_mutex_unlock(&pr->lock);
        deliver_notes(pr, notes);
        env_hb_free(&h);
        return;
    }
    l = g_hash_table_lookup(pr->leads, h.from);
    if (!l) {
        l = lead_new(pr, h.from);
        note(notes, 1, "hosts", l->id);
    }
    before = state_of(l, now);
    changed = !l->heard || l->left != h.leaving || strcmp(l->host, h.host) != 0 ||
              strcmp(l->version, h.version) != 0 || strcmp(l->agent, h.agent) != 0 ||
              strcmp(l->started_at, h.startedAt) != 0;
    if (!l->self) {
        char **profiles = h.has_profiles ? sorted_copy(h.profiles) : NULL;
        changed = changed || !strv_same(l->profiles, profiles);
        g_strfreev(l->profiles);
        l->profiles = profiles;
    }
    l->heard = true;
    l->heard_mono = now;
    l->sent_ms = sent;
    l->interval_ms = h.interval_ms;
    l->left = h.leaving;
    g_strlcpy(l->host, h.host, sizeof l->host);
    g_strlcpy(l->version, h.version, sizeof l->version);
    g_strlcpy(l->agent, h.agent, sizeof l->agent);
    g_strlcpy(l->started_at, h.startedAt, sizeof l->started_at);
    g_strlcpy(l->last_at, h.sentAt, sizeof l->last_at);
    if (changed || before != state_of(l, now)) {
        l->shown = state_of(l, now);
        note_lead(notes, l);
    }
    if (!l->listed && listed_now(pr, l, now)) {
        l->listed = true;
        appeared = !l->configured;
        if (appeared) {
            note(notes, 1, "peers", l->id);
            log_info("presence: discovered lead %s on host %s (now in peers/)", l->id, l->host);
        }
    }
    if (before != PR_LIVE && state_of(l, now) == PR_LIVE && !appeared && !l->self)
        log_info("presence: %s is live%s", l->id, before == PR_NEVER ? "" : " again");
    if (h.leaving && !l->self)
        log_info("presence: %s left (its fleetfs unmounted cleanly)", l->id);
    take_ext_locked(pr, l, &h);
    snap_diff_locked(pr, notes, now);
    g_mutex_unlock(&pr->lock);
    deliver_notes(pr, notes);
    env_hb_free(&h);
}

void pr_link(presence *pr, bool up)
{
    g_mutex_lock(&pr->lock);
    pr->link_up = up;
    pr->link_tried = true;
    pr->link_since = mono_ms();
    g_mutex_unlock(&pr->lock);
    if (pr->hooks.changed)
        pr->hooks.changed(pr->hooks.ud, "status");
}

bool pr_tick(presence *pr, const char *agent_words)
{
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    GHashTableIter it;
    gpointer v;
    int64_t now = mono_ms();
    bool agent_changed;

    g_mutex_lock(&pr->lock);
    agent_changed = pr->agent_sent && agent_words && strcmp(pr->agent_sent, agent_words) != 0;
    agent_changed = agent_changed || (pr->agent_sent && pr->local_gen != pr->local_sent_gen);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *l = v;
        pr_state s = state_of(l, now);
        if (s != l->shown) {
            if (s == PR_STALE && !l->self)
                log_warn("presence: %s is stale: no heartbeat for %llds (3 of its intervals); "
                         "its host or fleetfs may be down or cut off from the broker",
                         l->id, (long long)((now - l->heard_mono) / 1000));
            l->shown = s;
            note_lead(notes, l);
        }
        if (!l->self && l->heard && (l->ext || l->agents) &&
            now - l->heard_mono >= pr->o->discovery_ttl_ms)
            drop_ext_locked(l, now);
        if (!l->self && !l->configured && now - l->heard_mono >= pr->o->discovery_ttl_ms) {
            /* a discovered lead silent for discovery_ttl is forgotten */
            if (l->listed) {
                note(notes, 2, "peers", l->id);
                log_info("presence: %s silent for %llds (discovery_ttl): dropped from peers/",
                         l->id, (long long)((now - l->heard_mono) / 1000));
            }
            note(notes, 0, "roster", NULL);
            g_hash_table_iter_remove(&it);
        }
    }
    snap_diff_locked(pr, notes, now);
    g_mutex_unlock(&pr->lock);
    deliver_notes(pr, notes);
    return agent_changed;
}

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
    g_ptr_array_sort(out, cmp_str_ptr);
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

static void info_of(const pr_lead *l, int64_t now, pr_info *out)
{
    memset(out, 0, sizeof *out);
    g_strlcpy(out->id, l->id, sizeof out->id);
    out->self = l->self;
    out->configured = l->configured;
    out->listed = l->listed;
    out->state = state_of(l, now);
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
        info_of(l, mono_ms(), out);
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
    int64_t now = mono_ms();
    g_mutex_lock(&pr->lock);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_info *i = g_new(pr_info, 1);
        info_of(v, now, i);
        g_ptr_array_add(out, i);
    }
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, cmp_info);
    return out;
}

const char *pr_state_name(pr_state s)
{
    switch (s) {
    case PR_LIVE:
        return "live";
    case PR_STALE:
        return "stale";
    case PR_LEFT:
        return "left";
    case PR_NEVER:
        break;
    }
    return "never";
}

static void fmt_age(int64_t ms, char *out, size_t n)
{
    int64_t s = ms / 1000;
    if (s < 120)
        snprintf(out, n, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(out, n, "%lldm", (long long)(s / 60));
    else
        snprintf(out, n, "%lldh", (long long)(s / 3600));
}

void pr_words(const pr_info *i, char *out, size_t n)
{
    char age[32];
    if (i->state == PR_NEVER) {
        snprintf(out, n, "never");
        return;
    }
    fmt_age(i->age_ms, age, sizeof age);
    if (i->state == PR_LEFT)
        snprintf(out, n, "left (unmounted %s ago)", age);
    else
        snprintf(out, n, "%s (%s ago)", pr_state_name(i->state), age);
}

/* pr_liveness for a lead: words (why it is not live) are "no heartbeat
 * heard from it", "stale 40s" or "left 3m". */
static int lead_liveness(presence *pr, const char *id, char *words, size_t n)
{
    pr_info i;
    bool settled;
    int64_t now = mono_ms();
    char age[32];

    g_mutex_lock(&pr->lock);
    settled = pr->link_up && now - pr->link_since >= PR_STALE_AFTER * pr->o->heartbeat_ms;
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
    fmt_age(i.age_ms, age, sizeof age);
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
    g_mutex_lock(&pr->lock);
    snprintf(out, n, "%s (heartbeat every %lld ms, stale after 3; discovery %s)",
             pr->link_up      ? "connected"
             : pr->link_tried ? "roster connection down"
                              : "roster connecting",
             (long long)pr->interval_ms, pr->o->discovery ? "on" : "off");
    g_mutex_unlock(&pr->lock);
}

/* ------------------------------------------------------------------ */
/* agents and groups (SPEC section 10)                                 */

/* in's valid groups (sorted, each once), logging the others; *ok false
 * when one was left out. Never NULL. */
static char **groups_clean(const char *const *in, const char *who, bool *ok)
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
    g_ptr_array_sort(out, cmp_str_ptr);
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
    GPtrArray *na = g_ptr_array_new_with_free_func(agent_free);
    GArray *notes = g_array_new(FALSE, TRUE, sizeof(pr_note));
    char host[NAME_MAX_LEN + 1], *key, **lg;
    bool ok = true;

    lg = groups_clean(lead_groups, "the lead", &ok);
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
        plain_copy(a->state, sizeof a->state, agents[i].state ? agents[i].state : "starting");
        a->groups = groups_clean(agents[i].groups, gid, &ok);
        g_ptr_array_add(na, a);
    }
    g_ptr_array_sort(na, cmp_agent);
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
    snap_diff_locked(pr, notes, mono_ms());
    g_mutex_unlock(&pr->lock);
    deliver_notes(pr, notes);
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

static void local_to_hb_locked(presence *pr, env_heartbeat *h)
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
 * entry), then those of the other leads. */
typedef void (*agent_fn)(const pr_agent *a, const pr_lead *host, bool local, int64_t now, void *ud);

static void each_agent_locked(presence *pr, int64_t now, agent_fn fn, void *ud)
{
    pr_lead *self = g_hash_table_lookup(pr->leads, pr->o->coord_id);
    GHashTableIter it;
    gpointer v;

    for (guint i = 0; i < pr->local_agents->len; i++)
        fn(pr->local_agents->pdata[i], self, true, now, ud);
    g_hash_table_iter_init(&it, pr->leads);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        pr_lead *l = v;
        for (guint i = 0; !l->self && l->agents && i < l->agents->len; i++)
            fn(l->agents->pdata[i], l, false, now, ud);
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

static void member_agent(const pr_agent *a, const pr_lead *host, bool local, int64_t now, void *ud)
{
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
        g_ptr_array_sort(v, cmp_str_ptr);
    return g;
}

static void snap_agent(const pr_agent *a, const pr_lead *host, bool local, int64_t now, void *ud)
{
    char *groups = g_strjoinv(",", a->groups);
    (void)local;
    g_hash_table_insert(ud, g_strdup(a->gid),
                        g_strdup_printf("%s\x1f%s\x1f%d", a->state, groups,
                                        host ? (int)state_of(host, now) : (int)PR_NEVER));
    g_free(groups);
}

/* Compares what watchers of agents/ and groups/ would see now with what
 * they saw, notes the differences, and keeps the new picture. */
static void snap_diff_locked(presence *pr, GArray *notes, int64_t now)
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
            note(notes, 2, "agents", k);
            any = true;
        }
    g_hash_table_iter_init(&it, na);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const char *was = g_hash_table_lookup(pr->snap_agents, k);
        if (!was)
            note(notes, 1, "agents", k);
        else if (strcmp(was, v) != 0) {
            snprintf(path, sizeof path, "agents/%s/status", (char *)k);
            note(notes, 0, path, NULL);
        }
        any = any || !was || strcmp(was, v) != 0;
    }
    g_hash_table_iter_init(&it, pr->snap_groups);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!g_hash_table_contains(ng, k)) {
            note(notes, 2, "groups", k);
            any = true;
        }
    g_hash_table_iter_init(&it, ng);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const char *was = g_hash_table_lookup(pr->snap_groups, k);
        if (!was && strcmp(k, GROUP_ALL) != 0)
            note(notes, 1, "groups", k);
        if (was && strcmp(was, v) != 0) {
            snprintf(path, sizeof path, "groups/%s/members", (char *)k);
            note(notes, 0, path, NULL);
        }
        any = any || !was || strcmp(was, v) != 0;
    }
    if (any)
        note(notes, 0, "roster", NULL);
    g_hash_table_destroy(pr->snap_agents);
    g_hash_table_destroy(pr->snap_groups);
    pr->snap_agents = na;
    pr->snap_groups = ng;
}

/* ---- reading ---- */

static void info_of_agent(const pr_agent *a, const pr_lead *host, bool local, int64_t now,
                          pr_agent_info *out)
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
    out->presence = host ? state_of(host, now) : PR_NEVER;
    out->age_ms = host && host->heard ? now - host->heard_mono : -1;
}

static void list_agent(const pr_agent *a, const pr_lead *host, bool local, int64_t now, void *ud)
{
    pr_agent_info *i = g_new(pr_agent_info, 1);
    info_of_agent(a, host, local, now, i);
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
    each_agent_locked(pr, mono_ms(), list_agent, out);
    g_mutex_unlock(&pr->lock);
    g_ptr_array_sort(out, cmp_agent_info);
    return out;
}

typedef struct {
    const char *gid;
    pr_agent_info *out;
    bool found;
} agent_query;

static void find_agent(const pr_agent *a, const pr_lead *host, bool local, int64_t now, void *ud)
{
    agent_query *q = ud;
    if (!q->found && strcmp(a->gid, q->gid) == 0) {
        info_of_agent(a, host, local, now, q->out);
        q->found = true;
    }
}

bool pr_agent_get(presence *pr, const char *gid, pr_agent_info *out)
{
    agent_query q = {gid, out, false};
    if (!gid_valid(gid))
        return false;
    g_mutex_lock(&pr->lock);
    each_agent_locked(pr, mono_ms(), find_agent, &q);
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
    g = groups_locked(pr, mono_ms());
    g_mutex_unlock(&pr->lock);
    g_hash_table_iter_init(&it, g);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, g_strdup(k));
    g_hash_table_destroy(g);
    g_ptr_array_sort(out, cmp_str_ptr);
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
    all = groups_locked(pr, mono_ms());
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
    g_ptr_array_sort(out, cmp_str_ptr);
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
        return sorted_copy_free(out);
    }
    g_mutex_lock(&pr->lock);
    l = g_hash_table_lookup(pr->leads, id);
    if (l && l->profiles)
        out = g_strdupv(l->profiles);
    g_mutex_unlock(&pr->lock);
    return out;
}
