/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/journal.c — the injector's at-most-once journal
 * (state_dir/inject.journal, an applog written with APPLOG_FSYNC): one line
 * "word msgId [from expiresAt]" per step, the words injecting, injected,
 * not-typed and uncertain; the last JOURNAL_KEEP msgIds kept in memory and
 * the file compacted to them when it grows past four times that.  What the
 * words mean, and when inject.c writes them, is said in inject.c's header.
 */
#include "fleetfs/inject/slot.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/base/log.h"

static const char *journal_word(const char *w)
{
    static const char *words[] = {"injecting", "injected", "not-typed", "uncertain"};
    for (size_t i = 0; i < G_N_ELEMENTS(words); i++)
        if (strcmp(words[i], w) == 0)
            return words[i];
    return NULL;
}

static void journal_set(inj_slot *in, const char *id, const char *word)
{
    gpointer key;
    if (g_hash_table_contains(in->journal, id)) {
        /* insert keeps the stored key (journal_order points at it) and
         * frees the copy passed here */
        g_hash_table_insert(in->journal, g_strdup(id), (gpointer)word);
        return;
    }
    key = g_strdup(id);
    g_hash_table_insert(in->journal, key, (gpointer)word);
    g_queue_push_tail(&in->journal_order, key);
    while (in->journal_order.length > JOURNAL_KEEP)
        g_hash_table_remove(in->journal, g_queue_pop_head(&in->journal_order));
}

void inj_journal_open(inj_slot *in)
{
    GPtrArray *lines = NULL;
    char *err = NULL;
    in->journal_log = applog_open(in->journal_path, APPLOG_FSYNC, 128, &lines, &err);
    if (!in->journal_log) {
        g_strlcpy(in->journal_err, err, sizeof in->journal_err);
        g_free(err);
        return;
    }
    for (guint i = 0; i < lines->len; i++) {
        gchar **f = g_strsplit(lines->pdata[i], " ", 4);
        const char *w = f[0] ? journal_word(f[0]) : NULL;
        if (w && f[1] && env_id_valid(f[1])) {
            journal_set(in, f[1], w);
            if (f[2] && f[3])
                g_hash_table_replace(in->meta, g_strdup(f[1]),
                                     g_strdup_printf("%s %s", f[2], f[3]));
        }
        g_strfreev(f);
    }
    g_ptr_array_free(lines, TRUE);
}

/* Rewrite the journal with the last word of each remembered msgId. */
static void journal_compact(inj_slot *in)
{
    GString *s = g_string_new(NULL);
    for (GList *l = in->journal_order.head; l; l = l->next) {
        const char *meta = g_hash_table_lookup(in->meta, l->data);
        g_string_append_printf(s, "%s %s%s%s\n", (char *)g_hash_table_lookup(in->journal, l->data),
                               (char *)l->data, meta ? " " : "", meta ? meta : "");
    }
    if (applog_rewrite(in->journal_log, s, in->journal_order.length) < 0)
        log_warn("inject: cannot rewrite %s (%s); it keeps growing until it can", in->journal_path,
                 g_strerror(errno));
    g_string_free(s, TRUE);
}

/* Durable before it returns: the at-most-once promise rests on it.
 * meta: "from expiresAt" (an injecting line), or NULL. */
static bool journal_append(inj_slot *in, const char *word, const char *id, const char *meta)
{
    char line[256];
    snprintf(line, sizeof line, "%s %s%s%s", word, id, meta ? " " : "", meta ? meta : "");
    if (!in->journal_log || applog_append(in->journal_log, line) < 0) {
        if (in->journal_log)
            g_strlcpy(in->journal_err, strerror(errno), sizeof in->journal_err);
        return false;
    }
    journal_set(in, id, journal_word(word));
    if (meta)
        g_hash_table_replace(in->meta, g_strdup(id), g_strdup(meta));
    if (applog_lines(in->journal_log) > 4 * JOURNAL_KEEP)
        journal_compact(in);
    return true;
}

bool inj_journal_write(inj_slot *in, const char *word, const char *id)
{
    return journal_append(in, word, id, NULL);
}

bool inj_journal_write_typing(inj_slot *in, const envelope *e)
{
    char meta[ADDR_MAX_LEN + 64];
    snprintf(meta, sizeof meta, "%s %s", e->from, e->expiresAt);
    return journal_append(in, "injecting", e->msgId, meta);
}

/* The journal's word on messages typed (or being typed) that are not
 * known to the mailbox once their expiresAt passed: it is theirs
 * (journaled.c).  Each msgId is looked at until the mailbox knows it or
 * has settled it. */
void inj_journal_settle(inj_slot *in)
{
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, in->meta);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const char *word = g_hash_table_lookup(in->journal, k);
        gchar **f = g_strsplit(v, " ", 2);
        int r = 0;
        if (word && strcmp(word, "not-typed") != 0 && f[0] && f[1])
            r = mb_settle_journaled(
                in->mb, k, f[0], f[1], !strcmp(word, "injected") ? "injected" : "uncertain",
                !strcmp(word, "injected")
                    ? "typed before fleetfs stopped; its copy never came back (the broker "
                      "dropped it at its expiresAt); not typed again"
                    : "fleetfs stopped while typing it and was back only after its expiresAt "
                      "(the broker had dropped its copy); it is not typed again (at most once)");
        g_strfreev(f);
        if (r >= 0)
            g_hash_table_iter_remove(&it);
    }
}
