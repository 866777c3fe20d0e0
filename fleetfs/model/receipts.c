/* fleetfs/model/receipts.c — receipts in both directions.
 *
 * In: lead.<me>.receipts carries signed receipts about messages this lead
 * sent.  Each is checked like a message — it parses, is a receipt for me,
 * its signature matches the key trusted for its sender, it has not expired
 * and its msgId was not seen before (so a captured old receipt cannot move
 * a `sent` state) — and then moves the sent entry forward (sent.c).
 *
 * Out: a receipt about a message we consumed must reach its sender even if
 * our link is down right then, or we crash right after consuming.  So it
 * goes into a durable outbox first (state_dir/receipts.outbox, an applog:
 * {"id","to","env"} lines, and {"done":id} once the broker confirmed it),
 * in the same locked step that writes history and removes the message
 * (held.c).  One thread sends the oldest pending receipt whenever the link
 * is up, and keeps it until the broker confirms it; the file is rewritten
 * with only the pending ones once it holds twice as many lines.
 */
#include "fleetfs/model/mb_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/log.h"

#define OUTBOX_LINE_MAX (64 * 1024)
#define OUTBOX_RETRY_MS 1000

typedef struct {
    char id[ENV_ID_LEN + 1];
    char to[64];
    char *json;
    bool warned; /* its first failure was logged */
} ob_item;

struct mb_outbox {
    applog *log;
    GQueue items; /* ob_item*, oldest first */
    GCond cv;     /* with mailbox.lock: something to send, or stop */
    GThread *thread;
    bool stopping;
};

static void item_free(ob_item *it)
{
    g_free(it->json);
    g_free(it);
}

static char *item_line(const ob_item *it)
{
    json_t *j = json_pack("{s:s,s:s,s:s}", "id", it->id, "to", it->to, "env", it->json);
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}

static void load_line(mb_outbox *ob, GHashTable *index, const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *done = json_string_value(json_object_get(j, "done"));
    const char *to = json_string_value(json_object_get(j, "to"));
    const char *env = json_string_value(json_object_get(j, "env"));
    if (done) {
        ob_item *it = g_hash_table_lookup(index, done);
        if (it) {
            g_hash_table_remove(index, done);
            g_queue_remove(&ob->items, it);
            item_free(it);
        }
    } else if (id && env_id_valid(id) && to && env && !g_hash_table_contains(index, id)) {
        ob_item *it = g_new0(ob_item, 1);
        g_strlcpy(it->id, id, sizeof it->id);
        g_strlcpy(it->to, to, sizeof it->to);
        it->json = g_strdup(env);
        g_queue_push_tail(&ob->items, it);
        g_hash_table_insert(index, it->id, it);
    }
    json_decref(j);
}

int outbox_open(mailbox *mb, char **err)
{
    mb_outbox *ob = g_new0(mb_outbox, 1);
    GPtrArray *lines = NULL;
    GHashTable *index = g_hash_table_new(g_str_hash, g_str_equal);
    char *path = g_build_filename(mb->o->state_dir, "receipts.outbox", NULL);
    g_cond_init(&ob->cv);
    ob->log = applog_open(path, APPLOG_WRITE, OUTBOX_LINE_MAX, &lines, err);
    g_free(path);
    mb->outbox = ob;
    if (!ob->log) {
        g_hash_table_destroy(index);
        return -1;
    }
    mb_warn_if_degraded(ob->log, "receipts");
    for (guint i = 0; i < lines->len; i++)
        load_line(ob, index, lines->pdata[i]);
    g_ptr_array_free(lines, TRUE);
    g_hash_table_destroy(index);
    if (ob->items.length)
        log_info("receipts: %u receipts from before the restart wait in the outbox",
                 ob->items.length);
    return 0;
}

static GString *render_pending(void *p)
{
    mb_outbox *ob = p;
    GString *s = g_string_new(NULL);
    for (GList *l = ob->items.head; l; l = l->next) {
        char *line = item_line(l->data);
        g_string_append(s, line);
        g_string_append_c(s, '\n');
        free(line);
    }
    return s;
}

void outbox_queue_locked(mailbox *mb, const envelope *orig, const char *state, const char *detail)
{
    mb_outbox *ob = mb->outbox;
    envelope r;
    size_t len;
    int64_t now = env_now_ms();
    ob_item *it;
    char *line;

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
    if (!ob || (mb->key && sig_sign(mb->key, &r) < 0)) {
        log_err("receipt %s about %s: cannot sign or queue it; %s will see the message expire",
                state, orig->msgId, orig->from);
        return;
    }
    it = g_new0(ob_item, 1);
    g_strlcpy(it->id, r.msgId, sizeof it->id);
    g_strlcpy(it->to, orig->from, sizeof it->to);
    it->json = env_encode(&r, &len);
    if (!it->json) {
        item_free(it);
        return;
    }
    line = item_line(it);
    if (!line || applog_append(ob->log, line) < 0)
        log_warn("receipts: cannot write %s (%s); the %s receipt about %s is kept in memory "
                 "only",
                 applog_path(ob->log), g_strerror(errno), state, orig->msgId);
    free(line);
    g_queue_push_tail(&ob->items, it);
    g_cond_signal(&ob->cv);
}

size_t outbox_pending(mailbox *mb)
{
    size_t n;
    g_mutex_lock(&mb->lock);
    n = mb->outbox ? mb->outbox->items.length : 0;
    g_mutex_unlock(&mb->lock);
    return n;
}

const applog *outbox_log_locked(mailbox *mb)
{
    return mb->outbox->log;
}

/* Lock held: the head was sent (or can never be): forget it durably. */
static void done_locked(mb_outbox *ob, ob_item *it)
{
    char *line = g_strdup_printf("{\"done\":\"%s\"}", it->id);
    g_queue_remove(&ob->items, it);
    if (applog_add(ob->log, line, ob->items.length, render_pending, ob) < 0)
        log_warn("receipts: cannot write %s: %s", applog_path(ob->log), g_strerror(errno));
    g_free(line);
    item_free(it);
}

static void wait_locked(mailbox *mb, int ms)
{
    g_cond_wait_until(&mb->outbox->cv, &mb->lock, g_get_monotonic_time() + (gint64)ms * 1000);
}

static gpointer outbox_main(gpointer p)
{
    mailbox *mb = p;
    mb_outbox *ob = mb->outbox;
    g_mutex_lock(&mb->lock);
    while (!ob->stopping) {
        ob_item *it = g_queue_peek_head(&ob->items);
        char id[ENV_ID_LEN + 1], to[64], detail[256] = "";
        char *json;
        br_status st;
        fe_code r = FE_NOT_CONNECTED;
        if (!it) {
            wait_locked(mb, OUTBOX_RETRY_MS);
            continue;
        }
        g_strlcpy(id, it->id, sizeof id);
        g_strlcpy(to, it->to, sizeof to);
        json = g_strdup(it->json);
        g_mutex_unlock(&mb->lock);
        mb->br.status(mb->br.b, &st);
        if (st.link == BR_CONNECTED)
            r = mb->br.publish_receipt(mb->br.b, to, id, json, strlen(json), mb->o->send_timeout_ms,
                                       detail, sizeof detail);
        g_free(json);
        g_mutex_lock(&mb->lock);
        if (g_queue_peek_head(&ob->items) != it)
            continue;
        if (r == FE_OK || r == FE_NO_MAILBOX || r == FE_ACCESS) {
            if (r != FE_OK)
                log_warn("receipts: %s to %s can never be delivered (%s: %s); dropped", id, to,
                         fe_hint(r), detail);
            else if (it->warned)
                log_info("receipts: %s to %s delivered after all", id, to);
            done_locked(ob, it);
            continue;
        }
        if (!it->warned)
            log_warn("receipts: %s to %s waits in the outbox (%s%s%s); retried until the broker "
                     "takes it",
                     id, to, fe_hint(r), detail[0] ? ": " : "", detail);
        it->warned = true;
        if (!ob->stopping)
            wait_locked(mb, OUTBOX_RETRY_MS);
    }
    g_mutex_unlock(&mb->lock);
    return NULL;
}

void outbox_start(mailbox *mb)
{
    if (mb->outbox && !mb->outbox->thread)
        mb->outbox->thread = g_thread_new("outbox", outbox_main, mb);
}

void outbox_stop(mailbox *mb)
{
    mb_outbox *ob = mb->outbox;
    if (!ob || !ob->thread)
        return;
    g_mutex_lock(&mb->lock);
    ob->stopping = true;
    g_cond_signal(&ob->cv);
    g_mutex_unlock(&mb->lock);
    g_thread_join(ob->thread);
    ob->thread = NULL;
}

void outbox_free(mailbox *mb)
{
    mb_outbox *ob = mb->outbox;
    if (!ob)
        return;
    g_queue_clear_full(&ob->items, (GDestroyNotify)item_free);
    applog_close(ob->log);
    g_cond_clear(&ob->cv);
    g_free(ob);
    mb->outbox = NULL;
}

/* ------------------------------------------------------------------ */
/* in                                                                  */

/* Lock held: why a receipt must not move `sent`, or NULL. */
static const char *receipt_refusal_locked(mailbox *mb, const envelope *e, char *why, size_t n)
{
    int64_t exp;
    if (!mb->o->insecure) {
        sig_result r = accept_verify_locked(mb, e);
        if (r != SIG_OK) {
            snprintf(why, n, "%s", sig_result_name(r));
            return "bad-receipt";
        }
    }
    if (env_time_parse(e->expiresAt, &exp) < 0 || exp + CLOCK_SKEW_MS < env_now_ms()) {
        snprintf(why, n, "expired at %s", e->expiresAt);
        return "stale-receipt";
    }
    if (!accept_first_time_locked(mb, e->msgId)) {
        snprintf(why, n, "receipt msgId %s was received before", e->msgId);
        return "replayed-receipt";
    }
    return NULL;
}

br_action mb_receipt(mailbox *mb, const char *body, size_t len)
{
    envelope e;
    char why[300] = "";
    const char *reason = NULL;
    if (env_decode(body, len, mb->o->max_message, &e, why, sizeof why) < 0 ||
        strcmp(e.type, ENV_TYPE_RECEIPT) != 0 || strcmp(e.to, mb->o->coord_id) != 0) {
        if (!why[0] || e.body)
            snprintf(why, sizeof why, "not a receipt addressed to %s", mb->o->coord_id);
        reason = "bad-receipt";
    }
    g_mutex_lock(&mb->lock);
    if (!reason)
        reason = receipt_refusal_locked(mb, &e, why, sizeof why);
    if (reason)
        mb_count_rejection_locked(mb, reason);
    g_mutex_unlock(&mb->lock);
    if (reason) {
        if (e.body)
            log_warn("receipts: rejected one from %s about %s (%s: %s); it goes to fleet.dlq",
                     e.from, e.ref, reason, why);
        else
            log_warn("receipts: rejected one (%s: %s); it goes to fleet.dlq", reason, why);
        env_free(&e);
        mb_changed(mb, "status");
        return BR_REJECT;
    }
    if (!mb_sent_update(mb, e.ref, e.from, e.state, e.detail))
        log_info("receipts: %s says %s about %s: nothing to update (unknown, or already "
                 "further along)",
                 e.from, e.state, e.ref);
    env_free(&e);
    return BR_ACK;
}

void mb_send_receipt(mailbox *mb, const envelope *orig, const char *state, const char *detail)
{
    g_mutex_lock(&mb->lock);
    outbox_queue_locked(mb, orig, state, detail);
    g_mutex_unlock(&mb->lock);
}
