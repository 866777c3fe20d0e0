/* SPDX-License-Identifier: Apache-2.0 */
/* asked.c — the requester's record of its control requests (asked.h).
 *
 * Memory holds every kept request in the order asked (a GPtrArray of
 * ak_entry), the file one line per change (applog, written: losing the
 * last change to a power cut costs a status line, not a pane), compacted
 * from memory when it holds twice the kept lines. The file is untrusted
 * on load like every state file: a line that does not parse into a valid
 * record is skipped and logged. An answer's detail is the far host's
 * text; it was checked plain by ctl_decode and is cleaned again here
 * before it reaches the file a person reads. */
#include "fleetfs/spawn/asked.h"
#include "fleetfs/base/log.h"
#include "fleetfs/store/applog.h"
#include "fleetfs/wire/names.h"

#include <errno.h>
#include <glib.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AK_MAX_LINE 2048

typedef struct {
    char request_id[ENV_ID_LEN + 1];
    char request[8]; /* spawn | stop */
    char host[64];
    char profile[CTL_NAME_MAX + 1];
    char name[CTL_NAME_MAX + 1];
    char gid[CTL_GID_MAX + 1];
    char state[16];
    char detail[256];
    int64_t state_at_ms;
    int64_t expires_ms;
} ak_entry;

struct ak_book {
    applog *log;
    GPtrArray *v; /* ak_entry*, owned, oldest first */
    int64_t grace_ms;
};

static json_t *ak_json(const ak_entry *e, bool file)
{
    char at[40], exp[40];
    json_t *o;

    env_time_format(e->state_at_ms, at);
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "requestId", e->request_id, "request",
                  e->request, "profile", e->profile, "name", e->name, "gid", e->gid, "state",
                  e->state, "stateAt", at, "detail", e->detail);
    if (o && file) {
        env_time_format(e->expires_ms, exp);
        json_object_set_new(o, "host", json_string(e->host));
        json_object_set_new(o, "expiresAt", json_string(exp));
    }
    return o;
}

static char *ak_line(const ak_entry *e, bool file)
{
    json_t *o = ak_json(e, file);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    json_decref(o);
    return s;
}

static bool ak_str(json_t *o, const char *key, char *dst, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, key));

    if (!s || strlen(s) >= cap || !env_text_plain(s, strlen(s)))
        return false;
    memcpy(dst, s, strlen(s) + 1);
    return true;
}

static bool ak_parse(const char *line, ak_entry *e)
{
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
    char at[40], exp[40];
    bool ok;

    memset(e, 0, sizeof *e);
    ok = json_is_object(o) && ak_str(o, "requestId", e->request_id, sizeof e->request_id) &&
         ak_str(o, "request", e->request, sizeof e->request) &&
         ak_str(o, "host", e->host, sizeof e->host) &&
         ak_str(o, "profile", e->profile, sizeof e->profile) &&
         ak_str(o, "name", e->name, sizeof e->name) && ak_str(o, "gid", e->gid, sizeof e->gid) &&
         ak_str(o, "state", e->state, sizeof e->state) &&
         ak_str(o, "detail", e->detail, sizeof e->detail) && ak_str(o, "stateAt", at, sizeof at) &&
         ak_str(o, "expiresAt", exp, sizeof exp);
    json_decref(o);
    return ok && env_id_valid(e->request_id) && name_valid(e->host) &&
           (!strcmp(e->request, CTL_TYPE_SPAWN) || !strcmp(e->request, CTL_TYPE_STOP)) &&
           (!strcmp(e->state, "requested") || ctl_state_valid(e->state)) &&
           env_time_parse(at, &e->state_at_ms) == 0 && env_time_parse(exp, &e->expires_ms) == 0;
}

static ak_entry *ak_find(const ak_book *b, const char *request_id)
{
    for (guint i = 0; i < b->v->len; i++)
        if (!strcmp(((ak_entry *)b->v->pdata[i])->request_id, request_id))
            return b->v->pdata[i];
    return NULL;
}

/* e becomes its request's state in memory (the oldest go past AK_KEEP). */
static void ak_apply(ak_book *b, const ak_entry *e)
{
    ak_entry *have = ak_find(b, e->request_id);

    if (have) {
        *have = *e;
        return;
    }
    g_ptr_array_add(b->v, g_memdup2(e, sizeof *e));
    while (b->v->len > AK_KEEP)
        g_ptr_array_remove_index(b->v, 0);
}

static GString *ak_render_file(void *ud)
{
    ak_book *b = ud;
    GString *g = g_string_new(NULL);

    for (guint i = 0; i < b->v->len; i++) {
        char *s = ak_line(b->v->pdata[i], true);

        if (s)
            g_string_append_printf(g, "%s\n", s);
        free(s);
    }
    return g;
}

/* The file first, then memory. */
static int ak_write(ak_book *b, const ak_entry *e)
{
    char *line = ak_line(e, true);
    int rc;

    if (!line) {
        errno = EINVAL;
        return -1;
    }
    rc = applog_append(b->log, line);
    free(line);
    if (rc < 0)
        return -1;
    ak_apply(b, e);
    if (applog_wants_compact(b->log, b->v->len)) {
        GString *g = ak_render_file(b);

        if (applog_rewrite(b->log, g, b->v->len) < 0)
            log_warn("spawn: cannot compact %s: %s (tried again later)", applog_path(b->log),
                     g_strerror(errno));
        g_string_free(g, TRUE);
    }
    return 0;
}

ak_book *ak_open(const char *path, char **err)
{
    ak_book *b = g_new0(ak_book, 1);
    GPtrArray *lines = NULL;

    b->log = applog_open(path, APPLOG_WRITE, AK_MAX_LINE, &lines, err);
    if (!b->log) {
        g_free(b);
        return NULL;
    }
    b->v = g_ptr_array_new_with_free_func(g_free);
    b->grace_ms = AK_GRACE_MS;
    for (guint i = 0; i < lines->len; i++) {
        ak_entry e;

        if (ak_parse(lines->pdata[i], &e))
            ak_apply(b, &e);
        else
            log_warn("spawn: %s line %u is not a request record; skipped", path, i + 1);
    }
    g_ptr_array_free(lines, TRUE);
    return b;
}

void ak_close(ak_book *b)
{
    if (!b)
        return;
    applog_close(b->log);
    g_ptr_array_free(b->v, TRUE);
    g_free(b);
}

int ak_requested(ak_book *b, const ctl_env *req, int64_t now_ms)
{
    ak_entry e = {.state_at_ms = now_ms};

    g_strlcpy(e.request_id, req->msgId, sizeof e.request_id);
    g_strlcpy(e.request, req->type, sizeof e.request);
    g_strlcpy(e.host, req->to, sizeof e.host);
    g_strlcpy(e.profile, req->profile, sizeof e.profile);
    g_strlcpy(e.name, req->name, sizeof e.name);
    g_strlcpy(e.gid, req->gid, sizeof e.gid);
    g_strlcpy(e.state, "requested", sizeof e.state);
    if (env_time_parse(req->expiresAt, &e.expires_ms) < 0)
        e.expires_ms = now_ms + CTL_TTL_MS;
    return ak_write(b, &e);
}

int ak_answer(ak_book *b, const ctl_env *ans, int64_t now_ms, char *why, size_t n)
{
    ak_entry *have = ak_find(b, ans->requestId), e;

    if (!have) {
        snprintf(why, n, "an answer to request %s, which this host did not send (or forgot)",
                 ans->requestId);
        return -1;
    }
    if (strcmp(have->host, ans->from) != 0) {
        snprintf(why, n, "an answer to request %s from %s; it was sent to %s", ans->requestId,
                 ans->from, have->host);
        return -1;
    }
    if (strcmp(have->state, "requested") != 0) {
        snprintf(why, n, "request %s is %s already; a second answer changes nothing",
                 ans->requestId, have->state);
        return -1;
    }
    e = *have;
    g_strlcpy(e.state, ans->state, sizeof e.state);
    g_strlcpy(e.detail, ans->detail, sizeof e.detail);
    log_clean(e.detail);
    if (ans->gid[0])
        g_strlcpy(e.gid, ans->gid, sizeof e.gid);
    e.state_at_ms = now_ms;
    if (ak_write(b, &e) < 0) {
        snprintf(why, n, "cannot record the answer: %s", g_strerror(errno));
        return -1;
    }
    return 0;
}

void ak_set_grace(ak_book *b, int64_t grace_ms)
{
    b->grace_ms = grace_ms < 0 ? 0 : grace_ms;
}

size_t ak_expire(ak_book *b, int64_t now_ms)
{
    size_t changed = 0;

    for (guint i = 0; i < b->v->len; i++) {
        ak_entry e = *(ak_entry *)b->v->pdata[i];

        if (strcmp(e.state, "requested") != 0 || now_ms < e.expires_ms + b->grace_ms)
            continue;
        g_strlcpy(e.state, "failed", sizeof e.state);
        g_strlcpy(e.detail, "no answer from the host (is its fleetfs running?)", sizeof e.detail);
        e.state_at_ms = now_ms;
        if (ak_write(b, &e) == 0)
            changed++;
    }
    return changed;
}

char *ak_render(const ak_book *b, const char *host, size_t *len)
{
    GString *g = g_string_new(NULL);

    for (guint i = 0; i < b->v->len; i++) {
        const ak_entry *e = b->v->pdata[i];
        char *s;

        if (strcmp(e->host, host) != 0 || !(s = ak_line(e, false)))
            continue;
        g_string_append_printf(g, "%s\n", s);
        free(s);
    }
    *len = g->len;
    return g_string_free(g, FALSE);
}
