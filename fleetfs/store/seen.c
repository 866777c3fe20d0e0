/* seen.c — the persisted, bounded msgId set behind the replay check.
 *
 * Memory holds exactly the newest cap ids: a hash table for the lookup
 * every delivery makes, and a queue in arrival order for eviction.  The
 * file is an applog (APPLOG_WRITE: an add survives a daemon crash) of the
 * same ids; letting it run to 2 x cap lines before it is rewritten with the
 * newest cap makes the rewrite cost amortised O(1) per add.  Loading, torn
 * lines and the crash-safe rewrite are applog's (applog.h); anything that
 * is not an id is skipped rather than trusted or fatal. */
#include "fleetfs/store/seen.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/store/applog.h"

struct seen_set {
    GMutex lock; /* guards everything below */
    size_t cap;
    GHashTable *set; /* id -> id; keys borrowed from order */
    GQueue order;    /* owned ids, oldest at the head */
    applog *log;
};

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

/* Takes ownership of id. False (and id freed) when already present. */
static bool seen_remember(seen_set *s, char *id)
{
    char *old;

    if (g_hash_table_contains(s->set, id)) {
        g_free(id);
        return false;
    }
    g_queue_push_tail(&s->order, id);
    g_hash_table_add(s->set, id);
    while (g_queue_get_length(&s->order) > s->cap) {
        old = g_queue_pop_head(&s->order);
        g_hash_table_remove(s->set, old);
        g_free(old);
    }
    return true;
}

static int seen_compact(seen_set *s)
{
    GString *text = g_string_sized_new(s->cap * 33);
    int rc;
    for (GList *l = s->order.head; l != NULL; l = l->next) {
        g_string_append(text, l->data);
        g_string_append_c(text, '\n');
    }
    rc = applog_rewrite(s->log, text, g_queue_get_length(&s->order));
    g_string_free(text, TRUE);
    return rc;
}

seen_set *seen_open(const char *path, size_t cap, char **err)
{
    seen_set *s;
    GPtrArray *lines = NULL;

    *err = NULL;
    if (cap == 0) {
        *err = g_strdup("seen-set capacity must be at least 1");
        return NULL;
    }
    s = g_new0(seen_set, 1);
    g_mutex_init(&s->lock);
    s->cap = cap;
    s->set = g_hash_table_new(g_str_hash, g_str_equal);
    g_queue_init(&s->order);
    s->log = applog_open(path, APPLOG_WRITE, SEEN_ID_MAX, &lines, err);
    if (!s->log) {
        char *e = *err;
        *err = g_strdup_printf("seen-set %s", e);
        g_free(e);
        seen_close(s);
        return NULL;
    }
    for (guint i = 0; i < lines->len; i++) {
        const char *id = lines->pdata[i];
        if (seen_id_ok(id, strlen(id)))
            seen_remember(s, g_strdup(id));
    }
    g_ptr_array_free(lines, TRUE);
    if (applog_lines(s->log) >= 2 * cap && seen_compact(s) < 0) {
        *err = g_strdup_printf("seen-set %s: %s", path, g_strerror(errno));
        seen_close(s);
        return NULL;
    }
    return s;
}

bool seen_contains(seen_set *s, const char *id)
{
    bool r;

    if (id == NULL)
        return false;
    g_mutex_lock(&s->lock);
    r = g_hash_table_contains(s->set, id);
    g_mutex_unlock(&s->lock);
    return r;
}

int seen_add(seen_set *s, const char *id)
{
    size_t n = id != NULL ? strnlen(id, SEEN_ID_MAX + 1) : 0;
    char line[SEEN_ID_MAX + 1];
    int rc = 0;

    if (!seen_id_ok(id, n)) {
        errno = EINVAL;
        return -1;
    }
    g_mutex_lock(&s->lock);
    if (!seen_remember(s, g_strndup(id, n))) {
        g_mutex_unlock(&s->lock);
        return 1;
    }
    memcpy(line, id, n);
    line[n] = '\0';
    if (applog_append(s->log, line) < 0)
        rc = -1;
    else if (applog_lines(s->log) >= 2 * s->cap)
        rc = seen_compact(s);
    g_mutex_unlock(&s->lock);
    return rc;
}

size_t seen_count(seen_set *s)
{
    size_t n;

    g_mutex_lock(&s->lock);
    n = g_queue_get_length(&s->order);
    g_mutex_unlock(&s->lock);
    return n;
}

void seen_close(seen_set *s)
{
    if (s == NULL)
        return;
    applog_close(s->log);
    g_hash_table_destroy(s->set);
    g_queue_clear_full(&s->order, g_free);
    g_mutex_clear(&s->lock);
    g_free(s);
}
