/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/sent.c — sending, and the sent log's state machine (SPEC 4).
 *
 * One write to peers/<id>/send becomes one signed envelope, published and
 * confirmed (or not) within send_timeout.  Every message whose fate is not
 * "nothing was published" gets an entry: published / published-unread on
 * a confirm, unconfirmed when the state is unknown (no confirm in time, or
 * the connection was lost after the publish left).  Nothing moves an entry
 * back (state_rank): not a receipt, not the sender's own outcome of a
 * resend that a receipt overtook, not a timeout.  What arrives before the
 * outcome is recorded — a receipt, or the broker's late confirm of a write
 * that gave up — waits in `inflight` and is applied right after the
 * record.  No word by expiresAt plus expire_grace (this host's clock)
 * → expired, "expiredBy":"sender"; the receiver's own `expired` receipt
 * (it dropped the message unread past expiresAt) says "expiredBy":
 * "receiver", and replaces the sender's own conclusion whenever it comes,
 * as any later receipt does (never the reverse).
 * The newest SENT_MAX entries are kept, persisted as JSON Lines in
 * state_dir/sent.jsonl (an applog; the newest line of a msgId wins).
 *
 * A broadcast (to "group:<g>", SPEC 10) is one publish and one entry, with
 * `recipients`: each member's id and its own state.  The members presence
 * knew at send time start as what the publish said; a member it did not
 * know joins with its first receipt.  Each recipient moves forward only,
 * by its own receipts, and the entry's state is the least advanced of
 * its recipients' (before any is known: what the publish said).
 */
#include "fleetfs/model/mb_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/base/duration.h"
#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

#define SENT_LINE_MAX 8192

typedef struct {
    char msg_id[ENV_ID_LEN + 1];
    char to[ADDR_MAX_LEN + 1];
    char sent_at[40];
    char expires_at[40];
    char state[24];
    char expired_by[12]; /* state expired: "sender" (own clock) or "receiver" (its receipt) */
    int64_t state_at;
    char detail[256];
    GHashTable *recipients; /* broadcasts: id -> state (g_strdup'd both); NULL otherwise */
    char *env;              /* while unconfirmed: the signed envelope, for resend */
    char *line;             /* rendered, "\n"-terminated: getattr and open cost no JSON */
    size_t line_len;
} sent_entry;

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
    if (!strcmp(se->state, "expired") && se->expired_by[0])
        json_object_set_new(j, "expiredBy", json_string(se->expired_by));
    if (se->recipients) {
        json_t *r = json_object();
        GList *ids = g_list_sort(g_hash_table_get_keys(se->recipients), (GCompareFunc)strcmp);
        for (GList *l = ids; l; l = l->next)
            json_object_set_new(r, l->data,
                                json_string(g_hash_table_lookup(se->recipients, l->data)));
        g_list_free(ids);
        json_object_set_new(j, "recipients", r);
    }
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return line;
}

/* Re-render se's line after it changed. */
static void sent_render_entry(mailbox *mb, sent_entry *se)
{
    char *json = sent_json(se);
    mb->sent_bytes -= se->line_len;
    g_free(se->line);
    se->line = g_strdup_printf("%s\n", json ? json : "{}");
    se->line_len = strlen(se->line);
    mb->sent_bytes += se->line_len;
    free(json);
}

GString *sent_render_locked(mailbox *mb)
{
    GString *s = g_string_sized_new(mb->sent_bytes + 1);
    for (GList *l = mb->sent.head; l; l = l->next) {
        sent_entry *se = l->data;
        g_string_append_len(s, se->line, (gssize)se->line_len);
    }
    return s;
}

static void sent_free(sent_entry *se)
{
    if (se->recipients)
        g_hash_table_destroy(se->recipients);
    g_free(se->env);
    g_free(se->line);
    g_free(se);
}

/* The line sent.jsonl keeps: the rendered one, plus the envelope while it
 * may be resent (g_free). */
static char *sent_persist_line(const sent_entry *se)
{
    json_t *j;
    char *out, *tmp;
    if (!se->env)
        return g_strndup(se->line, se->line_len - 1);
    j = json_loadb(se->line, se->line_len, 0, NULL);
    json_object_set_new(j, "env", json_string(se->env));
    tmp = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    out = g_strdup(tmp ? tmp : "{}");
    free(tmp);
    return out;
}

static GString *sent_persist_render_locked(mailbox *mb)
{
    GString *s = g_string_sized_new(mb->sent_bytes + 1);
    for (GList *l = mb->sent.head; l; l = l->next) {
        char *line = sent_persist_line(l->data);
        g_string_append(s, line);
        g_string_append_c(s, '\n');
        g_free(line);
    }
    return s;
}

static void early_free(void *er);

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
    COPY(expired_by, "expiredBy");
#undef COPY
    if (json_is_object(json_object_get(j, "recipients"))) {
        const char *rid;
        json_t *rst;
        if (!se->recipients)
            se->recipients = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        json_object_foreach(json_object_get(j, "recipients"), rid,
                            rst) if (id_valid(rid) && json_string_value(rst))
            g_hash_table_replace(se->recipients, g_strdup(rid), g_strdup(json_string_value(rst)));
    }
    if (at && env_time_parse(at, &ms) == 0)
        se->state_at = ms;
    g_free(se->env);
    se->env =
        g_strcmp0(se->state, "unconfirmed") == 0 && json_string_value(json_object_get(j, "env"))
            ? g_strdup(json_string_value(json_object_get(j, "env")))
            : NULL;
    json_decref(j);
    sent_render_entry(mb, se);
}

void sent_load(mailbox *mb)
{
    GPtrArray *lines = NULL;
    char *err = NULL;
    char *path = g_build_filename(mb->state_dir, "sent.jsonl", NULL);
    mb->inflight = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, early_free);
    mb->sent_log = applog_open(path, APPLOG_WRITE, SENT_LINE_MAX, &lines, &err);
    if (!mb->sent_log) {
        log_warn("sent: cannot open %s; the sent log will not survive a restart", err);
        g_free(err);
    } else {
        mb_warn_if_degraded(mb->sent_log, "sent");
        for (guint i = 0; i < lines->len; i++)
            sent_load_line(mb, lines->pdata[i]);
        g_ptr_array_free(lines, TRUE);
    }
    g_free(path);
}

void sent_close(mailbox *mb)
{
    g_hash_table_destroy(mb->inflight);
    sent_entry *se;
    while ((se = g_queue_pop_head(&mb->sent)))
        sent_free(se);
    applog_close(mb->sent_log);
}

static GString *persist_render_cb(void *mb)
{
    return sent_persist_render_locked(mb);
}

/* se changed (or is new): persist and tell watchers. */
static void sent_changed_locked(mailbox *mb, sent_entry *se)
{
    int rc = -1;
    if (strcmp(se->state, "unconfirmed") != 0) {
        g_free(se->env); /* its fate is known: nothing to resend */
        se->env = NULL;
    }
    sent_render_entry(mb, se);
    if (mb->sent_log) {
        char *line = sent_persist_line(se);
        rc = applog_add(mb->sent_log, line, mb->sent.length, persist_render_cb, mb);
        g_free(line);
    }
    if (rc < 0 && !mb->sent_warned)
        log_warn("sent: cannot write %s/sent.jsonl; delivery states will not survive a "
                 "restart: free space or fix permissions",
                 mb->state_dir);
    mb->sent_warned = rc < 0;
    mb_touch_locked(mb, MB_SENT);
    mb_changed(mb, mb->sent_path);
}

/* How far along a delivery state is; a receipt never moves one back. */
static int state_rank(const char *state)
{
    static const char *order[] = {
        "unconfirmed", "published", "published-unread", "expired",  "injected",
        "confirmed",   "acked",     "uncertain",        "rejected", "dead-lettered"};
    static const int rank[] = {0, 1, 1, 2, 3, 4, 4, 4, 4, 2};
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++)
        if (strcmp(order[i], state) == 0)
            return rank[i];
    return -1;
}

/* Whether an entry in state `from` may move to `to`: only forward, and an
 * unconfirmed entry may be re-stamped (a resend that timed out again). */
static bool sent_moves(const char *from, const char *to)
{
    if (!strcmp(from, "unconfirmed") && !strcmp(to, "unconfirmed"))
        return true;
    return state_rank(to) > state_rank(from);
}

/* The sender's own outcome of a publish (published, published-unread or
 * unconfirmed); like a receipt, it never moves the entry back: a receipt
 * or a late confirm may have moved it on while the publish waited.
 * json: the signed envelope, kept while the state is unconfirmed */
static void sent_record(mailbox *mb, const envelope *e, const char *json, const char *state,
                        const char *detail, char *const *members)
{
    sent_entry *se;
    g_mutex_lock(mb->lock);
    se = sent_find(mb, e->msgId);
    if (!se) {
        se = g_new0(sent_entry, 1);
        g_strlcpy(se->msg_id, e->msgId, sizeof se->msg_id);
        g_strlcpy(se->to, e->to, sizeof se->to);
        if (g_str_has_prefix(e->to, GROUP_PREFIX)) {
            se->recipients = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
            for (char *const *m = members; m && *m; m++)
                g_hash_table_replace(se->recipients, g_strdup(*m), g_strdup(state));
        }
        g_strlcpy(se->sent_at, e->sentAt, sizeof se->sent_at);
        g_strlcpy(se->expires_at, e->expiresAt, sizeof se->expires_at);
        sent_push(mb, se);
        if (strcmp(state, "unconfirmed") != 0)
            mb->n.sent++;
    } else if (!sent_moves(se->state, state)) {
        log_info("send %s to %s: %s after all, but it is %s already: kept", e->msgId, e->to, state,
                 se->state);
        g_mutex_unlock(mb->lock);
        return;
    } else if (!strcmp(se->state, "unconfirmed") && strcmp(state, "unconfirmed") != 0) {
        mb->n.sent++; /* a resend got its confirm */
    }
    g_strlcpy(se->state, state, sizeof se->state);
    g_strlcpy(se->detail, detail ? detail : "", sizeof se->detail);
    se->state_at = env_now_ms();
    if (!strcmp(state, "unconfirmed") && !se->env)
        se->env = g_strdup(json);
    sent_changed_locked(mb, se);
    g_mutex_unlock(mb->lock);
    mb_changed(mb, "status");
}

/* What arrived while a message's publish was still waiting, before its
 * outcome was recorded: a receipt (the peer can refuse or type a message
 * before our confirm comes back), and the broker's late confirm (it can
 * come between the write giving up and the write recording unconfirmed). */
typedef struct {
    char from[ADDR_MAX_LEN + 1]; /* the recipient */
    char state[24];
    char detail[256];
} early_one;

typedef struct {
    GArray *receipts; /* early_one: the most advanced per recipient */
    bool late;        /* a late confirm came: */
    fe_code late_res;
    bool late_unread;
} early_receipt;

static void early_free(void *p)
{
    early_receipt *er = p;
    if (er)
        g_array_free(er->receipts, TRUE);
    g_free(er);
}

/* A broadcast's state: the least advanced of its recipients'. */
static void group_state_locked(sent_entry *se)
{
    GHashTableIter it;
    gpointer k, v;
    const char *least = NULL;
    g_hash_table_iter_init(&it, se->recipients);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!least || state_rank(v) < state_rank(least))
            least = v;
    if (least && state_rank(least) > state_rank(se->state))
        g_strlcpy(se->state, least, sizeof se->state);
}

/* The exceptions to "only forward" among the states of rank 2: the
 * broker's word (dead-lettered) replaces the sender's own conclusion
 * (expired by its clock), and the receiver's word (any receipt: it handled
 * a copy, e.g. one the operator redrove) replaces the broker's. */
static bool replaces(const char *was, const char *was_by, const char *state)
{
    if (!strcmp(was, "expired") && !strcmp(was_by, "sender"))
        return !strcmp(state, "expired") || !strcmp(state, "dead-lettered");
    if (!strcmp(was, "dead-lettered"))
        return strcmp(state, "dead-lettered") != 0 && state_rank(state) >= 2;
    return false;
}

static bool apply_locked(mailbox *mb, sent_entry *se, const char *from, const char *state,
                         const char *detail)
{
    if (se->recipients) {
        const char *was = g_hash_table_lookup(se->recipients, from);
        if (was && state_rank(state) <= state_rank(was) && !replaces(was, "", state))
            return false;
        g_hash_table_replace(se->recipients, g_strdup(from), g_strdup(state));
        group_state_locked(se);
        /* every recipient's own expired made the entry expired */
        if (!se->expired_by[0] && !strcmp(se->state, "expired"))
            g_strlcpy(se->expired_by, "receiver", sizeof se->expired_by);
        snprintf(se->detail, sizeof se->detail, "%s: %s%s%s", from, state,
                 detail && *detail ? ": " : "", detail ? detail : "");
        se->state_at = env_now_ms();
        sent_changed_locked(mb, se);
        return true;
    }
    if (strcmp(se->to, from) != 0)
        return false;
    /* the receiver's word replaces the sender's own conclusion, and the
     * broker's; the broker's replaces the sender's (replaces) */
    if (state_rank(state) <= state_rank(se->state) && !replaces(se->state, se->expired_by, state))
        return false;
    g_strlcpy(se->expired_by, "receiver", sizeof se->expired_by);
    g_strlcpy(se->state, state, sizeof se->state);
    g_strlcpy(se->detail, detail ? detail : "", sizeof se->detail);
    se->state_at = env_now_ms();
    sent_changed_locked(mb, se);
    ask_sent_state_locked(mb, se->msg_id, state, detail);
    return true;
}

static early_receipt *early_new_locked(mailbox *mb, const char *msg_id)
{
    early_receipt *er = g_new0(early_receipt, 1);
    er->receipts = g_array_new(FALSE, TRUE, sizeof(early_one));
    g_hash_table_insert(mb->inflight, g_strdup(msg_id), er);
    return er;
}

bool mb_sent_update(mailbox *mb, const char *msg_id, const char *from, const char *state,
                    const char *detail)
{
    sent_entry *se;
    bool applied = false;
    early_receipt *er;
    g_mutex_lock(mb->lock);
    se = sent_find(mb, msg_id);
    if (se) {
        applied = apply_locked(mb, se, from, state, detail);
    } else if (g_hash_table_lookup_extended(mb->inflight, msg_id, NULL, (gpointer *)&er)) {
        /* kept until the publish returns (publish_and_record): the most
         * advanced per recipient */
        early_one *one = NULL;
        if (!er)
            er = early_new_locked(mb, msg_id);
        for (guint i = 0; i < er->receipts->len && !one; i++)
            if (!strcmp(g_array_index(er->receipts, early_one, i).from, from))
                one = &g_array_index(er->receipts, early_one, i);
        if (!one) {
            g_array_set_size(er->receipts, er->receipts->len + 1);
            one = &g_array_index(er->receipts, early_one, er->receipts->len - 1);
            g_strlcpy(one->from, from, sizeof one->from);
        }
        if (!one->state[0] || state_rank(state) > state_rank(one->state)) {
            g_strlcpy(one->state, state, sizeof one->state);
            g_strlcpy(one->detail, detail ? detail : "", sizeof one->detail);
        }
        applied = true;
    }
    g_mutex_unlock(mb->lock);
    return applied;
}

bool sent_names_locked(mailbox *mb, const char *msg_id, const char *peer)
{
    sent_entry *se = sent_find(mb, msg_id);
    if (se)
        /* a broadcast's receipts come from its members, whoever they are */
        return se->recipients || strcmp(se->to, peer) == 0;
    /* its publish still waits for the confirm: the peer is checked when
     * the early receipt is applied (apply_locked) */
    return g_hash_table_contains(mb->inflight, msg_id);
}

void sent_expire_locked(mailbox *mb)
{
    int64_t now = env_now_ms(), exp;
    for (GList *l = mb->sent.head; l; l = l->next) {
        sent_entry *se = l->data;
        if (state_rank(se->state) > 1 || env_time_parse(se->expires_at, &exp) < 0 ||
            exp + mb->o->expire_grace_ms > now)
            continue;
        g_strlcpy(se->state, "expired", sizeof se->state);
        g_strlcpy(se->expired_by, "sender", sizeof se->expired_by);
        snprintf(se->detail, sizeof se->detail,
                 "no receipt from %s by expiresAt + %lld ms (expire_grace, this host's clock); "
                 "a receipt that comes later replaces this",
                 se->to, (long long)mb->o->expire_grace_ms);
        se->state_at = now;
        sent_changed_locked(mb, se);
    }
}

static bool is_configured_peer(const mailbox *mb, const char *peer)
{
    for (char **p = mb->o->peers; p && *p; p++)
        if (strcmp(*p, peer) == 0)
            return true;
    return false;
}

/* The checks a write gets before anything is published. */
static fe_code send_input_ok(const mailbox *mb, const char *peer, const char *data, size_t len)
{
    if (len == 0)
        return FE_EMPTY;
    if (len > mb->o->max_message)
        return FE_TOO_BIG;
    if (!text_utf8_valid(data, len))
        return FE_BAD_UTF8;
    if (!addr_parse(peer, &(addr){0}))
        return FE_NO_PEER;
    return FE_OK;
}

/* The "published-unread" and "published; not known whether read" lines:
 * every send to a mailbox nobody reads would otherwise log one (and cost a
 * write(2) each).  One line per peer and kind (unread, unread and the peer
 * not live, unknown) per SEND_LOG_EVERY_MS; the first send of a streak that
 * is not logged says so once, the next line logged says how many were
 * not.  A new kind (the peer went stale) is logged at once.  `sent` records
 * every message, whatever the log says. */
static bool send_log_allowed(mailbox *mb, const char *to, const char *kind)
{
    char key[ADDR_MAX_LEN + 32];
    int r;
    snprintf(key, sizeof key, "%s\n%s", to, kind);
    g_mutex_lock(mb->lock);
    r = rate_take_locked(mb->h->send_logs, key, 1, SEND_LOG_EVERY_MS);
    g_mutex_unlock(mb->lock);
    if (r == -1)
        log_info("send: more sends to %s are %s: one line a minute for them (`sent` records "
                 "each)",
                 to,
                 !strcmp(kind, "unknown") ? "published without knowing whether read"
                                          : "published-unread");
    else if (r > 0)
        log_info("send: %d sends to %s were %s and not logged", r, to,
                 !strcmp(kind, "unknown") ? "published without knowing whether read"
                                          : "published-unread");
    return r >= 0;
}

/* Confirmed into the mailbox: published-unread when nobody reads it (the
 * probe at publish saw no consumer), else published.  A mailbox with a
 * reader but no heartbeat from its peer (another implementation of
 * doc/protocol.md, or presence off there) is published, with the missing
 * heartbeat in detail: it is read, only we cannot see by whom. */
static void send_published(mailbox *mb, const envelope *e, const char *json, bool no_consumer,
                           const char *unknown, char *const *members)
{
    char why[160] = "", detail[256];
    /* a lead's presence, or an agent's: its host's, and whether that
     * host's heartbeat lists it; a group has none of its own */
    bool away = !members && mb->hooks.peer_live &&
                mb->hooks.peer_live(mb->hooks.ud, e->to, why, sizeof why) == 0;
    if (!no_consumer && unknown && *unknown) {
        /* published without knowing whether it is read: say so, never
         * let "published" claim a reader nobody saw */
        sent_record(mb, e, json, "published", unknown, members);
        if (send_log_allowed(mb, e->to, "unknown"))
            log_info("send %s to %s: published; %s", e->msgId, e->to, unknown);
        return;
    }
    if (!no_consumer) {
        if (away)
            snprintf(detail, sizeof detail,
                     "the mailbox has a reader, but %s: not a fleetfs we can see, or its "
                     "presence is off",
                     why);
        sent_record(mb, e, json, "published", away ? detail : "", members);
        return;
    }
    snprintf(detail, sizeof detail, "no consumer%s%s", away ? "; " : "", away ? why : "");
    sent_record(mb, e, json, "published-unread", detail, members);
    if (send_log_allowed(mb, e->to, away ? "unread-away" : "unread"))
        log_info("send %s to %s: published-unread (%s); it waits in the mailbox until %s reads it",
                 e->msgId, e->to, detail, e->to);
}

/* The broker's answer to a publish whose write had given up (ETIMEDOUT):
 * it settles an entry that is still unconfirmed, and nothing else. */
static void late_confirm_locked(mailbox *mb, sent_entry *se, fe_code res, bool unread)
{
    if (strcmp(se->state, "unconfirmed") != 0)
        return;
    if (res == FE_OK) {
        g_strlcpy(se->state, unread ? "published-unread" : "published", sizeof se->state);
        mb->n.sent++;
    }
    if (res == FE_OK)
        snprintf(se->detail, sizeof se->detail,
                 "confirmed by the broker after the write had returned ETIMEDOUT");
    else if (res == FE_FULL || res == FE_NO_MAILBOX)
        snprintf(se->detail, sizeof se->detail,
                 "refused by the broker after the write had returned ETIMEDOUT (%s): it is "
                 "not in the mailbox",
                 fe_name(res));
    else
        snprintf(se->detail, sizeof se->detail,
                 "still unknown after the write had returned ETIMEDOUT (%s): it may or may "
                 "not be in the mailbox; write its msgId to resend to publish it again",
                 fe_name(res));
    se->state_at = env_now_ms();
    sent_changed_locked(mb, se);
}

/* After the publish returned and was recorded: a receipt or a late confirm
 * that came first moves the entry on. */
static void apply_early_receipt(mailbox *mb, const char *msg_id)
{
    early_receipt *er = NULL;
    char *key = NULL;
    sent_entry *se;
    g_mutex_lock(mb->lock);
    g_hash_table_steal_extended(mb->inflight, msg_id, (gpointer *)&key, (gpointer *)&er);
    se = sent_find(mb, msg_id);
    for (guint i = 0; er && se && i < er->receipts->len; i++) {
        early_one *one = &g_array_index(er->receipts, early_one, i);
        apply_locked(mb, se, one->from, one->state, one->detail);
    }
    if (er && se && er->late)
        late_confirm_locked(mb, se, er->late_res, er->late_unread);
    g_mutex_unlock(mb->lock);
    g_free(key);
    early_free(er);
}

/* The members a broadcast to g is expected to reach (presence's view at
 * send time), without the sender's host's own entities, which do not get
 * their own broadcast; NULL when the hook is not there. */
static char **group_members(mailbox *mb, const char *g)
{
    char **all, **out;
    GPtrArray *keep;
    char host[NAME_MAX_LEN + 1];
    if (!mb->hooks.group_members)
        return g_new0(char *, 1);
    all = mb->hooks.group_members(mb->hooks.ud, g);
    keep = g_ptr_array_new();
    for (char **m = all; m && *m; m++)
        if (!id_host(*m, host) || strcmp(host, mb->o->coord_id) != 0)
            g_ptr_array_add(keep, g_strdup(*m));
    g_ptr_array_add(keep, NULL);
    out = (char **)g_ptr_array_free(keep, FALSE);
    g_strfreev(all);
    return out;
}

/* A send on its way (SPEC section 6, revised): signed and encoded by the
 * writer's thread, its outcome recorded and told by whichever thread gets
 * it, the publishing thread when the broker seam publishes without
 * waiting. */
typedef struct {
    mailbox *mb; /* a ref */
    envelope e;  /* the header; body NULL (the writer's buffer is gone) */
    char *json;  /* the signed envelope, kept while unconfirmed */
    size_t jlen;
    char **members; /* a broadcast's, as presence knew them at send time */
    mb_send_done done;
    void *ud;
} send_job;

static void job_free(send_job *j)
{
    mb_unref(j->mb);
    free(j->json);
    g_strfreev(j->members);
    g_free(j);
}

/* The outcome res of j's publish: record it in sent (published, unread,
 * unconfirmed), apply what overtook it, log.  detail may be rewritten. */
static void send_settle(send_job *j, fe_code res, bool unread, char *detail, size_t dlen)
{
    mailbox *mb = j->mb;
    const envelope *e = &j->e;
    if (res == FE_OK)
        send_published(mb, e, j->json, unread, detail, j->members);
    else if (res == FE_TIMEOUT)
        sent_record(mb, e, j->json, "unconfirmed",
                    detail[0] ? detail
                              : "no confirm within send_timeout (the write returned ETIMEDOUT); "
                                "the broker may still take it; write its msgId to resend to "
                                "publish the same message again",
                    j->members);
    apply_early_receipt(mb, e->msgId);
    if (res == FE_NO_MAILBOX && j->members)
        snprintf(detail, dlen, "no member of %s has a mailbox bound to it: nothing was sent",
                 e->to);
    else if (res == FE_NO_MAILBOX && strchr(e->to, '@'))
        snprintf(detail, dlen,
                 "no mailbox is bound to %s on %s: no such agent (ls agents/), or "
                 "it was retired; nothing was sent",
                 e->to, MB_EXCHANGE_MSG);
    if (res == FE_NO_MAILBOX && (j->members || strchr(e->to, '@')))
        /* the lead's hint (start its fleetfs, host add) does not fit here */
        log_warn("send %s to %s: %s: %s", e->msgId, e->to, fe_name(res), detail);
    else if (res != FE_OK)
        log_warn("send %s to %s: %s (%s)%s%s", e->msgId, e->to, fe_name(res), fe_hint(res),
                 detail[0] ? ": " : "", detail);
}

/* The broker seam's answer to a publish handed over (br_publish_done): on
 * the publishing thread, which records the `sent` line and tells the
 * writer itself: no hand-off back. */
static void send_answered(void *ud, fe_code res, bool unread, const char *bdetail)
{
    send_job *j = ud;
    char detail[512];
    g_strlcpy(detail, bdetail ? bdetail : "", sizeof detail);
    send_settle(j, res, unread, detail, sizeof detail);
    j->done(j->ud, res, detail);
    job_free(j);
}

/* Hand j's envelope to the broker by its route (SPEC 10): a lead's mailbox
 * through the default exchange (as ever), an agent's through fleet.msg
 * with its gid, a group through fleet.msg with broadcast.<g>: one
 * publish, the broker copies it to every member.  *handed: the seam took
 * it without waiting (send_answered is told, maybe already; j is not
 * ours any more); else the result is the outcome (or a refusal). */
static fe_code route_publish(send_job *j, bool *handed, bool *unread, char *detail, size_t dlen)
{
    mailbox *mb = j->mb;
    const envelope *e = &j->e;
    const mb_broker *br = &mb->h->br;
    int64_t timeout = mb->o->send_timeout_ms, exp, ttl = 0;
    char key[ADDR_MAX_LEN + 16], queue[ADDR_MAX_LEN + 16];
    const char *probe = NULL;
    addr a;
    fe_code res;

    *handed = false;
    if (!addr_parse(e->to, &a))
        return FE_NO_PEER;
    /* the AMQP per-message expiration: what is left of its lifetime, so
     * the broker drops it itself at expiresAt (at least 1 ms: 0 would mean
     * "deliver now or drop") */
    if (env_time_parse(e->expiresAt, &exp) == 0)
        ttl = MAX(exp - env_now_ms(), 1);
    if (a.kind == ADDR_LEAD) {
        bool create = is_configured_peer(mb, e->to);
        if (!br->publish_start)
            return br->publish(br->b, e->to, create, e->msgId, j->json, j->jlen, ttl, timeout,
                               unread, detail, dlen);
        res = br->publish_start(br->b, e->to, create, e->msgId, j->json, j->jlen, ttl, timeout,
                                send_answered, j, detail, dlen);
        *handed = res == FE_OK;
        return res;
    }
    if (!br->publish_route) {
        snprintf(detail, dlen, "this broker seam cannot route to agents or groups");
        return FE_INTERNAL;
    }
    if (a.kind == ADDR_AGENT) {
        snprintf(queue, sizeof queue, "agent.%s.inbox", e->to);
        g_strlcpy(key, e->to, sizeof key);
        probe = queue;
    } else {
        snprintf(key, sizeof key, "broadcast.%s", a.name);
    }
    if (!br->publish_route_start)
        return br->publish_route(br->b, MB_EXCHANGE_MSG, key, probe, e->msgId, j->json, j->jlen,
                                 ttl, timeout, unread, detail, dlen);
    res = br->publish_route_start(br->b, MB_EXCHANGE_MSG, key, probe, e->msgId, j->json, j->jlen,
                                  ttl, timeout, send_answered, j, detail, dlen);
    *handed = res == FE_OK;
    return res;
}

/* Publish json (e's envelope, json malloc'd: taken) for mb and record the
 * outcome.  While it waits, e's msgId is in `inflight`, where what
 * overtakes the record waits.  FE_OK: done is told (now or later, once);
 * anything else is the outcome, known at once, and done is not told. */
static fe_code send_go(mailbox *mb, const envelope *e, char *json, size_t jlen, mb_send_done done,
                       void *ud, char *detail, size_t dlen)
{
    send_job *j = g_new0(send_job, 1);
    bool unread = false, handed;
    fe_code res;

    j->mb = mb_ref(mb);
    j->e = *e;
    j->e.body = NULL; /* the writer's (or the decoder's): not ours */
    j->e.body_len = 0;
    j->json = json;
    j->jlen = jlen;
    j->members = g_str_has_prefix(e->to, GROUP_PREFIX)
                     ? group_members(mb, e->to + strlen(GROUP_PREFIX))
                     : NULL;
    j->done = done;
    j->ud = ud;
    g_mutex_lock(mb->lock);
    g_hash_table_insert(mb->inflight, g_strdup(e->msgId), NULL);
    g_mutex_unlock(mb->lock);
    res = route_publish(j, &handed, &unread, detail, dlen);
    if (handed)
        return FE_OK;
    send_settle(j, res, unread, detail, dlen);
    if (res == FE_OK)
        done(ud, res, detail);
    job_free(j);
    return res;
}

/* One message: validate, wrap with a lifetime of life_ms, sign and encode
 * (on the caller's thread), hand over; send_go's results.  ask (may be
 * NULL): the question of an ask, registered before it is handed over, so
 * that no answer can overtake it. */
static fe_code send_one(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                        size_t len, int64_t life_ms, mb_ask *ask, mb_send_done done, void *ud,
                        char *detail, size_t dlen)
{
    envelope e;
    char *json;
    size_t jlen;
    fe_code res;
    int64_t now = env_now_ms();

    detail[0] = '\0';
    if ((res = send_input_ok(mb, peer, data, len)) == FE_OK && reply_to && !env_id_valid(reply_to))
        res = FE_BAD_INPUT;
    if (res != FE_OK) {
        /* the writer sees only the errno: the log says which rule and what to do */
        log_warn("send to %s: refused, nothing was sent: %s (%s)", peer, fe_name(res),
                 fe_hint(res));
        return res;
    }

    memset(&e, 0, sizeof e);
    e.v = 1;
    g_strlcpy(e.type, ENV_TYPE_COORD, sizeof e.type);
    env_new_msgid(e.msgId);
    g_strlcpy(e.from, mb->id, sizeof e.from);
    g_strlcpy(e.to, peer, sizeof e.to);
    env_time_format(now, e.sentAt);
    env_time_format(now + life_ms, e.expiresAt);
    if (reply_to)
        g_strlcpy(e.replyTo, reply_to, sizeof e.replyTo);
    e.body = (char *)data;
    e.body_len = len;
    if (mb->h->key && sig_sign(mb->h->key, &e) < 0)
        return FE_INTERNAL;
    json = env_encode(&e, &jlen);
    if (!json)
        return FE_INTERNAL;
    if (ask) {
        g_mutex_lock(mb->lock);
        ask_register_locked(mb, ask, &e);
        g_mutex_unlock(mb->lock);
    }
    return send_go(mb, &e, json, jlen, done, ud, detail, dlen);
}

int64_t sent_default_life(const mailbox *mb)
{
    return mb->o->expires_in_ms > 0 ? mb->o->expires_in_ms : mb->o->message_ttl_ms;
}

fe_code mb_send_start(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                      size_t len, mb_send_done done, void *ud, char *detail, size_t dlen)
{
    if (len > 0 && data[len - 1] == '\n')
        len--; /* echo's newline is not part of the message */
    return send_one(mb, peer, reply_to, data, len, sent_default_life(mb), NULL, done, ud, detail,
                    dlen);
}

/* The blocking forms wait for done on a condition of their own. */
typedef struct {
    GMutex m;
    GCond cv;
    bool done;
    fe_code res;
    char detail[512];
} send_wait;

static void send_wait_done(void *ud, fe_code res, const char *detail)
{
    send_wait *w = ud;
    g_mutex_lock(&w->m);
    w->res = res;
    g_strlcpy(w->detail, detail ? detail : "", sizeof w->detail);
    w->done = true;
    g_cond_signal(&w->cv); /* under the lock: w lives on the waiter's stack */
    g_mutex_unlock(&w->m);
}

static void send_wait_init(send_wait *w)
{
    memset(w, 0, sizeof *w);
    g_mutex_init(&w->m);
    g_cond_init(&w->cv);
}

/* started: what the _start call returned.  done is always told (the
 * publishing thread's timer tells FE_TIMEOUT at send_timeout). */
static fe_code send_wait_end(send_wait *w, fe_code started, char *detail, size_t dlen)
{
    fe_code res = started;
    if (started == FE_OK) {
        g_mutex_lock(&w->m);
        while (!w->done)
            g_cond_wait(&w->cv, &w->m);
        g_mutex_unlock(&w->m);
        res = w->res;
        g_strlcpy(detail, w->detail, dlen);
    }
    g_mutex_clear(&w->m);
    g_cond_clear(&w->cv);
    return res;
}

fe_code sent_send(mailbox *mb, const char *peer, const char *reply_to, const char *data, size_t len,
                  int64_t life_ms, mb_ask *ask, char *detail, size_t dlen)
{
    send_wait w;
    fe_code res;
    send_wait_init(&w);
    res = send_wait_end(
        &w, send_one(mb, peer, reply_to, data, len, life_ms, ask, send_wait_done, &w, detail, dlen),
        detail, dlen);
    if (ask && res != FE_OK) {
        /* not asked (or not known to be): nothing is awaited; an answer
         * that comes all the same arrives as an ordinary reply */
        g_mutex_lock(mb->lock);
        ask_unregister_locked(mb, ask);
        g_mutex_unlock(mb->lock);
    }
    return res;
}

fe_code mb_send(mailbox *mb, const char *peer, const char *reply_to, const char *data, size_t len,
                char *detail, size_t dlen)
{
    send_wait w;
    send_wait_init(&w);
    return send_wait_end(
        &w, mb_send_start(mb, peer, reply_to, data, len, send_wait_done, &w, detail, dlen), detail,
        dlen);
}

/* send.json: why it is refused (detail, the log), nothing published. */
static fe_code json_refused(const char *what, const char *to, char *detail, size_t dlen,
                            const char *fmt, ...) G_GNUC_PRINTF(5, 6);
static fe_code json_refused(const char *what, const char *to, char *detail, size_t dlen,
                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, dlen, fmt, ap);
    va_end(ap);
    log_warn("%s to %s: refused, nothing was sent: %s", what, to, detail);
    return FE_BAD_INPUT;
}

fe_code sent_parse_json(mailbox *mb, const char *to, const char *what, const char *data, size_t len,
                        int64_t default_life, char **body_out, int64_t *life, char **reply_out,
                        char *detail, size_t dlen)
{
    json_error_t jerr;
    json_t *j, *v;
    const char *key, *body, *reply_to = NULL;
    char who[MB_ID_MAX];
    fe_code res;

    detail[0] = '\0';
    *body_out = *reply_out = NULL;
    *life = default_life;
    if (memchr(data, '\0', len))
        return json_refused(what, to, detail, dlen, "a NUL byte in the JSON");
    j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return json_refused(what, to, detail, dlen,
                            "not one JSON object {\"body\": TEXT, \"expiresIn\": DURATION, "
                            "\"replyTo\": MSGID} (%s)",
                            j ? "not an object" : jerr.text);
    }
    json_object_foreach(j, key, v)
    {
        if (strcmp(key, "body") && strcmp(key, "expiresIn") && strcmp(key, "replyTo")) {
            res =
                json_refused(what, to, detail, dlen,
                             "unknown key \"%.40s\" (body, expiresIn and replyTo are known)", key);
            json_decref(j);
            return res;
        }
    }
    body = json_string_value(json_object_get(j, "body"));
    if (!body || strlen(body) != json_string_length(json_object_get(j, "body"))) {
        json_decref(j);
        return json_refused(what, to, detail, dlen,
                            "\"body\" (a string without NUL: the message) is required");
    }
    v = json_object_get(j, "expiresIn");
    if (v) {
        const char *s = json_string_value(v);
        char num[32];
        if (json_is_integer(v) && json_integer_value(v) > 0) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            s = num; /* a number is seconds, as in the options */
        }
        if (!s || parse_duration(s, life) < 0 || *life < 1000 || *life > mb->o->message_ttl_ms) {
            res = json_refused(what, to, detail, dlen,
                               "\"expiresIn\" must be a duration from 1s to message_ttl "
                               "(%lld ms), such as \"90s\", \"2m\" or a number of seconds",
                               (long long)mb->o->message_ttl_ms);
            json_decref(j);
            return res;
        }
    }
    v = json_object_get(j, "replyTo");
    if (v) {
        reply_to = json_string_value(v);
        /* only a message that `to` sent here can be answered (a group:
         * any message held or in history) */
        if (!reply_to || !env_id_valid(reply_to) ||
            !(g_str_has_prefix(to, GROUP_PREFIX) ? mb_sender_of(mb, reply_to, who, sizeof who)
                                                 : mb_known_from(mb, reply_to, to))) {
            res = json_refused(what, to, detail, dlen,
                               "\"replyTo\" must be the msgId of a message %s sent here (held or "
                               "in history)",
                               g_str_has_prefix(to, GROUP_PREFIX) ? "someone" : to);
            json_decref(j);
            return res;
        }
    }
    *body_out = g_strdup(body);
    *reply_out = g_strdup(reply_to);
    json_decref(j);
    return FE_OK;
}

fe_code mb_send_json_start(mailbox *mb, const char *to, const char *data, size_t len,
                           mb_send_done done, void *ud, char *detail, size_t dlen)
{
    char *body, *reply_to;
    int64_t life;
    fe_code res = sent_parse_json(mb, to, "send.json", data, len, sent_default_life(mb), &body,
                                  &life, &reply_to, detail, dlen);
    if (res == FE_OK)
        res = send_one(mb, to, reply_to, body, strlen(body), life, NULL, done, ud, detail, dlen);
    g_free(body);
    g_free(reply_to);
    return res;
}

fe_code mb_send_json(mailbox *mb, const char *to, const char *data, size_t len, char *detail,
                     size_t dlen)
{
    send_wait w;
    send_wait_init(&w);
    return send_wait_end(
        &w, mb_send_json_start(mb, to, data, len, send_wait_done, &w, detail, dlen), detail, dlen);
}

fe_code mb_resend_start(mailbox *mb, const char *data, size_t len, mb_send_done done, void *ud,
                        char *detail, size_t dlen)
{
    char id[ENV_ID_LEN + 1];
    char *json = NULL;
    sent_entry *se;
    envelope e;
    char why[200];
    fe_code res;

    detail[0] = '\0';
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
        len--;
    if (len != ENV_ID_LEN || memchr(data, '\0', len)) {
        snprintf(detail, dlen,
                 "write one msgId (32 lowercase hex digits) of an unconfirmed entry of sent");
        log_warn("resend: refused: %s", detail);
        return FE_BAD_INPUT;
    }
    memcpy(id, data, len);
    id[len] = '\0';
    if (!env_id_valid(id)) {
        snprintf(detail, dlen, "'%s' is not a msgId (32 lowercase hex digits, as in sent)", id);
        log_warn("resend: refused: %s", detail);
        return FE_BAD_INPUT;
    }
    g_mutex_lock(mb->lock);
    se = sent_find(mb, id);
    if (se && se->env)
        json = strdup(se->env);
    else if (se)
        snprintf(detail, dlen, "%s is %s, not unconfirmed: there is nothing to resend", id,
                 se->state);
    else
        snprintf(detail, dlen, "%s is not in sent", id);
    g_mutex_unlock(mb->lock);
    if (!json) {
        log_warn("resend: %s", detail);
        return se ? FE_BAD_INPUT : FE_NOT_HELD;
    }
    if (env_decode(json, strlen(json), SIZE_MAX, &e, why, sizeof why) < 0) {
        free(json);
        snprintf(detail, dlen, "the kept envelope of %s does not decode: %s", id, why);
        return FE_INTERNAL;
    }
    log_info("resend: publishing %s to %s again (same msgId and signature)", id, e.to);
    res = send_go(mb, &e, json, strlen(json), done, ud, detail, dlen);
    env_free(&e);
    return res;
}

fe_code mb_resend(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen)
{
    send_wait w;
    send_wait_init(&w);
    return send_wait_end(&w, mb_resend_start(mb, data, len, send_wait_done, &w, detail, dlen),
                         detail, dlen);
}

void mb_late_confirm(mailbox *any, const char *msg_id, fe_code res, bool unread)
{
    sent_entry *se = NULL;
    early_receipt *er;
    mailbox *mb = NULL;
    GPtrArray *all = any->h->entities;
    g_mutex_lock(any->lock);
    /* whichever local entity sent it */
    for (guint i = 0; i < all->len && !mb; i++) {
        mailbox *m = all->pdata[i];
        if ((se = sent_find(m, msg_id)) || g_hash_table_contains(m->inflight, msg_id))
            mb = m;
    }
    if (se) {
        late_confirm_locked(mb, se, res, unread);
    } else if (mb && g_hash_table_lookup_extended(mb->inflight, msg_id, NULL, (gpointer *)&er)) {
        /* the write gave up but has not recorded unconfirmed yet: keep it
         * for publish_and_record, which applies it right after */
        if (!er)
            er = early_new_locked(mb, msg_id);
        er->late = true;
        er->late_res = res;
        er->late_unread = unread;
    }
    g_mutex_unlock(any->lock);
}
