/* fleetfs/presence.c — the presence table (design in presence.h).
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
 */
#include "fleetfs/presence.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/log.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

#define PR_STALE_AFTER 3  /* intervals */
#define PR_LOGGED_MAX 256 /* senders whose rejection we remember having logged */

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
} pr_lead;

struct presence {
    GMutex lock;
    const fs_opts *o;
    pr_hooks hooks;
    char host[256];
    char started_at[40];
    sig_key *key;     /* NULL with insecure */
    sig_trust *trust; /* reloaded when an unknown sender shows up */
    int64_t trust_stamp;
    GHashTable *leads;  /* id -> pr_lead* */
    GHashTable *logged; /* sender -> 1: its rejection was logged */
    uint64_t rejected;
    uint64_t ignored; /* too old, from the future, or a replay */
    bool link_up;
    bool link_tried;    /* the roster thread reported once: up, or a failure */
    int64_t link_since; /* monotonic ms */
    char *agent_sent;   /* agent words of our last heartbeat */
};

typedef struct {
    char path[160];
    char name[64];
    int kind; /* 0 changed(path), 1 entry added, 2 entry removed */
} pr_note;

static int64_t mono_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static int64_t trust_stamp(const char *dir)
{
    struct stat st;
    if (!dir || stat(dir, &st) < 0)
        return -1;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

static pr_lead *lead_new(presence *pr, const char *id)
{
    pr_lead *l = g_new0(pr_lead, 1);
    g_strlcpy(l->id, id, sizeof l->id);
    g_hash_table_insert(pr->leads, l->id, l);
    return l;
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
    pr->leads = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    pr->logged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    pr->link_since = mono_ms();
    if (!o->insecure) {
        pr->key = sig_load_secret(o->key, err);
        if (pr->key)
            pr->trust = sig_trust_load_quiet(o->trusted_keys, err); /* the mailbox warns */
        if (!pr->key || !pr->trust) {
            pr_free(pr);
            return NULL;
        }
        pr->trust_stamp = trust_stamp(o->trusted_keys);
    }
    for (char **p = o->peers; p && *p; p++) {
        pr_lead *l = lead_new(pr, *p);
        l->configured = l->listed = true;
    }
    if (!g_hash_table_lookup(pr->leads, o->coord_id))
        lead_new(pr, o->coord_id);
    ((pr_lead *)g_hash_table_lookup(pr->leads, o->coord_id))->self = true;
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

char *pr_heartbeat(presence *pr, const char *agent_words, bool leaving, size_t *len)
{
    env_heartbeat h;
    int64_t now = env_now_ms();
    char *body;

    memset(&h, 0, sizeof h);
    h.v = 1;
    g_strlcpy(h.from, pr->o->coord_id, sizeof h.from);
    g_strlcpy(h.host, pr->host, sizeof h.host);
    plain_copy(h.version, sizeof h.version, FLEETFS_VERSION);
    env_time_format(now, h.sentAt);
    env_time_format(now + PR_STALE_AFTER * pr->o->heartbeat_ms, h.expiresAt);
    g_strlcpy(h.startedAt, pr->started_at, sizeof h.startedAt);
    h.interval_ms = pr->o->heartbeat_ms;
    plain_copy(h.agent, sizeof h.agent,
               leaving       ? "off (unmounting)"
               : agent_words ? agent_words
                             : "starting");
    h.leaving = leaving;
    if (pr->key && sig_sign_hb(pr->key, &h) < 0)
        return NULL;
    body = env_hb_encode(&h, len);
    g_mutex_lock(&pr->lock);
    g_free(pr->agent_sent);
    pr->agent_sent = g_strdup(agent_words ? agent_words : "starting");
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

static sig_result verify_locked(presence *pr, const env_heartbeat *h)
{
    sig_result r = sig_verify_hb(pr->trust, h);
    int64_t stamp;
    if (r == SIG_UNKNOWN_KEY && (stamp = trust_stamp(pr->o->trusted_keys)) != pr->trust_stamp) {
        char *err = NULL;
        sig_trust *t = sig_trust_load_quiet(pr->o->trusted_keys, &err);
        pr->trust_stamp = stamp;
        if (t) {
            sig_trust_free(pr->trust);
            pr->trust = t;
            r = sig_verify_hb(pr->trust, h);
        } else {
            log_warn("presence: cannot re-read %s: %s", pr->o->trusted_keys, err);
            g_free(err);
        }
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
    }
    *ignore = true;
    if (env_time_parse(h->sentAt, sent) < 0 || env_time_parse(h->expiresAt, &exp) < 0)
        return "bad times";
    if (*sent > now + PR_SKEW_MS)
        return "sent from the future (clock skew beyond 30 s?)";
    if (exp + PR_SKEW_MS < now)
        return "past its expiry (old, or a replay)";
    l = g_hash_table_lookup(pr->leads, h->from);
    if (l && l->heard && *sent <= l->sent_ms)
        return "not newer than the last one believed (a replay?)";
    return NULL;
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
    if (!l)
        l = lead_new(pr, h.from);
    before = state_of(l, now);
    changed = !l->heard || l->left != h.leaving || strcmp(l->host, h.host) != 0 ||
              strcmp(l->version, h.version) != 0 || strcmp(l->agent, h.agent) != 0 ||
              strcmp(l->started_at, h.startedAt) != 0;
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

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    g_ptr_array_sort(out, cmp_str);
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

int pr_liveness(presence *pr, const char *peer, char *why, size_t n)
{
    pr_info i;
    bool settled;
    int64_t now = mono_ms();
    char age[32];

    g_mutex_lock(&pr->lock);
    settled = pr->link_up && now - pr->link_since >= PR_STALE_AFTER * pr->o->heartbeat_ms;
    g_mutex_unlock(&pr->lock);
    if (!pr_get(pr, peer, &i))
        i.state = PR_NEVER;
    if (i.state == PR_LIVE)
        return 1;
    /* just (re)connected: the peers may be reconnecting too; do not call
     * them away until they have had three intervals to say hello (a lead
     * that said it left did leave) */
    if (!settled && i.state != PR_LEFT)
        return -1;
    if (i.state == PR_NEVER) {
        snprintf(why, n, "peer not live (no heartbeat heard from it)");
        return 0;
    }
    fmt_age(i.age_ms, age, sizeof age);
    snprintf(why, n, "peer not live (%s %s)", i.state == PR_LEFT ? "left" : "stale", age);
    return 0;
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
             (long long)pr->o->heartbeat_ms,
             pr->o->discovery ? "on" : "off");
    g_mutex_unlock(&pr->lock);
}
