/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/witness.c — the hook's reports, checked against what was
 * typed (design in witness.h). */
#include "fleetfs/inject/witness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fleetfs/base/log.h"

#define WIT_KEEP 64 /* texts remembered: the hook reports within seconds */

typedef struct {
    envelope e; /* body NULL: only the addressing is needed for a receipt */
    char *text; /* as typed, normalised (norm) */
    bool finished, reported, sent;
    char detail[256];
} wit_entry;

struct inj_witness {
    GMutex m;
    char *who;
    GQueue entries; /* wit_entry*, oldest first */
    bool seen;
};

inj_witness *wit_new(const char *who)
{
    inj_witness *w = g_new0(inj_witness, 1);
    g_mutex_init(&w->m);
    w->who = g_strdup(who);
    g_queue_init(&w->entries);
    return w;
}

static void entry_free(gpointer p)
{
    wit_entry *x = p;
    g_free(x->text);
    g_free(x);
}

void wit_free(inj_witness *w)
{
    if (!w)
        return;
    g_queue_clear_full(&w->entries, entry_free);
    g_mutex_clear(&w->m);
    g_free(w->who);
    g_free(w);
}

/* A TUI hands a paste's line breaks to its hook as \n (tmux pastes them
 * as \r) and may trim the ends: compare without either. */
static char *norm(const char *s, size_t n)
{
    GString *o = g_string_sized_new(n);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') {
            g_string_append_c(o, '\n');
            if (i + 1 < n && s[i + 1] == '\n')
                i++;
        } else {
            g_string_append_c(o, s[i]);
        }
    }
    return g_strstrip(g_string_free(o, FALSE));
}

static wit_entry *find(inj_witness *w, const char *id)
{
    for (GList *l = w->entries.head; l; l = l->next)
        if (!strcmp(((wit_entry *)l->data)->e.msgId, id))
            return l->data;
    return NULL;
}

void wit_typing(inj_witness *w, const envelope *e, const char *text)
{
    wit_entry *x = g_new0(wit_entry, 1);
    x->e = *e;
    x->e.body = NULL;
    x->e.body_len = 0;
    x->text = norm(text, strlen(text));
    g_mutex_lock(&w->m);
    g_queue_push_tail(&w->entries, x);
    while (w->entries.length > WIT_KEEP)
        entry_free(g_queue_pop_head(&w->entries));
    g_mutex_unlock(&w->m);
}

void wit_forget(inj_witness *w, const char *msg_id)
{
    g_mutex_lock(&w->m);
    wit_entry *x = find(w, msg_id);
    if (x) {
        g_queue_remove(&w->entries, x);
        entry_free(x);
    }
    g_mutex_unlock(&w->m);
}

void wit_finished(inj_witness *w, const char *msg_id)
{
    g_mutex_lock(&w->m);
    wit_entry *x = find(w, msg_id);
    if (x)
        x->finished = true;
    g_mutex_unlock(&w->m);
}

/* What the prompt held against what was typed: the receipt's detail. */
static void judge(wit_entry *x, const char *prompt, size_t got, size_t len)
{
    char *p = norm(prompt, got);
    size_t pl = strlen(p), tl = strlen(x->text);
    if (len == got && !strcmp(p, x->text))
        snprintf(x->detail, sizeof x->detail, "the agent's prompt hook saw it submitted, as typed");
    else if (strstr(p, x->text))
        snprintf(x->detail, sizeof x->detail,
                 "joined: the agent's prompt hook saw it submitted together with %zu bytes "
                 "fleetfs did not type (a person's draft?)",
                 (len - got) + (pl - tl));
    else
        snprintf(x->detail, sizeof x->detail,
                 "altered: the agent's prompt hook saw a prompt with its header submitted, but "
                 "not the text as typed (%zu bytes against %zu typed)",
                 len, tl);
    g_free(p);
}

int wit_report(inj_witness *w, const char *buf, size_t size)
{
    const char *nl = memchr(buf, '\n', size);
    char id[ENV_ID_LEN + 1];
    unsigned long long len;
    int e = 0;
    wit_entry *x;

    if (!nl || sscanf(buf, "%32[0-9a-f] %llu", id, &len) != 2 || !env_id_valid(id) ||
        (size_t)(buf + size - nl - 1) > len) {
        log_warn("inject%s%s: a prompt hook's report is malformed (want '<msgId> <length>\\n"
                 "<prompt>'); ignored",
                 *w->who ? " " : "", w->who);
        return EINVAL;
    }
    g_mutex_lock(&w->m);
    x = find(w, id);
    if (!x) {
        e = ENOENT;
        log_warn("inject%s%s: a prompt hook reported %s, which fleetfs did not type here since "
                 "this mount started; refused (no receipt is sent)",
                 *w->who ? " " : "", w->who, id);
    } else if (x->sent && !x->reported) {
        e = EALREADY;
        log_warn("inject%s%s: a prompt hook reported %s after the sender was told confirmed (the "
                 "agent left idle); nothing more is sent",
                 *w->who ? " " : "", w->who, id);
    } else if (x->reported) {
        e = EALREADY;
        log_warn("inject%s%s: a prompt hook reported %s again (the prompt submitted once more?); "
                 "the first report stands",
                 *w->who ? " " : "", w->who, id);
    } else {
        judge(x, nl + 1, (size_t)(buf + size - nl - 1), (size_t)len);
        x->reported = true;
        w->seen = true;
        log_info("inject%s%s: %s from %s: %s", *w->who ? " " : "", w->who, id, x->e.from,
                 x->detail);
    }
    g_mutex_unlock(&w->m);
    return e;
}

void wit_settled(inj_witness *w, const char *msg_id)
{
    g_mutex_lock(&w->m);
    wit_entry *x = find(w, msg_id);
    if (x)
        x->sent = true;
    g_mutex_unlock(&w->m);
}

bool wit_reported(inj_witness *w, const char *msg_id)
{
    g_mutex_lock(&w->m);
    wit_entry *x = find(w, msg_id);
    bool r = x && x->reported;
    g_mutex_unlock(&w->m);
    return r;
}

bool wit_hook_seen(inj_witness *w)
{
    g_mutex_lock(&w->m);
    bool r = w->seen;
    g_mutex_unlock(&w->m);
    return r;
}

bool wit_take(inj_witness *w, envelope *e, char *detail, size_t n)
{
    bool r = false;
    g_mutex_lock(&w->m);
    for (GList *l = w->entries.head; l && !r; l = l->next) {
        wit_entry *x = l->data;
        if (x->finished && x->reported && !x->sent) {
            x->sent = true;
            *e = x->e;
            e->body = strdup("");
            g_strlcpy(detail, x->detail, n);
            r = true;
        }
    }
    g_mutex_unlock(&w->m);
    return r;
}
