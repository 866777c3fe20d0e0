/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/mailbox.c — the mailbox model's lifecycle and its face to the
 * tree: counters, renderings, sizes and mtimes, and the once-a-second tick.
 * Each concern lives in its own file; mb_int.h lists them, the lock and the
 * ownership rule for held messages.  This file is the top of the model:
 * it opens, ticks, renders and frees every part, and no part calls it
 * (what they all call of an entity is entity.c's).
 */
#include "fleetfs/model/mb_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

/* The paths of an entity's files in the tree, from its home. */
static void entity_paths(mailbox *mb)
{
    snprintf(mb->inbox_path, sizeof mb->inbox_path, "%s/inbox", mb->home);
    snprintf(mb->sent_path, sizeof mb->sent_path, "%s/sent", mb->home);
    snprintf(mb->history_path, sizeof mb->history_path, "%s/history", mb->home);
    snprintf(mb->lead_status_path, sizeof mb->lead_status_path, "%s/status", mb->home);
}

/* An entity's mailbox, its history and sent log loaded from state_dir. */
static mailbox *entity_new(mb_host *h, const char *id, const char *name, bool lead,
                           const char *state_dir, const char *const *groups, unsigned box)
{
    mailbox *mb = g_new0(mailbox, 1);
    g_atomic_ref_count_init(&mb->ref);
    mb->h = h;
    mb->lock = &h->lock;
    mb->o = h->o;
    mb->hooks = h->hooks;
    g_strlcpy(mb->id, id, sizeof mb->id);
    g_strlcpy(mb->name, name, sizeof mb->name);
    mb->lead = lead;
    mb->state_dir = g_strdup(state_dir);
    mb->groups = g_strdupv((char **)groups);
    if (!mb->groups)
        mb->groups = g_new0(char *, 1);
    mb->box = box;
    snprintf(mb->home, sizeof mb->home, "%s/%s", lead ? "leads" : "agents", id);
    entity_paths(mb);
    mb->held_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->sent_ids = g_hash_table_new(g_str_hash, g_str_equal);
    mb->consumed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    history_load(mb);
    sent_load(mb);
    for (int i = 0; i < MB__FILES; i++)
        mb->mtime[i] = env_now_ms();
    return mb;
}

static void entity_free(mailbox *mb)
{
    held_free_all(mb);
    views_free_all(mb);
    sent_close(mb);
    history_close(mb);
    seen_close(mb->seen);
    accept_doubt_free(&mb->doubt);
    g_hash_table_destroy(mb->held_ids);
    if (mb->asks)
        g_hash_table_destroy(mb->asks);
    g_hash_table_destroy(mb->sent_ids);
    g_hash_table_destroy(mb->consumed);
    g_free(mb->injector_words);
    g_free(mb->state_dir);
    g_strfreev(mb->groups);
    g_free(mb);
}

mailbox *mb_new(const fs_opts *o, const mb_hooks *hooks, const mb_broker *br)
{
    mb_host *h = g_new0(mb_host, 1);
    g_mutex_init(&h->lock);
    h->o = o;
    h->hooks = *hooks;
    h->br = *br;
    h->free_entity = entity_free;
    h->entities = g_ptr_array_new();
    h->rejections = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    h->refusals = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    h->receipt_logs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    h->send_logs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    h->dead_logs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_ptr_array_add(h->entities,
                    entity_new(h, o->coord_id, o->coord_id, true, o->state_dir, NULL, 0));
    return h->entities->pdata[0];
}

mailbox *mb_agent_new(mailbox *lead, const char *name, const char *state_dir,
                      const char *const *groups, unsigned box, char **err)
{
    mb_host *h = lead->h;
    char gid[MB_ID_MAX];
    mailbox *mb;
    snprintf(gid, sizeof gid, "%s@%s", name, h->o->coord_id);
    if (g_mkdir_with_parents(state_dir, 0700) < 0) {
        *err = g_strdup_printf("cannot create %s: %s", state_dir, g_strerror(errno));
        return NULL;
    }
    mb = entity_new(h, gid, name, false, state_dir, groups, box);
    if (accept_open_entity(mb, err) < 0) {
        entity_free(mb);
        return NULL;
    }
    g_mutex_lock(&h->lock);
    g_ptr_array_add(h->entities, mb);
    g_mutex_unlock(&h->lock);
    return mb;
}

void mb_agent_retire(mailbox *mb)
{
    mb_host *h;
    bool had;
    if (!mb || mb->lead)
        return;
    h = mb->h;
    g_mutex_lock(&h->lock);
    had = g_ptr_array_remove(h->entities, mb);
    g_mutex_unlock(&h->lock);
    if (had)
        mb_unref(mb);
}

int mb_agent_serve(mailbox *mb, const char *const *keys, char **err)
{
    mb_host *h = mb->h;
    if (mb->lead || !h->br.box_add) {
        *err = g_strdup_printf("%s cannot be served as an agent's mailbox here", mb->id);
        errno = EINVAL;
        return -1;
    }
    if (h->br.box_add(h->br.b, mb->box, mb->id, keys) < 0) {
        int e = errno;
        *err = g_strdup_printf("the broker connection refuses box %u for agent.%s.inbox: %s",
                               mb->box, mb->id, g_strerror(e));
        errno = e;
        return -1;
    }
    return 0;
}

fe_code mb_agent_unserve(mailbox *mb, bool delete_if_empty, char *detail, size_t n)
{
    mb_host *h = mb->h;
    if (mb->lead || !h->br.box_remove) {
        snprintf(detail, n, "%s is not served as an agent's mailbox", mb->id);
        return FE_BAD_INPUT;
    }
    return h->br.box_remove(h->br.b, mb->box, delete_if_empty, h->o->send_timeout_ms, detail, n);
}

bool mb_agent_served(mailbox *mb)
{
    mb_host *h = mb->h;
    return !mb->lead && h->br.box_ready && h->br.box_ready(h->br.b, mb->box);
}

void mb_set_groups(mailbox *mb, const char *const *groups)
{
    char **g = g_strdupv((char **)groups);
    g_mutex_lock(mb->lock);
    g_strfreev(mb->groups);
    mb->groups = g ? g : g_new0(char *, 1);
    g_mutex_unlock(mb->lock);
}

char **mb_groups(mailbox *mb)
{
    char **g;
    g_mutex_lock(mb->lock);
    g = g_strdupv(mb->groups);
    g_mutex_unlock(mb->lock);
    return g;
}

/* The lead's seen sets, the host's outbox, then its keys (accept.c and
 * receipts.c, in that order: the first refusal is what is said). */
int mb_set_security(mailbox *mb, char **err)
{
    if (accept_open_seen(mb, err) < 0)
        return -1;
    /* the host's own outbox (the lead's state_dir) */
    if (outbox_open(mb->h, err) < 0)
        return -1;
    return accept_open_keys(mb, err);
}

void mb_start(mailbox *mb)
{
    outbox_start(mb->h);
}

void mb_stop_begin(mailbox *mb)
{
    if (mb)
        outbox_stop_begin(mb->h);
}

void mb_stop(mailbox *mb)
{
    if (mb)
        outbox_stop(mb->h);
}

void mb_free(mailbox *lead)
{
    mb_host *h;
    if (!lead)
        return;
    h = lead->h;
    outbox_stop(h);
    for (guint i = 0; i < h->entities->len; i++)
        entity_free(h->entities->pdata[i]);
    g_ptr_array_free(h->entities, TRUE);
    outbox_free(h);
    accept_close(h);
    g_hash_table_destroy(h->rejections);
    g_hash_table_destroy(h->refusals);
    g_hash_table_destroy(h->receipt_logs);
    g_hash_table_destroy(h->send_logs);
    g_hash_table_destroy(h->dead_logs);
    g_mutex_clear(&h->lock);
    g_free(h);
}

void mb_set_injector(mailbox *mb, const char *words)
{
    bool same;
    g_mutex_lock(mb->lock);
    same = mb->injector_words && strcmp(mb->injector_words, words) == 0;
    if (!same) {
        g_free(mb->injector_words);
        mb->injector_words = g_strdup(words);
    }
    g_mutex_unlock(mb->lock);
    if (!same) {
        mb_changed(mb, mb->lead_status_path);
        mb_changed(mb, "status");
    }
}

char *mb_injector_words(mailbox *mb)
{
    char *w;
    g_mutex_lock(mb->lock);
    w = g_strdup(mb->injector_words);
    g_mutex_unlock(mb->lock);
    return w;
}

GPtrArray *mb_ids_from(mailbox *mb, const char *peer)
{
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer k, v;
    g_mutex_lock(mb->lock);
    for (GList *l = mb->held.head; l; l = l->next) {
        held_msg *m = l->data;
        if (!peer || !strcmp(m->env.from, peer))
            g_ptr_array_add(ids, g_strdup(m->env.msgId));
    }
    g_hash_table_iter_init(&it, mb->consumed);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (!peer || !strcmp(((hist_ref *)v)->from, peer))
            g_ptr_array_add(ids, g_strdup(k));
    g_mutex_unlock(mb->lock);
    return ids;
}

GString *mb_render(mailbox *mb, mb_file f)
{
    GString *s;
    g_mutex_lock(mb->lock);
    s = f == MB_SENT ? sent_render_locked(mb) : history_render_locked(mb);
    g_mutex_unlock(mb->lock);
    return s;
}

void mb_counters_get(mailbox *mb, mb_counters *out, unsigned *held)
{
    g_mutex_lock(mb->lock);
    *out = mb->n;
    if (held)
        *held = mb->held.length;
    g_mutex_unlock(mb->lock);
    outbox_counts(mb->h, &out->receipts_pending, &out->receipts_dropped);
}

void mb_counters_total(mailbox *any, mb_counters *out, unsigned *held)
{
    GPtrArray *all = any->h->entities;
    memset(out, 0, sizeof *out);
    if (held)
        *held = 0;
    g_mutex_lock(any->lock);
    for (guint i = 0; i < all->len; i++) {
        mailbox *mb = all->pdata[i];
        out->sent += mb->n.sent;
        out->received += mb->n.received;
        out->injected += mb->n.injected;
        out->acked += mb->n.acked;
        out->rejected += mb->n.rejected;
        out->dead_lettered += mb->n.dead_lettered;
        out->expired += mb->n.expired;
        out->dead_home += mb->n.dead_home;
        out->dead_foreign += mb->n.dead_foreign;
        if (held)
            *held += mb->held.length;
    }
    g_mutex_unlock(any->lock);
    outbox_counts(any->h, &out->receipts_pending, &out->receipts_dropped);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(a, b);
}

GString *mb_render_rejections(mailbox *mb)
{
    GString *s = g_string_new(NULL);
    GList *keys;
    g_mutex_lock(mb->lock);
    keys = g_list_sort(g_hash_table_get_keys(mb->h->rejections), cmp_str);
    for (GList *l = keys; l; l = l->next)
        g_string_append_printf(s, "rejected_%s: %u\n", (char *)l->data,
                               GPOINTER_TO_UINT(g_hash_table_lookup(mb->h->rejections, l->data)));
    g_list_free(keys);
    if (mb->h->seen_err[0])
        g_string_append_printf(s, "seen_set: NOT PERSISTED (%s)\n", mb->h->seen_err);
    g_mutex_unlock(mb->lock);
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
    g_mutex_lock(mb->lock);
    state_note(s, "history.jsonl", mb->history_log);
    state_note(s, "sent.jsonl", mb->sent_log);
    if (mb->lead && mb->h->outbox)
        state_note(s, "receipts.outbox", outbox_log_locked(mb->h));
    g_mutex_unlock(mb->lock);
    if (!s->len) {
        g_string_free(s, TRUE);
        return g_strdup("ok");
    }
    g_string_prepend(s, "degraded: ");
    g_string_append_printf(s,
                           "; what was loaded is kept, new records live in memory only (lost "
                           "at a restart) until a write works again: free space in %s",
                           mb->state_dir);
    return g_string_free(s, FALSE);
}

size_t mb_size(mailbox *mb, mb_file f)
{
    size_t n;
    g_mutex_lock(mb->lock);
    n = f == MB_SENT ? mb->sent_bytes : f == MB_HISTORY ? mb->history_bytes : mb->held_bytes;
    g_mutex_unlock(mb->lock);
    return n;
}

int64_t mb_mtime(mailbox *mb, mb_file f)
{
    int64_t t;
    g_mutex_lock(mb->lock);
    t = mb->mtime[f];
    g_mutex_unlock(mb->lock);
    return t;
}

/* One entity's tick; true when its memory use dropped a lot. */
static void entity_tick(mailbox *mb)
{
    br_status st;
    bool dropped;

    mb->h->br.status(mb->h->br.b, mb->box, &st);
    g_mutex_lock(mb->lock);
    dropped = held_tick_locked(mb, &st, g_get_monotonic_time() / 1000);
    sent_expire_locked(mb);
    ask_tick_locked(mb);
    g_mutex_unlock(mb->lock);
    held_expire(mb);
    if (dropped) {
        mb_changed(mb, mb->inbox_path);
        mb_changed(mb, mb->lead_status_path);
    }
}

void mb_tick(mailbox *lead)
{
    mb_host *h = lead->h;
    GPtrArray *all = mb_entities(lead);
    bool trim;
    for (guint i = 0; i < all->len; i++)
        entity_tick(all->pdata[i]);
    g_ptr_array_free(all, TRUE);
    g_mutex_lock(&h->lock);
    trim = h->trim;
    h->trim = false;
    g_mutex_unlock(&h->lock);
    /* glibc keeps freed heap; after a big ack it is worth returning */
    if (trim)
        os_heap_trim();
}
