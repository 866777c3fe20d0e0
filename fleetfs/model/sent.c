/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/sent.c — the sent log and its state machine (SPEC 4); one write
 * becoming one message is send.c.
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
void sent_record(mailbox *mb, const envelope *e, const char *json, const char *state,
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

/* A broadcast's state: the least advanced of its recipients'.  Once every
 * recipient has a word of its own or the broker's (rank 2 or more), that
 * replaces the sender's own conclusion (expired by its clock), as for a
 * message to one (issue 43). */
static void group_state_locked(sent_entry *se)
{
    GHashTableIter it;
    gpointer k, v;
    const char *least = NULL;
    g_hash_table_iter_init(&it, se->recipients);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!least || state_rank(v) < state_rank(least))
            least = v;
    if (least && !strcmp(se->expired_by, "sender") && state_rank(least) >= 2) {
        g_strlcpy(se->state, least, sizeof se->state);
        se->expired_by[0] = '\0';
    } else if (least && state_rank(least) > state_rank(se->state)) {
        g_strlcpy(se->state, least, sizeof se->state);
    }
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
void sent_apply_early(mailbox *mb, const char *msg_id)
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

char *sent_kept_envelope(mailbox *mb, const char *msg_id, bool *known, char *detail, size_t dlen)
{
    char *json = NULL;
    sent_entry *se;
    g_mutex_lock(mb->lock);
    se = sent_find(mb, msg_id);
    *known = se != NULL;
    if (se && se->env)
        json = strdup(se->env);
    else if (se)
        snprintf(detail, dlen, "%s is %s, not unconfirmed: there is nothing to resend", msg_id,
                 se->state);
    else
        snprintf(detail, dlen, "%s is not in sent", msg_id);
    g_mutex_unlock(mb->lock);
    return json;
}
