/* SPDX-License-Identifier: Apache-2.0 */
/* seen.c — the persisted, bounded msgId -> state map behind the replay
 * check (design in seen.h).
 *
 * Memory holds each live entry once: a hash table for the lookup every
 * delivery makes, and one queue per class in the order the entries
 * reached their state, for eviction.  The queue links live inside the
 * entries (one allocation per id), so moving an id to another class on a
 * state change is O(1).  The file is an applog (APPLOG_WRITE: a change
 * survives a daemon crash) of the changes; letting it run to twice the
 * live entries before it is rewritten makes the rewrite cost amortised
 * O(1) per change.  Loading, torn lines and the crash-safe rewrite are
 * applog's (applog.h); anything that is not a record is skipped rather
 * than trusted or fatal. */
#include "fleetfs/store/seen.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/store/applog.h"

enum { CLASS_DELIVERED, CLASS_CONSUMED, CLASS_REFUSED, CLASSES };

typedef struct {
    GList link; /* in its class's queue; data points back here */
    uint64_t mark;
    uint8_t state;
    char id[];
} seen_entry;

struct seen_set {
    GMutex lock; /* guards everything below */
    size_t cap[CLASSES];
    GHashTable *set;       /* id -> seen_entry; keys are the entries' own ids */
    GQueue order[CLASSES]; /* of seen_entry links, oldest at the head */
    applog *log;
};

static const char seen_letters[SEEN__STATES] = {'?', 'd', 'c', 'r', '-'};

static int seen_class(seen_state st)
{
    return st == SEEN_CONSUMED  ? CLASS_CONSUMED
           : st == SEEN_REFUSED ? CLASS_REFUSED
                                : CLASS_DELIVERED;
}

const char *seen_state_name(seen_state st)
{
    static const char *names[SEEN__STATES] = {"none", "delivered", "consumed", "refused", "legacy"};
    return (unsigned)st < SEEN__STATES ? names[st] : "none";
}

static bool seen_id_ok(const char *id, size_t n)
{
    size_t i;

    if (n == 0 || n > SEEN_ID_MAX)
        return false;
    for (i = 0; i < n; i++) {
        if ((unsigned char)id[i] <= ' ' || (unsigned char)id[i] >= 0x7f)
            return false;
    }
    return true;
}

static void seen_unlink(seen_set *s, seen_entry *e)
{
    g_queue_unlink(&s->order[seen_class(e->state)], &e->link);
}

/* Gives id state st (a new entry when absent), newest of its class, and
 * evicts the oldest of that class beyond its cap.  False when st is what
 * id already has (then only the mark changes). */
static bool seen_remember(seen_set *s, const char *id, size_t n, seen_state st, uint64_t mark)
{
    seen_entry *e = g_hash_table_lookup(s->set, id);
    GQueue *q = &s->order[seen_class(st)];

    if (e != NULL && e->state == st) {
        e->mark = mark;
        return false;
    }
    if (e == NULL) {
        e = g_malloc0(sizeof *e + n + 1);
        memcpy(e->id, id, n);
        e->link.data = e;
        g_hash_table_insert(s->set, e->id, e);
    } else {
        seen_unlink(s, e);
    }
    e->state = (uint8_t)st;
    e->mark = mark;
    g_queue_push_tail_link(q, &e->link);
    while (g_queue_get_length(q) > s->cap[seen_class(st)]) {
        seen_entry *old = g_queue_pop_head_link(q)->data;
        g_hash_table_remove(s->set, old->id);
        g_free(old);
    }
    return true;
}

static void seen_line(GString *out, const seen_entry *e)
{
    if (e->state != SEEN_LEGACY) {
        g_string_append_c(out, seen_letters[e->state]);
        g_string_append_c(out, ' ');
    }
    g_string_append(out, e->id);
}

static int seen_compact(seen_set *s)
{
    size_t live = g_hash_table_size(s->set);
    GString *text = g_string_sized_new(live * 36 + 1);
    int rc;

    for (int c = 0; c < CLASSES; c++) {
        for (GList *l = s->order[c].head; l != NULL; l = l->next) {
            seen_line(text, l->data);
            g_string_append_c(text, '\n');
        }
    }
    rc = applog_rewrite(s->log, text, live);
    g_string_free(text, TRUE);
    return rc;
}

/* One loaded line: "<letter> <id>" or a bare id (the old format). */
static void seen_load_line(seen_set *s, const char *line)
{
    seen_state st = SEEN_LEGACY;
    const char *id = line;

    if (line[0] != '\0' && line[1] == ' ') {
        const char *p = memchr(seen_letters + 1, line[0], SEEN__STATES - 2);
        if (p == NULL)
            return;
        st = (seen_state)(p - seen_letters);
        id = line + 2;
    }
    if (!seen_id_ok(id, strlen(id)) || s->cap[seen_class(st)] == 0)
        return;
    if (st == SEEN_LEGACY && g_hash_table_contains(s->set, id))
        return; /* never demote a recorded state to "unknown" */
    seen_remember(s, id, strlen(id), st, 0);
}

seen_set *seen_open(const char *path, const seen_caps *caps, char **err)
{
    seen_set *s;
    GPtrArray *lines = NULL;

    *err = NULL;
    if (caps->delivered + caps->consumed + caps->refused == 0) {
        *err = g_strdup("seen-set capacity must be at least 1");
        return NULL;
    }
    s = g_new0(seen_set, 1);
    g_mutex_init(&s->lock);
    s->cap[CLASS_DELIVERED] = caps->delivered;
    s->cap[CLASS_CONSUMED] = caps->consumed;
    s->cap[CLASS_REFUSED] = caps->refused;
    s->set = g_hash_table_new(g_str_hash, g_str_equal);
    for (int c = 0; c < CLASSES; c++)
        g_queue_init(&s->order[c]);
    s->log = applog_open(path, APPLOG_WRITE, SEEN_ID_MAX + 2, &lines, err);
    if (!s->log) {
        char *e = *err;
        *err = g_strdup_printf("seen-set %s", e);
        g_free(e);
        seen_close(s);
        return NULL;
    }
    for (guint i = 0; i < lines->len; i++)
        seen_load_line(s, lines->pdata[i]);
    g_ptr_array_free(lines, TRUE);
    if (applog_wants_compact(s->log, g_hash_table_size(s->set)) && seen_compact(s) < 0) {
        *err = g_strdup_printf("seen-set %s: %s", path, g_strerror(errno));
        seen_close(s);
        return NULL;
    }
    return s;
}

seen_state seen_get(seen_set *s, const char *id, uint64_t *mark)
{
    seen_entry *e;
    seen_state st = SEEN_NONE;

    if (mark)
        *mark = 0;
    if (id == NULL)
        return SEEN_NONE;
    g_mutex_lock(&s->lock);
    e = g_hash_table_lookup(s->set, id);
    if (e) {
        st = (seen_state)e->state;
        if (mark)
            *mark = e->mark;
    }
    g_mutex_unlock(&s->lock);
    return st;
}

int seen_put(seen_set *s, const char *id, seen_state st, uint64_t mark)
{
    size_t n = id != NULL ? strnlen(id, SEEN_ID_MAX + 1) : 0;
    seen_entry *e;
    GString *line;
    int rc = 0;

    if (!seen_id_ok(id, n) || st == SEEN_NONE || st == SEEN_LEGACY || st >= SEEN__STATES ||
        s->cap[seen_class(st)] == 0) {
        errno = EINVAL;
        return -1;
    }
    g_mutex_lock(&s->lock);
    if (!seen_remember(s, id, n, st, mark)) {
        g_mutex_unlock(&s->lock);
        return 1;
    }
    /* the newest of a class with a cap >= 1 is never the one evicted */
    e = g_hash_table_lookup(s->set, id);
    line = g_string_sized_new(n + 3);
    seen_line(line, e);
    if (applog_append(s->log, line->str) < 0)
        rc = -1;
    else if (applog_wants_compact(s->log, g_hash_table_size(s->set)))
        rc = seen_compact(s);
    g_string_free(line, TRUE);
    g_mutex_unlock(&s->lock);
    return rc;
}

bool seen_full(seen_set *s, seen_state st, uint64_t *mark)
{
    GQueue *q;
    bool full;

    if (mark)
        *mark = 0;
    if (st == SEEN_NONE || st >= SEEN__STATES)
        return false;
    g_mutex_lock(&s->lock);
    q = &s->order[seen_class(st)];
    full = s->cap[seen_class(st)] > 0 && g_queue_get_length(q) >= s->cap[seen_class(st)];
    if (full && mark)
        *mark = ((seen_entry *)q->head->data)->mark;
    g_mutex_unlock(&s->lock);
    return full;
}

size_t seen_count(seen_set *s, seen_state st)
{
    size_t n = 0;

    g_mutex_lock(&s->lock);
    if (st == SEEN_NONE) {
        n = g_hash_table_size(s->set);
    } else {
        for (GList *l = s->order[seen_class(st)].head; l; l = l->next)
            n += ((seen_entry *)l->data)->state == st;
    }
    g_mutex_unlock(&s->lock);
    return n;
}

void seen_close(seen_set *s)
{
    if (s == NULL)
        return;
    applog_close(s->log);
    g_hash_table_destroy(s->set);
    for (int c = 0; c < CLASSES; c++) {
        GList *l;
        while ((l = g_queue_pop_head_link(&s->order[c])) != NULL)
            g_free(l->data);
    }
    g_mutex_clear(&s->lock);
    g_free(s);
}
