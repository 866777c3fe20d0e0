/* fleetfs/model/mailbox.c — the mailbox model's lifecycle and its face to the
 * tree: counters, renderings, sizes and mtimes, and the once-a-second tick.
 * Each concern lives in its own file; mb_int.h lists them, the lock and the
 * ownership rule for held messages.
 */
#include "fleetfs/model/mb_int.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/log.h"

void mb_touch_locked(mailbox *mb, mb_file f)
{
    mb->mtime[f] = env_now_ms();
}

void mb_changed(mailbox *mb, const char *relpath)
{
    if (mb->hooks.changed)
        mb->hooks.changed(mb->hooks.ud, relpath);
}

void mb_count_rejection_locked(mailbox *mb, const char *reason)
{
    gpointer old = g_hash_table_lookup(mb->rejections, reason);
    g_hash_table_replace(mb->rejections, g_strdup(reason),
                         GUINT_TO_POINTER(GPOINTER_TO_UINT(old) + 1));
    mb->n.rejected++;
    mb->n.dead_lettered++;
}

void mb_warn_if_degraded(const applog *log, const char *what)
{
    if (applog_failed(log))
        log_warn("%s: %s ends in a torn line that the disk would not let us close (%s): it is "
                 "cut off and every whole line is loaded; until a write works again new records "
                 "live in memory only: free space",
                 what, applog_path(log), g_strerror(applog_failed(log)));
}

mailbox *mb_new(const fs_opts *o, const mb_hooks *hooks, const mb_broker *br)
{
    mailbox *mb = g_new0(mailbox, 1);
    g_mutex_init(&mb->lock);
    mb->o = o;
    mb->hooks = *hooks;
    mb->br = *br;
    snprintf(mb->inbox_path, sizeof mb->inbox_path, "leads/%s/inbox", o->coord_id);
    snprintf(mb->sent_path, sizeof mb->sent_path, "leads/%s/sent", o->coord_id);
    snprintf(mb->history_path, sizeof mb->history_path, "leads/%s/history", o->coord_id);
    snprintf(mb->lead_status_path, sizeof mb->lead_status_path, "leads/%s/status", o->coord_id);
    mb->held_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->sent_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->consumed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    mb->rejections = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    mb->refusals = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    mb->receipt_logs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    history_load(mb);
    sent_load(mb);
    for (int i = 0; i < MB__FILES; i++)
        mb->mtime[i] = env_now_ms();
    return mb;
}

void mb_start(mailbox *mb)
{
    outbox_start(mb);
}

void mb_stop(mailbox *mb)
{
    if (mb)
        outbox_stop(mb);
}

void mb_free(mailbox *mb)
{
    if (!mb)
        return;
    outbox_stop(mb);
    held_free_all(mb);
    views_free_all(mb);
    sent_close(mb);
    history_close(mb);
    outbox_free(mb);
    accept_close(mb);
    g_hash_table_destroy(mb->held_ids);
    g_hash_table_destroy(mb->sent_ids);
    g_hash_table_destroy(mb->consumed);
    g_hash_table_destroy(mb->rejections);
    g_hash_table_destroy(mb->refusals);
    g_hash_table_destroy(mb->receipt_logs);
    g_free(mb->injector_words);
    g_mutex_clear(&mb->lock);
    g_free(mb);
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
        mb_changed(mb, mb->lead_status_path);
        mb_changed(mb, "status");
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

bool mb_known_from(mailbox *mb, const char *msg_id, const char *peer)
{
    held_msg *m;
    const char *from;
    bool known;
    if (!env_id_valid(msg_id))
        return false;
    g_mutex_lock(&mb->lock);
    m = g_hash_table_lookup(mb->held_ids, msg_id);
    from = m ? m->env.from : history_sender_locked(mb, msg_id);
    known = from && strcmp(from, peer) == 0;
    g_mutex_unlock(&mb->lock);
    return known;
}

GPtrArray *mb_ids_from(mailbox *mb, const char *peer)
{
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer k, v;
    g_mutex_lock(&mb->lock);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        if (!strcmp(m->env.from, peer))
            g_ptr_array_add(ids, g_strdup(m->env.msgId));
    }
    g_hash_table_iter_init(&it, mb->consumed);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!strcmp(((hist_ref *)v)->from, peer))
            g_ptr_array_add(ids, g_strdup(k));
    g_mutex_unlock(&mb->lock);
    return ids;
}

GString *mb_render(mailbox *mb, mb_file f)
{
    GString *s;
    g_mutex_lock(&mb->lock);
    s = f == MB_SENT ? sent_render_locked(mb) : history_render_locked(mb);
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
    outbox_counts(mb, &out->receipts_pending, &out->receipts_dropped);
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
    if (mb->seen_err[0])
        g_string_append_printf(s, "seen_set: NOT PERSISTED (%s)\n", mb->seen_err);
    g_mutex_unlock(&mb->lock);
    return s;
}

static void state_note(GString *s, const char *file, const applog *log)
{
    int err = log ? applog_failed(log) : 0;
    if (log && !err)
        return;
    g_string_append_printf(s, "%s%s: %s", s->len ? "; " : "", file,
                           log ? g_strerror(err) : "cannot be opened (see the log)");
}

char *mb_state_words(mailbox *mb)
{
    GString *s = g_string_new(NULL);
    g_mutex_lock(&mb->lock);
    state_note(s, "history.jsonl", mb->history_log);
    state_note(s, "sent.jsonl", mb->sent_log);
    if (mb->outbox)
        state_note(s, "receipts.outbox", outbox_log_locked(mb));
    g_mutex_unlock(&mb->lock);
    if (!s->len) {
        g_string_free(s, TRUE);
        return g_strdup("ok");
    }
    g_string_prepend(s, "degraded: ");
    g_string_append_printf(s, "; what was loaded is kept, new records live in memory only (lost "
                              "at a restart) until a write works again: free space in %s",
                           mb->o->state_dir);
    return g_string_free(s, FALSE);
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
    bool dropped, trim;

    mb->br.status(mb->br.b, &st);
    g_mutex_lock(&mb->lock);
    dropped = held_tick_locked(mb, &st, g_get_monotonic_time() / 1000);
    sent_expire_locked(mb);
    trim = mb->trim;
    mb->trim = false;
    g_mutex_unlock(&mb->lock);
    /* glibc keeps freed heap; after a big ack it is worth returning */
    if (trim)
        malloc_trim(0);
    if (dropped) {
        mb_changed(mb, mb->inbox_path);
        mb_changed(mb, mb->lead_status_path);
    }
}
