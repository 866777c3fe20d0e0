/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/history.c — the last HISTORY_MAX consumed (or refused)
 * messages, in order, and which msgIds they name and who sent them (for
 * replies: mb_known_from).  Persisted as JSON Lines in
 * state_dir/history.jsonl (an applog, APPLOG_WRITE).  An entry is added to
 * memory first and then appended, and a rewrite renders memory, so the
 * rewrite always includes the newest entry.  Consumers write history
 * before they ack the broker copy.
 *
 * History is for people, and bounded by lines: it is not the replay guard.
 * What became of each msgId (consumed or not) is the seen set's (accept.c),
 * which history only seeds at start for msgIds it does not know (a seen
 * file from before states, or a deleted one).  A msgId may appear on
 * several lines; it is forgotten only when its last line goes.
 */
#include "fleetfs/model/mb_int.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/base/log.h"

#define HISTORY_LINE_MAX (4 * 1024 * 1024)

/* msgId (and, when from is not NULL, the sender) of a history line */
static char *line_msgid(const char *line, char **from)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "msgId"));
    const char *fr = json_string_value(json_object_get(j, "from"));
    char *r = id ? g_strdup(id) : NULL;
    if (from)
        *from = g_strdup(fr ? fr : "");
    json_decref(j);
    return r;
}

/* One more line names id, sent by from (the newest line's sender wins). */
static void history_ref(mailbox *mb, char *id, const char *from)
{
    hist_ref *old = g_hash_table_lookup(mb->consumed, id);
    size_t n = strlen(from) + 1;
    hist_ref *r = g_malloc(sizeof *r + n);
    r->lines = old ? old->lines + 1 : 1;
    memcpy(r->from, from, n);
    g_hash_table_replace(mb->consumed, id, r);
}

/* One line naming id left history. */
static void history_unref(mailbox *mb, const char *id)
{
    hist_ref *r = g_hash_table_lookup(mb->consumed, id);
    if (r && --r->lines == 0)
        g_hash_table_remove(mb->consumed, id);
}

/* Takes line (g_malloc'd, no newline). */
static void history_push(mailbox *mb, char *line)
{
    char *from = NULL;
    char *id = line_msgid(line, &from);
    if (id)
        history_ref(mb, id, from);
    g_free(from);
    g_queue_push_tail(&mb->history, line);
    mb->history_bytes += strlen(line) + 1;
    while (mb->history.length > HISTORY_MAX) {
        char *old = g_queue_pop_head(&mb->history);
        char *oid = line_msgid(old, NULL);
        mb->history_bytes -= strlen(old) + 1;
        if (oid)
            history_unref(mb, oid);
        g_free(oid);
        g_free(old);
    }
}

void history_load(mailbox *mb)
{
    GPtrArray *lines = NULL;
    char *err = NULL;
    char *path = g_build_filename(mb->state_dir, "history.jsonl", NULL);
    mb->history_log = applog_open(path, APPLOG_WRITE, HISTORY_LINE_MAX, &lines, &err);
    if (!mb->history_log) {
        log_warn("history: cannot open %s; history will not survive a restart", err);
        g_free(err);
    } else {
        mb_warn_if_degraded(mb->history_log, "history");
        for (guint i = 0; i < lines->len; i++) {
            json_t *o = json_loads(lines->pdata[i], 0, NULL);
            if (json_is_object(o))
                history_push(mb, g_strdup(lines->pdata[i]));
            json_decref(o);
        }
        g_ptr_array_free(lines, TRUE);
    }
    g_free(path);
}

void history_close(mailbox *mb)
{
    char *s;
    while ((s = g_queue_pop_head(&mb->history)))
        g_free(s);
    applog_close(mb->history_log);
}

GString *history_render_locked(mailbox *mb)
{
    GString *s = g_string_sized_new(mb->history_bytes + 1);
    for (GList *l = mb->history.head; l; l = l->next) {
        g_string_append(s, l->data);
        g_string_append_c(s, '\n');
    }
    return s;
}

const char *history_sender_locked(mailbox *mb, const char *msg_id)
{
    hist_ref *r = g_hash_table_lookup(mb->consumed, msg_id);
    return r ? r->from : NULL;
}

void history_each_locked(mailbox *mb, void (*fn)(mailbox *mb, const char *msg_id, const char *how))
{
    for (GList *l = mb->history.head; l; l = l->next) {
        json_t *j = json_loads(l->data, 0, NULL);
        const char *id = json_string_value(json_object_get(j, "msgId"));
        const char *how = json_string_value(json_object_get(j, "consumed"));
        if (id && how)
            fn(mb, id, how);
        json_decref(j);
    }
}

static GString *render_cb(void *mb)
{
    return history_render_locked(mb);
}

static void history_persist_locked(mailbox *mb, const char *line)
{
    int rc = -1;
    if (mb->history_log)
        rc = applog_add(mb->history_log, line, mb->history.length, render_cb, mb);
    if (rc < 0 && !mb->history_warned)
        log_warn("history: cannot write %s/history.jsonl; consumed messages will not survive "
                 "a restart: free space or fix permissions",
                 mb->state_dir);
    mb->history_warned = rc < 0;
}

void history_add_locked(mailbox *mb, const envelope *e, const char *received_at, const char *how,
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
    if (e->replyTo[0])
        json_object_set_new(j, "replyTo", json_string(e->replyTo));
    if (detail && *detail)
        json_object_set_new(j, "detail", json_string(detail));
    if (e->body)
        json_object_set_new(j, "body", json_stringn(e->body, e->body_len));
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!line)
        return;
    /* memory first: a rewrite renders memory, so it keeps this entry */
    history_push(mb, g_strdup(line));
    history_persist_locked(mb, line);
    free(line);
    mb_touch_locked(mb, MB_HISTORY);
    mb_changed(mb, mb->history_path);
}

bool mb_known_from(mailbox *mb, const char *msg_id, const char *peer)
{
    held_msg *m;
    const char *from;
    bool known;
    if (!env_id_valid(msg_id))
        return false;
    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    from = m ? m->env.from : history_sender_locked(mb, msg_id);
    known = from && strcmp(from, peer) == 0;
    g_mutex_unlock(mb->lock);
    return known;
}

bool mb_sender_of(mailbox *mb, const char *msg_id, char *out, size_t n)
{
    held_msg *m;
    const char *from;
    if (!env_id_valid(msg_id))
        return false;
    g_mutex_lock(mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    from = m ? m->env.from : history_sender_locked(mb, msg_id);
    if (from && *from)
        g_strlcpy(out, from, n);
    g_mutex_unlock(mb->lock);
    return from && *from;
}
