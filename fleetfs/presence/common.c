/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/common.c — what every file of the presence table uses
 * and nothing of it calls back: the monotonic clock, an entry made or
 * freed, sorted name lists, the notes a change leaves for watchers and
 * their delivery (through the hooks, after the lock), and words: an age,
 * a state, a heartbeat's text cut plain.  The bottom of presence/: the
 * table (presence.c), heartbeats in (receive.c) and out (heartbeat.c),
 * the view, groups and scope all call it; it calls none of them.
 * The table and its rules: presence.h, pr_int.h.
 */
#include "fleetfs/presence/pr_int.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/wire/envelope.h"

int64_t pri_mono_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

void pri_agent_free(gpointer p)
{
    pr_agent *a = p;
    g_strfreev(a->groups);
    g_free(a);
}

pr_lead *pri_lead_new(presence *pr, const char *id)
{
    pr_lead *l = g_new0(pr_lead, 1);
    g_strlcpy(l->id, id, sizeof l->id);
    g_hash_table_insert(pr->leads, l->id, l);
    return l;
}

gint pri_cmp_str_data(gconstpointer a, gconstpointer b, gpointer ud)
{
    (void)ud;
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A sorted g_strdupv of a NULL-terminated list (an empty one when NULL). */
char **pri_sorted_copy(char **v)
{
    char **out = v ? g_strdupv(v) : g_new0(char *, 1);
    g_qsort_with_data(out, (gint)g_strv_length(out), sizeof(char *),
                      (GCompareDataFunc)pri_cmp_str_data, NULL);
    return out;
}

gint pri_cmp_str_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **pri_sorted_copy_free(char **v)
{
    char **out = pri_sorted_copy(v);
    g_strfreev(v);
    return out;
}

/* Both NULL, or both lists with the same names in the same order. */
bool pri_strv_same(char **a, char **b)
{
    if (!a || !b)
        return a == b;
    return g_strv_equal((const gchar *const *)a, (const gchar *const *)b);
}

gint pri_cmp_agent(gconstpointer a, gconstpointer b)
{
    return strcmp((*(pr_agent *const *)a)->gid, (*(pr_agent *const *)b)->gid);
}

void pri_note(GArray *notes, int kind, const char *path, const char *name)
{
    pr_note n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    g_strlcpy(n.path, path, sizeof n.path);
    if (name)
        g_strlcpy(n.name, name, sizeof n.name);
    g_array_append_val(notes, n);
}

void pri_deliver_notes(presence *pr, GArray *notes)
{
    for (guint i = 0; i < notes->len; i++) {
        pr_note *n = &g_array_index(notes, pr_note, i);
        if (n->kind == 0 && pr->hooks.changed)
            pr->hooks.changed(pr->hooks.ud, n->path);
        else if (n->kind != 0 && pr->hooks.entry)
            pr->hooks.entry(pr->hooks.ud, n->path, n->name, n->kind == 1);
    }
    g_array_free(notes, TRUE);
}

/* words cut to fit n bytes on a character boundary, controls made spaces */
void pri_plain_copy(char *out, size_t n, const char *in)
{
    size_t len = 0;
    g_strlcpy(out, in ? in : "", n);
    len = strlen(out);
    while (len > 0 && !g_utf8_validate(out, (gssize)len, NULL))
        out[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            out[i] = ' ';
    if (!env_text_plain(out, len))
        g_strlcpy(out, "unknown", n);
}

const char *pr_state_name(pr_state s)
{
    switch (s) {
    case PR_LIVE:
        return "live";
    case PR_STALE:
        return "stale";
    case PR_LEFT:
        return "left";
    case PR_NEVER:
        break;
    }
    return "never";
}

void pri_fmt_age(int64_t ms, char *out, size_t n)
{
    int64_t s = ms / 1000;
    if (s < 120)
        snprintf(out, n, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(out, n, "%lldm", (long long)(s / 60));
    else
        snprintf(out, n, "%lldh", (long long)(s / 3600));
}

void pr_words(const pr_info *i, char *out, size_t n)
{
    char age[32];
    if (i->state == PR_NEVER) {
        snprintf(out, n, "never");
        return;
    }
    pri_fmt_age(i->age_ms, age, sizeof age);
    if (i->state == PR_LEFT)
        snprintf(out, n, "left (unmounted %s ago)", age);
    else
        snprintf(out, n, "%s (%s ago)", pr_state_name(i->state), age);
}
