/* fleetfs/mailbox.c — held messages, inbox views, sent log, history.
 *
 * Held messages are what the broker delivered to us and we have not acked
 * yet (at most `prefetch` of them).  Each carries the connection epoch and
 * delivery tag it arrived with; after a reconnect the broker redelivers
 * them, and the redelivery is matched by msgId so an open `tail -f inbox`
 * does not print it twice.  Messages of an old epoch that are not
 * redelivered within STALE_GRACE_MS of a working consumer are forgotten.
 *
 * An open inbox is a view: a private copy of the pending lines at open,
 * to which every later arrival is appended.  Acks never rewrite a view.
 *
 * History (consumed messages) is bounded and persisted as JSON Lines in
 * state_dir/history.jsonl; its msgIds also let us recognise a redelivery
 * of a message we already consumed (the ack was lost with a connection)
 * and ack it again instead of showing it twice.
 */
#include "fleetfs/mailbox.h"

#include <errno.h>
#include <fuse.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "fleetfs/envelope.h"
#include "fleetfs/jlog.h"
#include "fleetfs/log.h"
#include "fleetfs/names.h"
#include "fleetfs/seen.h"
#include "fleetfs/sign.h"

#define SENT_MAX 1000
#define HISTORY_MAX 1000
#define STALE_GRACE_MS 10000
#define CLOCK_SKEW_MS (5 * 60 * 1000)
#define SEEN_CAP 100000

typedef struct {
    envelope env;
    char received_at[40];
    bool redelivered;
    bool acking; /* an ack is on its way, or the injector has it: hands off */
    uint64_t epoch, tag;
    char *line; /* the inbox line, "\n"-terminated */
    size_t line_len;
} held_msg;

struct mb_view {
    pid_t pid;
    GString *buf;
    size_t read_hi; /* furthest byte read; unread data = buf->len - read_hi */
    struct fuse_pollhandle *ph;
};

typedef struct {
    char msg_id[ENV_ID_LEN + 1];
    char to[64];
    char sent_at[40];
    char expires_at[40];
    char state[24];
    int64_t state_at;
    char detail[256];
    char *line; /* rendered, "\n"-terminated: getattr and open cost no JSON */
    size_t line_len;
} sent_entry;

struct mailbox {
    GMutex lock;
    const fs_opts *o;
    mb_hooks hooks;
    br_conn *br;
    char inbox_path[128], sent_path[128], history_path[128], lead_status_path[128];

    GQueue held;          /* held_msg*, arrival order */
    GHashTable *held_ids; /* msgId -> held_msg* */
    size_t held_bytes;
    GList *views;         /* mb_view* */
    GQueue sent;          /* sent_entry*, oldest first */
    GHashTable *sent_ids; /* msgId -> sent_entry* (keys live in the entries) */
    size_t sent_bytes;    /* sum of their line_len: the size of `sent` */
    size_t history_bytes; /* size of `history` */
    GQueue history;       /* char* JSON lines without newline, oldest first */
    GHashTable *consumed; /* msgId set of history entries */
    jlog *history_log;
    jlog *sent_log;
    mb_counters n;
    GHashTable *rejections; /* reason -> count (GUINT_TO_POINTER) */
    int64_t mtime[MB__FILES];
    char *injector_words; /* what the injector is doing, for status */
    sig_key *key;         /* NULL only with insecure */
    sig_trust *trust;     /* reloaded when an unknown sender shows up */
    bool trim;            /* many messages freed: give the memory back */
    int64_t trust_loaded; /* trust directory mtime (ns) when it was read */
    seen_set *seen;       /* replay protection, persisted */
    uint64_t ok_epoch;    /* epoch whose consumer we saw working ... */
    int64_t ok_since;     /* ... since then (monotonic ms) */
};

static void sent_load_line(mailbox *mb, const char *line);
static void sent_free(sent_entry *se);

static void touch(mailbox *mb, mb_file f)
{
    mb->mtime[f] = env_now_ms();
}

static void changed(mailbox *mb, const char *path)
{
    if (mb->hooks.changed)
        mb->hooks.changed(mb->hooks.ud, path);
}

/* ------------------------------------------------------------------ */
/* history                                                             */

static void history_push(mailbox *mb, char *line)
{
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    const char *id = j ? json_string_value(json_object_get(j, "msgId")) : NULL;
    if (id)
        g_hash_table_add(mb->consumed, g_strdup(id));
    json_decref(j);
    g_queue_push_tail(&mb->history, line);
    mb->history_bytes += strlen(line) + 1;
    while (mb->history.length > HISTORY_MAX) {
        char *old = g_queue_pop_head(&mb->history);
        mb->history_bytes -= strlen(old) + 1;
        json_t *o = json_loads(old, 0, &err);
        const char *oid = o ? json_string_value(json_object_get(o, "msgId")) : NULL;
        if (oid)
            g_hash_table_remove(mb->consumed, oid);
        json_decref(o);
        g_free(old);
    }
}

static GString *render_history_locked(void *ud)
{
    mailbox *mb = ud;
    GString *s = g_string_new(NULL);
    for (GList *l = mb->history.head; l; l = l->next) {
        g_string_append(s, l->data);
        g_string_append_c(s, '\n');
    }
    return s;
}

static void history_persist(mailbox *mb, const char *line)
{
    jlog_append(mb->history_log, line);
    jlog_maybe_compact(mb->history_log, mb->history.length + 1, render_history_locked, mb);
}

/* Lock held.  how: injected / acked / uncertain / rejected */
static void history_add(mailbox *mb, const envelope *e, const char *received_at, const char *how,
                        const char *detail)
{
    char now[40];
    json_t *j = json_object();
    char *line;
    env_time_format(env_now_ms(), now);
    json_object_set_new(j, "msgId", json_string(e->msgId));
    json_object_set_new(j, "from", json_string(e->from));
    json_object_set_new(j, "to", json_string(e->to));
    json_object_set_new(j, "sentAt", json_string(e->sentAt));
    json_object_set_new(j, "receivedAt", json_string(received_at));
    json_object_set_new(j, "consumedAt", json_string(now));
    json_object_set_new(j, "consumed", json_string(how));
    if (detail && *detail)
        json_object_set_new(j, "detail", json_string(detail));
    if (e->body)
        json_object_set_new(j, "body", json_stringn(e->body, e->body_len));
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!line)
        return;
    history_persist(mb, line);
    history_push(mb, g_strdup(line));
    free(line);
    touch(mb, MB_HISTORY);
    changed(mb, mb->history_path);
}

/* ------------------------------------------------------------------ */

mailbox *mb_new(const fs_opts *o, const mb_hooks *hooks)
{
    mailbox *mb = g_new0(mailbox, 1);
    g_mutex_init(&mb->lock);
    mb->o = o;
    mb->hooks = *hooks;
    snprintf(mb->inbox_path, sizeof mb->inbox_path, "leads/%s/inbox", o->coord_id);
    snprintf(mb->sent_path, sizeof mb->sent_path, "leads/%s/sent", o->coord_id);
    snprintf(mb->history_path, sizeof mb->history_path, "leads/%s/history", o->coord_id);
    snprintf(mb->lead_status_path, sizeof mb->lead_status_path, "leads/%s/status", o->coord_id);
    mb->held_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->sent_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->consumed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    mb->rejections = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    {
        GPtrArray *lines;
        char *path = g_build_filename(o->state_dir, "history.jsonl", NULL);
        mb->history_log = jlog_open(path, &lines);
        for (guint i = 0; i < lines->len; i++)
            history_push(mb, g_strdup(lines->pdata[i]));
        g_ptr_array_free(lines, TRUE);
        g_free(path);
        path = g_build_filename(o->state_dir, "sent.jsonl", NULL);
        mb->sent_log = jlog_open(path, &lines);
        for (guint i = 0; i < lines->len; i++)
            sent_load_line(mb, lines->pdata[i]);
        g_ptr_array_free(lines, TRUE);
        g_free(path);
    }
    for (int i = 0; i < MB__FILES; i++)
        mb->mtime[i] = env_now_ms();
    return mb;
}

void mb_set_broker(mailbox *mb, br_conn *br)
{
    mb->br = br;
}

static void held_free(held_msg *m)
{
    env_free(&m->env);
    g_free(m->line);
    g_free(m);
}

void mb_free(mailbox *mb)
{
    held_msg *m;
    char *s;
    sent_entry *se;
    if (!mb)
        return;
    while ((m = g_queue_pop_head(&mb->held)))
        held_free(m);
    while ((se = g_queue_pop_head(&mb->sent)))
        sent_free(se);
    while ((s = g_queue_pop_head(&mb->history)))
        g_free(s);
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        if (v->ph)
            fuse_pollhandle_destroy(v->ph);
        g_string_free(v->buf, TRUE);
        g_free(v);
    }
    g_list_free(mb->views);
    g_hash_table_destroy(mb->held_ids);
    g_hash_table_destroy(mb->sent_ids);
    g_hash_table_destroy(mb->consumed);
    g_hash_table_destroy(mb->rejections);
    jlog_close(mb->history_log);
    jlog_close(mb->sent_log);
    g_free(mb->injector_words);
    sig_key_free(mb->key);
    sig_trust_free(mb->trust);
    seen_close(mb->seen);
    g_mutex_clear(&mb->lock);
    g_free(mb);
}

/* ------------------------------------------------------------------ */
/* arrivals                                                            */

static void count_rejection(mailbox *mb, const char *reason)
{
    gpointer old = g_hash_table_lookup(mb->rejections, reason);
    g_hash_table_replace(mb->rejections, g_strdup(reason),
                         GUINT_TO_POINTER(GPOINTER_TO_UINT(old) + 1));
    mb->n.rejected++;
    mb->n.dead_lettered++;
}

/* ------------------------------------------------------------------ */
/* security                                                            */

/* The trust directory's change time, to notice a .pub copied in. */
static int64_t trust_stamp(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return -1;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

int mb_set_security(mailbox *mb, char **err)
{
    char *path = g_build_filename(mb->o->state_dir, "seen", NULL);
    mb->seen = seen_open(path, SEEN_CAP, err);
    g_free(path);
    if (!mb->seen)
        return -1;
    if (mb->o->insecure)
        return 0;
    if (!mb->o->key || !mb->o->trusted_keys) {
        *err = g_strdup_printf(
            "messages are signed and checked, so fleetfs needs -o key=FILE (make one with "
            "'fleetfs keygen FILE') and -o trusted_keys=DIR (the peers' <coord_id>.pub files); "
            "-o insecure turns this off for local experiments only");
        return -1;
    }
    mb->key = sig_load_secret(mb->o->key, err);
    if (!mb->key)
        return -1;
    mb->trust = sig_trust_load(mb->o->trusted_keys, err);
    if (!mb->trust)
        return -1;
    mb->trust_loaded = trust_stamp(mb->o->trusted_keys);
    if (sig_trust_has(mb->trust, mb->o->coord_id) &&
        !sig_key_matches(mb->trust, mb->o->coord_id, mb->key))
        log_warn("security: %s/%s.pub is not the public half of %s; peers that trust that "
                 "file will reject this host's messages",
                 mb->o->trusted_keys, mb->o->coord_id, mb->o->key);
    return 0;
}

char *mb_security_words(mailbox *mb)
{
    char *w;
    if (mb->o->insecure)
        return g_strdup("INSECURE (-o insecure): messages are neither signed nor checked; "
                        "anyone with broker access can type into this lead's pane");
    g_mutex_lock(&mb->lock);
    w = g_strdup_printf("on (ed25519; %zu trusted keys in %s)", sig_trust_count(mb->trust),
                        mb->o->trusted_keys);
    g_mutex_unlock(&mb->lock);
    return w;
}

/* Lock held.  An unknown sender may be a peer whose .pub was just copied
 * in: when the directory changed since it was read, read it again. */
static sig_result verify_locked(mailbox *mb, const envelope *e)
{
    sig_result r = sig_verify(mb->trust, e);
    int64_t stamp;
    if (r == SIG_UNKNOWN_KEY && (stamp = trust_stamp(mb->o->trusted_keys)) != mb->trust_loaded) {
        char *err = NULL;
        sig_trust *t = sig_trust_load(mb->o->trusted_keys, &err);
        mb->trust_loaded = stamp;
        if (t) {
            sig_trust_free(mb->trust);
            mb->trust = t;
            r = sig_verify(mb->trust, e);
        } else {
            log_warn("security: cannot re-read %s: %s", mb->o->trusted_keys, err);
            g_free(err);
        }
    }
    return r;
}

/* Lock held.  The checks of SPEC section 4, in its order, up to expiry
 * (the replay check comes after redeliveries are told apart).  Returns
 * NULL when acceptable, else the counted reason; *verified says whether
 * the sender proved who it is (only then may it get a receipt). */
static const char *refuse_reason(mailbox *mb, const envelope *e, bool *verified, char *why,
                                 size_t n)
{
    int64_t exp, sent;
    *verified = mb->o->insecure;
    if (!mb->o->insecure) {
        sig_result r = verify_locked(mb, e);
        if (r != SIG_OK) {
            snprintf(why, n, "%s",
                     r == SIG_UNSIGNED      ? "no signature"
                     : r == SIG_UNKNOWN_KEY ? "no trusted key for the sender in trusted_keys"
                                            : "the signature does not match the sender's key");
            return sig_result_name(r);
        }
        *verified = true;
    }
    if (strcmp(e->type, ENV_TYPE_COORD) != 0) {
        snprintf(why, n, "a %s envelope arrived in a mailbox", e->type);
        return "wrong-type";
    }
    if (strcmp(e->to, mb->o->coord_id) != 0) {
        snprintf(why, n, "addressed to '%s', not to this lead", e->to);
        return "wrong-recipient";
    }
    if (env_time_parse(e->expiresAt, &exp) < 0 || env_time_parse(e->sentAt, &sent) < 0 ||
        exp - sent > mb->o->message_ttl_ms + CLOCK_SKEW_MS) {
        snprintf(why, n, "lifetime from %s to %s is longer than message_ttl", e->sentAt,
                 e->expiresAt);
        return "bad-lifetime";
    }
    if (exp + CLOCK_SKEW_MS < env_now_ms()) {
        snprintf(why, n, "expired at %s", e->expiresAt);
        return "expired";
    }
    return NULL;
}

static void wake_views(mailbox *mb, const char *line, size_t len)
{
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        g_string_append_len(v->buf, line, (gssize)len);
        if (v->ph && mb->hooks.poll_wake) {
            mb->hooks.poll_wake(mb->hooks.ud, v->ph);
            v->ph = NULL;
        }
    }
}

/* Lock held, and released here: count, log once and dead-letter e. */
static br_action refuse_locked(mailbox *mb, envelope *e, const char *reason, const char *why)
{
    count_rejection(mb, reason);
    g_mutex_unlock(&mb->lock);
    log_warn("inbox: rejected %s from %s (%s: %s); it goes to fleet.dlq", e->msgId, e->from, reason,
             why);
    env_free(e);
    changed(mb, "status");
    return BR_REJECT;
}

br_action mb_deliver(mailbox *mb, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                     size_t len)
{
    envelope e;
    char why[300];
    const char *reason;
    bool verified;
    held_msg *m;

    if (env_decode(body, len, mb->o->max_message, &e, why, sizeof why) < 0) {
        g_mutex_lock(&mb->lock);
        count_rejection(mb, "malformed");
        g_mutex_unlock(&mb->lock);
        log_warn("inbox: rejected a message (malformed: %s); it goes to fleet.dlq", why);
        changed(mb, "status");
        return BR_REJECT;
    }
    g_mutex_lock(&mb->lock);
    reason = refuse_reason(mb, &e, &verified, why, sizeof why);
    if (reason) {
        /* history and a receipt only for what a verified sender sent us
         * (an unverified sender's bytes are not worth keeping), and never
         * about a receipt */
        if (verified && !strcmp(e.type, ENV_TYPE_COORD)) {
            char now[40];
            env_time_format(env_now_ms(), now);
            history_add(mb, &e, now, "rejected", reason);
            mb_send_receipt(mb, &e, "rejected", why);
        }
        return refuse_locked(mb, &e, reason, why);
    }
    m = g_hash_table_lookup(mb->held_ids, e.msgId);
    if (m && m->epoch == epoch) /* the same msgId twice on one connection */
        return refuse_locked(mb, &e, "duplicate", "a second copy while the first is held");
    if (m) {
        /* a redelivery after a reconnect: same message, new tag */
        m->epoch = epoch;
        m->tag = tag;
        m->acking = false;
        g_mutex_unlock(&mb->lock);
        env_free(&e);
        return BR_KEEP;
    }
    if (redelivered && g_hash_table_contains(mb->consumed, e.msgId)) {
        g_mutex_unlock(&mb->lock);
        log_info("inbox: %s was already consumed (its ack was lost with a connection); "
                 "acking the redelivery",
                 e.msgId);
        env_free(&e);
        return BR_ACK;
    }
    /* seen before and not a broker redelivery: someone published it again */
    if (seen_add(mb->seen, e.msgId) == 1 && !redelivered)
        return refuse_locked(mb, &e, "replayed", "this msgId was received before");
    m = g_new0(held_msg, 1);
    m->env = e;
    m->epoch = epoch;
    m->tag = tag;
    m->redelivered = redelivered;
    env_time_format(env_now_ms(), m->received_at);
    m->line = env_inbox_line(&m->env, m->received_at, redelivered, &m->line_len);
    g_queue_push_tail(&mb->held, m);
    g_hash_table_insert(mb->held_ids, m->env.msgId, m);
    mb->held_bytes += m->line_len;
    mb->n.received++;
    touch(mb, MB_INBOX);
    wake_views(mb, m->line, m->line_len);
    g_mutex_unlock(&mb->lock);
    changed(mb, mb->inbox_path);
    changed(mb, mb->lead_status_path);
    changed(mb, "status");
    if (mb->hooks.arrived)
        mb->hooks.arrived(mb->hooks.ud);
    return BR_KEEP;
}

/* ------------------------------------------------------------------ */
/* sending                                                             */

static bool is_configured_peer(const mailbox *mb, const char *peer)
{
    for (char **p = mb->o->peers; p && *p; p++)
        if (strcmp(*p, peer) == 0)
            return true;
    return false;
}

/* Lock held. */
static sent_entry *sent_find(mailbox *mb, const char *msg_id)
{
    return g_hash_table_lookup(mb->sent_ids, msg_id);
}

static char *sent_json(const sent_entry *se)
{
    char at[40];
    json_t *j = json_object();
    char *line;
    env_time_format(se->state_at, at);
    json_object_set_new(j, "msgId", json_string(se->msg_id));
    json_object_set_new(j, "to", json_string(se->to));
    json_object_set_new(j, "sentAt", json_string(se->sent_at));
    json_object_set_new(j, "expiresAt", json_string(se->expires_at));
    json_object_set_new(j, "state", json_string(se->state));
    json_object_set_new(j, "stateAt", json_string(at));
    json_object_set_new(j, "detail", json_string(se->detail));
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return line;
}

/* Lock held: re-render se's line after it changed. */
static void sent_render(mailbox *mb, sent_entry *se)
{
    char *json = sent_json(se);
    mb->sent_bytes -= se->line_len;
    g_free(se->line);
    se->line = g_strdup_printf("%s\n", json ? json : "{}");
    se->line_len = strlen(se->line);
    mb->sent_bytes += se->line_len;
    free(json);
}

static GString *render_sent_locked(void *ud)
{
    mailbox *mb = ud;
    GString *s = g_string_sized_new(mb->sent_bytes + 1);
    for (GList *l = mb->sent.head; l; l = l->next) {
        sent_entry *se = l->data;
        g_string_append_len(s, se->line, (gssize)se->line_len);
    }
    return s;
}

static void sent_free(sent_entry *se)
{
    g_free(se->line);
    g_free(se);
}

/* se->msg_id must be set: it is the index key. */
static void sent_push(mailbox *mb, sent_entry *se)
{
    g_queue_push_tail(&mb->sent, se);
    g_hash_table_insert(mb->sent_ids, se->msg_id, se);
    while (mb->sent.length > SENT_MAX) {
        sent_entry *old = g_queue_pop_head(&mb->sent);
        g_hash_table_remove(mb->sent_ids, old->msg_id);
        mb->sent_bytes -= old->line_len;
        sent_free(old);
    }
}

/* One line of sent.jsonl at start-up: the newest line of a msgId wins. */
static void sent_load_line(mailbox *mb, const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "msgId"));
    const char *at = json_string_value(json_object_get(j, "stateAt"));
    sent_entry *se;
    int64_t ms = 0;
    if (!id || !env_id_valid(id)) {
        json_decref(j);
        return;
    }
    se = sent_find(mb, id);
    if (!se) {
        se = g_new0(sent_entry, 1);
        g_strlcpy(se->msg_id, id, sizeof se->msg_id);
        sent_push(mb, se);
    }
#define COPY(field, key) \
    g_strlcpy(se->field, json_string_value(json_object_get(j, key)) ?: "", sizeof se->field)
    COPY(to, "to");
    COPY(sent_at, "sentAt");
    COPY(expires_at, "expiresAt");
    COPY(state, "state");
    COPY(detail, "detail");
#undef COPY
    if (at && env_time_parse(at, &ms) == 0)
        se->state_at = ms;
    json_decref(j);
    sent_render(mb, se);
}

/* Lock held: se changed (or is new); persist and tell watchers. */
static void sent_changed_locked(mailbox *mb, sent_entry *se)
{
    sent_render(mb, se);
    se->line[se->line_len - 1] = '\0';
    jlog_append(mb->sent_log, se->line);
    se->line[se->line_len - 1] = '\n';
    jlog_maybe_compact(mb->sent_log, mb->sent.length, render_sent_locked, mb);
    touch(mb, MB_SENT);
    changed(mb, mb->sent_path);
}

/* How far along a delivery state is; a receipt never moves one back. */
static int state_rank(const char *state)
{
    static const char *order[] = {"unconfirmed", "published", "published-unread",
                                  "expired",     "injected",  "confirmed",
                                  "acked",       "uncertain", "rejected"};
    static const int rank[] = {0, 1, 1, 2, 3, 4, 4, 4, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++)
        if (strcmp(order[i], state) == 0)
            return rank[i];
    return -1;
}

static void sent_record(mailbox *mb, const char *msg_id, const char *to, const char *sent_at,
                        const char *expires_at, const char *state, const char *detail)
{
    sent_entry *se;
    g_mutex_lock(&mb->lock);
    se = sent_find(mb, msg_id);
    if (!se) {
        se = g_new0(sent_entry, 1);
        g_strlcpy(se->msg_id, msg_id, sizeof se->msg_id);
        g_strlcpy(se->to, to, sizeof se->to);
        g_strlcpy(se->sent_at, sent_at, sizeof se->sent_at);
        g_strlcpy(se->expires_at, expires_at, sizeof se->expires_at);
        sent_push(mb, se);
        if (strcmp(state, "unconfirmed") != 0)
            mb->n.sent++;
    }
    g_strlcpy(se->state, state, sizeof se->state);
    g_strlcpy(se->detail, detail ? detail : "", sizeof se->detail);
    se->state_at = env_now_ms();
    sent_changed_locked(mb, se);
    g_mutex_unlock(&mb->lock);
    changed(mb, "status");
}

bool mb_sent_update(mailbox *mb, const char *msg_id, const char *from, const char *state,
                    const char *detail)
{
    sent_entry *se;
    bool applied = false;
    g_mutex_lock(&mb->lock);
    se = sent_find(mb, msg_id);
    if (se && strcmp(se->to, from) == 0 && state_rank(state) > state_rank(se->state)) {
        g_strlcpy(se->state, state, sizeof se->state);
        g_strlcpy(se->detail, detail ? detail : "", sizeof se->detail);
        se->state_at = env_now_ms();
        sent_changed_locked(mb, se);
        applied = true;
    }
    g_mutex_unlock(&mb->lock);
    return applied;
}

/* Lock held: messages with no receipt by expiresAt are expired. */
static void sent_expire_locked(mailbox *mb)
{
    int64_t now = env_now_ms(), exp;
    for (GList *l = mb->sent.head; l; l = l->next) {
        sent_entry *se = l->data;
        if (state_rank(se->state) > 1 || env_time_parse(se->expires_at, &exp) < 0 || exp > now)
            continue;
        g_strlcpy(se->state, "expired", sizeof se->state);
        g_strlcpy(se->detail, "no receipt from the peer before expiresAt", sizeof se->detail);
        se->state_at = now;
        sent_changed_locked(mb, se);
    }
}

fe_code mb_send(mailbox *mb, const char *peer, const char *data, size_t len, char *detail,
                size_t dlen)
{
    envelope e;
    char *json;
    size_t jlen;
    bool unread = false;
    fe_code res;

    detail[0] = '\0';
    if (len > 0 && data[len - 1] == '\n')
        len--; /* echo's newline is not part of the message */
    if (len == 0)
        return FE_EMPTY;
    if (len > mb->o->max_message)
        return FE_TOO_BIG;
    if (!text_utf8_valid(data, len))
        return FE_BAD_UTF8;
    if (!name_valid(peer))
        return FE_NO_PEER;

    memset(&e, 0, sizeof e);
    e.v = 1;
    g_strlcpy(e.type, ENV_TYPE_COORD, sizeof e.type);
    env_new_msgid(e.msgId);
    g_strlcpy(e.from, mb->o->coord_id, sizeof e.from);
    g_strlcpy(e.to, peer, sizeof e.to);
    int64_t now = env_now_ms();
    env_time_format(now, e.sentAt);
    env_time_format(now + mb->o->message_ttl_ms, e.expiresAt);
    e.body = (char *)data;
    e.body_len = len;
    if (mb->key && sig_sign(mb->key, &e) < 0)
        return FE_INTERNAL;
    json = env_encode(&e, &jlen);
    if (!json)
        return FE_INTERNAL;
    res = br_publish(mb->br, peer, is_configured_peer(mb, peer), e.msgId, json, jlen,
                     mb->o->send_timeout_ms, &unread, detail, dlen);
    free(json);
    if (res == FE_OK)
        sent_record(mb, e.msgId, peer, e.sentAt, e.expiresAt,
                    unread ? "published-unread" : "published",
                    unread ? "the mailbox had no consumer when the broker took it" : "");
    else if (res == FE_TIMEOUT)
        sent_record(mb, e.msgId, peer, e.sentAt, e.expiresAt, "unconfirmed",
                    "no confirm within send_timeout (the write returned ETIMEDOUT); the broker "
                    "may still take it");
    if (res != FE_OK)
        log_warn("send to %s: %s (%s)%s%s", peer, fe_name(res), fe_hint(res), detail[0] ? ": " : "",
                 detail);
    return res;
}

void mb_late_confirm(mailbox *mb, const char *peer, const char *msg_id, fe_code res, bool unread)
{
    sent_entry *se;
    g_mutex_lock(&mb->lock);
    se = sent_find(mb, msg_id);
    if (se && strcmp(se->state, "unconfirmed") == 0) {
        if (res == FE_OK) {
            g_strlcpy(se->state, unread ? "published-unread" : "published", sizeof se->state);
            mb->n.sent++;
        }
        snprintf(se->detail, sizeof se->detail, "%s after the write had returned ETIMEDOUT",
                 res == FE_OK ? "confirmed by the broker" : fe_hint(res));
        se->state_at = env_now_ms();
        sent_changed_locked(mb, se);
    }
    g_mutex_unlock(&mb->lock);
    (void)peer;
}

/* ------------------------------------------------------------------ */
/* acking                                                              */

typedef struct {
    held_msg *m;
    uint64_t epoch, tag;
} ack_item;

static fe_code collect_acks(mailbox *mb, gchar **lines, GArray *items, char *detail, size_t dlen)
{
    bool all = false;
    unsigned n = 0;
    for (gchar **l = lines; *l; l++) {
        g_strstrip(*l);
        if (!**l)
            continue;
        n++;
        if (strcmp(*l, "all") == 0) {
            all = true;
        } else if (!env_id_valid(*l)) {
            snprintf(detail, dlen, "'%.40s' is neither a msgId (32 hex digits) nor 'all'", *l);
            return FE_BAD_INPUT;
        } else if (!g_hash_table_contains(mb->held_ids, *l)) {
            snprintf(detail, dlen, "%s is not held in the inbox (already acked?)", *l);
            return FE_NOT_HELD;
        }
    }
    if (n == 0) {
        snprintf(detail, dlen, "write one msgId per line, or 'all'");
        return FE_BAD_INPUT;
    }
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        bool wanted = all;
        for (gchar **s = lines; !wanted && *s; s++)
            wanted = strcmp(*s, m->env.msgId) == 0;
        if (!wanted)
            continue;
        if (m->acking && all)
            continue; /* being typed or acked right now: its owner finishes it */
        if (m->acking) {
            snprintf(detail, dlen, "%s is being acked or typed into the pane right now",
                     m->env.msgId);
            return FE_NOT_HELD;
        }
        g_array_append_val(items, ((ack_item){m, m->epoch, m->tag}));
    }
    return FE_OK;
}

static fe_code send_acks(mailbox *mb, GArray *items, bool all)
{
    br_status st;
    uint64_t max_tag = 0;
    bool one_epoch = true;
    br_get_status(mb->br, &st);
    for (guint i = 0; i < items->len; i++) {
        ack_item *it = &g_array_index(items, ack_item, i);
        if (it->epoch != st.epoch)
            return FE_NOT_CONNECTED;
        one_epoch = one_epoch && it->epoch == st.epoch;
        max_tag = MAX(max_tag, it->tag);
    }
    /* everything held is everything unacked on the channel: one ack */
    if (all && one_epoch && items->len > 0)
        return br_ack(mb->br, st.epoch, max_tag, true, mb->o->send_timeout_ms);
    for (guint i = 0; i < items->len; i++) {
        ack_item *it = &g_array_index(items, ack_item, i);
        fe_code r = br_ack(mb->br, it->epoch, it->tag, false, mb->o->send_timeout_ms);
        if (r != FE_OK)
            return r;
        it->m = NULL; /* done: keep track of partial progress */
    }
    return FE_OK;
}

fe_code mb_ack(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen)
{
    gchar *text = g_strndup(data, len);
    gchar **lines;
    GArray *items = g_array_new(FALSE, FALSE, sizeof(ack_item));
    fe_code res;
    bool all;

    detail[0] = '\0';
    if (strlen(text) != len || !text_utf8_valid(data, len)) {
        g_free(text);
        g_array_free(items, TRUE);
        snprintf(detail, dlen, "the ack file takes text: msgIds or 'all'");
        return FE_BAD_INPUT;
    }
    lines = g_strsplit(text, "\n", -1);
    g_mutex_lock(&mb->lock);
    res = collect_acks(mb, lines, items, detail, dlen);
    all = g_strv_contains((const gchar *const *)lines, "all") && items->len == mb->held.length;
    if (res == FE_OK)
        for (guint i = 0; i < items->len; i++)
            g_array_index(items, ack_item, i).m->acking = true;
    g_mutex_unlock(&mb->lock);
    if (res == FE_OK) {
        GArray *done = g_array_copy(items);
        res = send_acks(mb, done, all);
        g_mutex_lock(&mb->lock);
        for (guint i = 0; i < items->len; i++) {
            held_msg *m = g_array_index(items, ack_item, i).m;
            bool acked = res == FE_OK || g_array_index(done, ack_item, i).m == NULL;
            if (!acked) {
                m->acking = false;
                continue;
            }
            g_queue_remove(&mb->held, m);
            g_hash_table_remove(mb->held_ids, m->env.msgId);
            mb->held_bytes -= m->line_len;
            mb->n.acked++;
            history_add(mb, &m->env, m->received_at, "acked", NULL);
            mb_send_receipt(mb, &m->env, "acked", "consumed through the ack file, not typed");
            held_free(m);
        }
        touch(mb, MB_INBOX);
        mb->trim = mb->trim || items->len >= 64;
        g_mutex_unlock(&mb->lock);
        g_array_free(done, TRUE);
        changed(mb, mb->inbox_path);
        changed(mb, mb->lead_status_path);
        changed(mb, "status");
        if (res != FE_OK)
            snprintf(detail, dlen, "%s", fe_hint(res));
    }
    if (res != FE_OK)
        log_warn("ack: %s: %s", fe_name(res), detail);
    g_strfreev(lines);
    g_free(text);
    g_array_free(items, TRUE);
    return res;
}

/* ------------------------------------------------------------------ */
/* receipts                                                            */

void mb_send_receipt(mailbox *mb, const envelope *orig, const char *state, const char *detail)
{
    envelope r;
    char *json;
    size_t len;
    int64_t now = env_now_ms();

    memset(&r, 0, sizeof r);
    r.v = 1;
    g_strlcpy(r.type, ENV_TYPE_RECEIPT, sizeof r.type);
    env_new_msgid(r.msgId);
    g_strlcpy(r.from, mb->o->coord_id, sizeof r.from);
    g_strlcpy(r.to, orig->from, sizeof r.to);
    env_time_format(now, r.sentAt);
    env_time_format(now + mb->o->message_ttl_ms, r.expiresAt);
    g_strlcpy(r.ref, orig->msgId, sizeof r.ref);
    g_strlcpy(r.state, state, sizeof r.state);
    g_strlcpy(r.detail, detail ? detail : "", sizeof r.detail);
    r.body = "";
    if (mb->key && sig_sign(mb->key, &r) < 0) {
        log_err("receipt for %s: cannot sign it", orig->msgId);
        return;
    }
    json = env_encode(&r, &len);
    if (!json) {
        log_err("receipt for %s: cannot encode it", orig->msgId);
        return;
    }
    br_send_receipt(mb->br, orig->from, r.msgId, json, len);
    free(json);
}

br_action mb_receipt(mailbox *mb, const char *body, size_t len)
{
    envelope e;
    char why[300];
    if (env_decode(body, len, mb->o->max_message, &e, why, sizeof why) < 0 ||
        strcmp(e.type, ENV_TYPE_RECEIPT) != 0 || strcmp(e.to, mb->o->coord_id) != 0) {
        if (!why[0] || e.body)
            snprintf(why, sizeof why, "not a receipt addressed to %s", mb->o->coord_id);
        g_mutex_lock(&mb->lock);
        count_rejection(mb, "bad-receipt");
        g_mutex_unlock(&mb->lock);
        log_warn("receipts: rejected one (%s); it goes to fleet.dlq", why);
        env_free(&e);
        changed(mb, "status");
        return BR_REJECT;
    }
    if (!mb->o->insecure) {
        sig_result r;
        g_mutex_lock(&mb->lock);
        r = verify_locked(mb, &e);
        if (r != SIG_OK)
            count_rejection(mb, "bad-receipt");
        g_mutex_unlock(&mb->lock);
        if (r != SIG_OK) {
            log_warn("receipts: rejected one from %s about %s (%s); it goes to fleet.dlq", e.from,
                     e.ref, sig_result_name(r));
            env_free(&e);
            changed(mb, "status");
            return BR_REJECT;
        }
    }
    if (!mb_sent_update(mb, e.ref, e.from, e.state, e.detail))
        log_info("receipts: %s says %s about %s: nothing to update (unknown, or already "
                 "further along)",
                 e.from, e.state, e.ref);
    env_free(&e);
    return BR_ACK;
}

/* ------------------------------------------------------------------ */
/* the injector's side                                                 */

bool mb_next_for_injection(mailbox *mb, envelope *out)
{
    held_msg *m = NULL;
    br_status st;
    br_get_status(mb->br, &st);
    g_mutex_lock(&mb->lock);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *h = l->data;
        if (!h->acking && h->epoch == st.epoch) {
            m = h;
            break;
        }
    }
    if (m) {
        *out = m->env;
        out->body = g_memdup2(m->env.body, m->env.body_len + 1);
    }
    g_mutex_unlock(&mb->lock);
    return m != NULL;
}

bool mb_claim(mailbox *mb, const char *msg_id, bool claim)
{
    held_msg *m;
    bool ok = false;
    g_mutex_lock(&mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (m && m->acking != claim) {
        m->acking = claim;
        ok = true;
    }
    g_mutex_unlock(&mb->lock);
    return ok;
}

fe_code mb_consume(mailbox *mb, const char *msg_id, const char *how, const char *detail)
{
    held_msg *m;
    uint64_t epoch, tag;
    fe_code res;

    g_mutex_lock(&mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (!m) {
        g_mutex_unlock(&mb->lock);
        return FE_NOT_HELD;
    }
    m->acking = true;
    epoch = m->epoch;
    tag = m->tag;
    g_mutex_unlock(&mb->lock);

    res = br_ack(mb->br, epoch, tag, false, mb->o->send_timeout_ms);

    g_mutex_lock(&mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    if (m && res == FE_OK) {
        g_queue_remove(&mb->held, m);
        g_hash_table_remove(mb->held_ids, m->env.msgId);
        mb->held_bytes -= m->line_len;
        if (strcmp(how, "injected") == 0)
            mb->n.injected++;
        history_add(mb, &m->env, m->received_at, how, detail);
        mb_send_receipt(mb, &m->env, how, detail);
        held_free(m);
        touch(mb, MB_INBOX);
    } else if (m) {
        m->acking = false;
    }
    g_mutex_unlock(&mb->lock);
    changed(mb, mb->inbox_path);
    changed(mb, mb->lead_status_path);
    changed(mb, "status");
    return res;
}

void mb_set_injector(mailbox *mb, const char *words)
{
    bool same;
    g_mutex_lock(&mb->lock);
    same = mb->injector_words && strcmp(mb->injector_words, words) == 0;
    if (!same) {
        g_free(mb->injector_words);
        mb->injector_words = g_strdup(words);
    }
    g_mutex_unlock(&mb->lock);
    if (!same) {
        changed(mb, mb->lead_status_path);
        changed(mb, "status");
    }
}

char *mb_injector_words(mailbox *mb)
{
    char *w;
    g_mutex_lock(&mb->lock);
    w = g_strdup(mb->injector_words);
    g_mutex_unlock(&mb->lock);
    return w;
}

/* ------------------------------------------------------------------ */
/* inbox views                                                         */

mb_view *mb_view_open(mailbox *mb, pid_t pid)
{
    mb_view *v = g_new0(mb_view, 1);
    v->pid = pid;
    g_mutex_lock(&mb->lock);
    v->buf = g_string_sized_new(mb->held_bytes + 1);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        g_string_append_len(v->buf, m->line, (gssize)m->line_len);
    }
    mb->views = g_list_prepend(mb->views, v);
    g_mutex_unlock(&mb->lock);
    return v;
}

size_t mb_view_read(mailbox *mb, mb_view *v, char *buf, size_t size, off_t off)
{
    size_t n = 0;
    g_mutex_lock(&mb->lock);
    if (off >= 0 && (size_t)off < v->buf->len) {
        n = MIN(size, v->buf->len - (size_t)off);
        memcpy(buf, v->buf->str + off, n);
    }
    if (off >= 0)
        v->read_hi = MAX(v->read_hi, (size_t)off + n);
    g_mutex_unlock(&mb->lock);
    return n;
}

unsigned mb_view_poll(mailbox *mb, mb_view *v, struct fuse_pollhandle *ph)
{
    unsigned ev = 0;
    g_mutex_lock(&mb->lock);
    if (v->read_hi < v->buf->len)
        ev = POLLIN | POLLRDNORM;
    if (ph) {
        if (v->ph)
            fuse_pollhandle_destroy(v->ph);
        v->ph = ph;
    }
    g_mutex_unlock(&mb->lock);
    return ev;
}

void mb_view_close(mailbox *mb, mb_view *v)
{
    g_mutex_lock(&mb->lock);
    mb->views = g_list_remove(mb->views, v);
    g_mutex_unlock(&mb->lock);
    if (v->ph)
        fuse_pollhandle_destroy(v->ph);
    g_string_free(v->buf, TRUE);
    g_free(v);
}

size_t mb_inbox_size(mailbox *mb, pid_t pid)
{
    size_t size = 0;
    bool own = false;
    g_mutex_lock(&mb->lock);
    for (GList *l = mb->views; l; l = l->next) {
        mb_view *v = l->data;
        if (v->pid == pid) {
            size = own ? MAX(size, v->buf->len) : v->buf->len;
            own = true;
        }
    }
    if (!own)
        size = mb->held_bytes;
    g_mutex_unlock(&mb->lock);
    return size;
}

/* ------------------------------------------------------------------ */
/* rendering                                                           */

GString *mb_render(mailbox *mb, mb_file f)
{
    GString *s;
    g_mutex_lock(&mb->lock);
    s = f == MB_SENT ? render_sent_locked(mb) : render_history_locked(mb);
    g_mutex_unlock(&mb->lock);
    return s;
}

void mb_counters_get(mailbox *mb, mb_counters *out, unsigned *held)
{
    g_mutex_lock(&mb->lock);
    *out = mb->n;
    if (held)
        *held = mb->held.length;
    g_mutex_unlock(&mb->lock);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(a, b);
}

GString *mb_render_rejections(mailbox *mb)
{
    GString *s = g_string_new(NULL);
    GList *keys;
    g_mutex_lock(&mb->lock);
    keys = g_list_sort(g_hash_table_get_keys(mb->rejections), cmp_str);
    for (GList *l = keys; l; l = l->next)
        g_string_append_printf(s, "rejected_%s: %u\n", (char *)l->data,
                               GPOINTER_TO_UINT(g_hash_table_lookup(mb->rejections, l->data)));
    g_list_free(keys);
    g_mutex_unlock(&mb->lock);
    return s;
}

size_t mb_size(mailbox *mb, mb_file f)
{
    size_t n;
    g_mutex_lock(&mb->lock);
    n = f == MB_SENT ? mb->sent_bytes : f == MB_HISTORY ? mb->history_bytes : mb->held_bytes;
    g_mutex_unlock(&mb->lock);
    return n;
}

int64_t mb_mtime(mailbox *mb, mb_file f)
{
    int64_t t;
    g_mutex_lock(&mb->lock);
    t = mb->mtime[f];
    g_mutex_unlock(&mb->lock);
    return t;
}

void mb_tick(mailbox *mb)
{
    br_status st;
    int64_t now = g_get_monotonic_time() / 1000;
    bool dropped = false;

    br_get_status(mb->br, &st);
    g_mutex_lock(&mb->lock);
    if (st.consumer != BR_CONS_OK) {
        mb->ok_epoch = 0;
    } else if (mb->ok_epoch != st.epoch) {
        mb->ok_epoch = st.epoch;
        mb->ok_since = now;
    } else if (now - mb->ok_since >= STALE_GRACE_MS) {
        for (GList *l = mb->held.head, *next; l; l = next) {
            held_msg *m = l->data;
            next = l->next;
            if (m->epoch == st.epoch)
                continue;
            log_info("inbox: forgetting %s: held on a lost connection and not redelivered "
                     "(consumed elsewhere?)",
                     m->env.msgId);
            g_queue_delete_link(&mb->held, l);
            g_hash_table_remove(mb->held_ids, m->env.msgId);
            mb->held_bytes -= m->line_len;
            held_free(m);
            dropped = true;
        }
    }
    if (dropped)
        touch(mb, MB_INBOX);
    sent_expire_locked(mb);
    bool trim = mb->trim;
    mb->trim = false;
    g_mutex_unlock(&mb->lock);
    /* glibc keeps freed heap; after a big ack it is worth returning */
    if (trim)
        malloc_trim(0);
    if (dropped) {
        changed(mb, mb->inbox_path);
        changed(mb, mb->lead_status_path);
    }
}
