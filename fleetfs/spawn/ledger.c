/* SPDX-License-Identifier: Apache-2.0 */
/* ledger.c — the far host's record of the agents it started (ledger.h).
 *
 * Memory holds only the live entries (starting, ready), in a GPtrArray in
 * the order first recorded, so the file is compacted from them when it
 * holds twice as many lines (applog). Every line is fsync'd: a `starting`
 * that did not reach the disk would make a pane nobody knows of after a
 * power cut. A file line is untrusted on load, like any state file: each
 * field is checked (ids, names, states) and a bad line is skipped and
 * logged, never half-believed. */
#include "fleetfs/spawn/ledger.h"
#include "fleetfs/base/log.h"
#include "fleetfs/store/applog.h"
#include "fleetfs/wire/names.h"

#include <errno.h>
#include <glib.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define LG_MAX_LINE 2048

struct lg_ledger {
    applog *log;
    GPtrArray *live; /* lg_entry*, owned */
};

static const char *const lg_states[] = {"starting", "ready", "failed", "stopped"};

const char *lg_state_name(lg_state s)
{
    return s <= LG_STOPPED ? lg_states[s] : "?";
}

static bool lg_is_live(lg_state s)
{
    return s == LG_STARTING || s == LG_READY;
}

static char *lg_render_one(const lg_entry *e)
{
    char at[40];
    json_t *o;
    char *s;

    env_time_format(e->at_ms, at);
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "gid", e->gid, "name",
                  e->name, "profile", e->profile, "requestId", e->request_id, "requester",
                  e->requester, "backend", e->backend, "pane", e->pane, "window", e->window,
                  "state", lg_state_name(e->state), "at", at);
    s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* field into dst (cap), a plain string that fits; false otherwise. */
static bool lg_field(json_t *o, const char *key, char *dst, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, key));

    if (!s || strlen(s) >= cap || !env_text_plain(s, strlen(s)))
        return false;
    memcpy(dst, s, strlen(s) + 1);
    return true;
}

static bool lg_parse(const char *line, lg_entry *e)
{
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
    char state[16], at[40];
    bool ok;

    memset(e, 0, sizeof *e);
    ok = json_is_object(o) && lg_field(o, "gid", e->gid, sizeof e->gid) &&
         lg_field(o, "name", e->name, sizeof e->name) &&
         lg_field(o, "profile", e->profile, sizeof e->profile) &&
         lg_field(o, "requestId", e->request_id, sizeof e->request_id) &&
         lg_field(o, "requester", e->requester, sizeof e->requester) &&
         lg_field(o, "backend", e->backend, sizeof e->backend) &&
         lg_field(o, "pane", e->pane, sizeof e->pane) &&
         lg_field(o, "window", e->window, sizeof e->window) &&
         lg_field(o, "state", state, sizeof state) && lg_field(o, "at", at, sizeof at);
    json_decref(o);
    if (!ok || !gid_valid(e->gid) || !agent_name_valid(e->name) || !agent_name_valid(e->profile) ||
        !env_id_valid(e->request_id) || !name_valid(e->requester) ||
        (strcmp(e->backend, "tmux") && strcmp(e->backend, "herdr")) ||
        env_time_parse(at, &e->at_ms) < 0)
        return false;
    for (size_t i = 0; i < G_N_ELEMENTS(lg_states); i++)
        if (!strcmp(state, lg_states[i])) {
            e->state = (lg_state)i;
            return true;
        }
    return false;
}

static int lg_index(const lg_ledger *l, const char *gid)
{
    for (guint i = 0; i < l->live->len; i++)
        if (!strcmp(((lg_entry *)l->live->pdata[i])->gid, gid))
            return (int)i;
    return -1;
}

/* e becomes gid's state in memory. */
static void lg_apply(lg_ledger *l, const lg_entry *e)
{
    int i = lg_index(l, e->gid);

    if (i >= 0 && lg_is_live(e->state))
        *(lg_entry *)l->live->pdata[i] = *e;
    else if (i >= 0)
        g_ptr_array_remove_index(l->live, (guint)i);
    else if (lg_is_live(e->state))
        g_ptr_array_add(l->live, g_memdup2(e, sizeof *e));
}

lg_ledger *lg_open(const char *path, char **err)
{
    lg_ledger *l = g_new0(lg_ledger, 1);
    GPtrArray *lines = NULL;

    l->log = applog_open(path, APPLOG_FSYNC, LG_MAX_LINE, &lines, err);
    if (!l->log) {
        g_free(l);
        return NULL;
    }
    l->live = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < lines->len; i++) {
        lg_entry e;

        if (lg_parse(lines->pdata[i], &e))
            lg_apply(l, &e);
        else
            log_warn("spawn: %s line %u is not a spawn record; skipped", path, i + 1);
    }
    g_ptr_array_free(lines, TRUE);
    return l;
}

void lg_close(lg_ledger *l)
{
    if (!l)
        return;
    applog_close(l->log);
    g_ptr_array_free(l->live, TRUE);
    g_free(l);
}

static GString *lg_render(void *ud)
{
    lg_ledger *l = ud;
    GString *g = g_string_new(NULL);

    for (guint i = 0; i < l->live->len; i++) {
        char *s = lg_render_one(l->live->pdata[i]);

        if (s)
            g_string_append_printf(g, "%s\n", s);
        free(s);
    }
    return g;
}

int lg_record(lg_ledger *l, const lg_entry *e)
{
    char *line = lg_render_one(e);
    int rc;

    if (!line) {
        errno = EINVAL;
        return -1;
    }
    /* the file first: memory never believes what the disk refused */
    rc = applog_append(l->log, line);
    free(line);
    if (rc < 0)
        return -1;
    lg_apply(l, e);
    if (applog_wants_compact(l->log, l->live->len)) {
        GString *g = lg_render(l);

        if (applog_rewrite(l->log, g, l->live->len) < 0)
            log_warn("spawn: cannot compact %s: %s (tried again later)", applog_path(l->log),
                     g_strerror(errno));
        g_string_free(g, TRUE);
    }
    return 0;
}

const lg_entry *lg_find(const lg_ledger *l, const char *gid)
{
    int i = lg_index(l, gid);

    return i < 0 ? NULL : l->live->pdata[i];
}

unsigned lg_running(const lg_ledger *l, const char *profile)
{
    unsigned n = 0;

    for (guint i = 0; i < l->live->len; i++)
        n += !strcmp(((lg_entry *)l->live->pdata[i])->profile, profile);
    return n;
}

const lg_entry *const *lg_live(const lg_ledger *l, size_t *n)
{
    *n = l->live->len;
    return (const lg_entry *const *)l->live->pdata;
}
