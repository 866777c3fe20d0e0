/* SPDX-License-Identifier: Apache-2.0 */
/* run.c — one control request on the far host, end to end but for the
 * wire (run.h).
 *
 * The order is what keeps "never a pane nobody knows of": the start is
 * recorded (`starting`, fsync'd) before a pane exists, the pane's id is
 * recorded the moment it exists (the backend's `made` callback), and only
 * then does the wait for the agent begin. A fleetfs killed anywhere in
 * between finds the entry on restart (sr_recover), closes that pane and
 * answers `failed`. A start that cannot be recorded is not made; a ready
 * agent that cannot be recorded is closed again. Every refusal and every
 * end is one log line with the requester, the request and the reason. */
#include "fleetfs/spawn/run.h"
#include "fleetfs/base/log.h"
#include "fleetfs/spawn/sandbox.h"
#include "herdr/spawn.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#define SR_CALL_MS(h) ((h)->call_ms > 0 ? (h)->call_ms : 3000)

/* ---- the host as check.c sees it --------------------------------------- */

static bool sr_taken(const char *name, void *arg)
{
    sr_host *h = arg;
    const lg_entry *const *live;
    size_t n;

    live = lg_live(h->ledger, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(live[i]->name, name))
            return true;
    return h->name_taken && h->name_taken(name, h->arg);
}

static unsigned sr_running(const prof *p, void *arg)
{
    return lg_running(((sr_host *)arg)->ledger, p->name);
}

static bool sr_ours(const char *gid, void *arg)
{
    const lg_entry *e = lg_find(((sr_host *)arg)->ledger, gid);

    return e && e->state == LG_READY;
}

static sc_host sr_check_host(sr_host *h)
{
    sc_host c = {h->coord_id, h->spawn_from, h->profiles, sr_taken, sr_running, sr_ours, h};

    return c;
}

/* ---- answers ------------------------------------------------------------ */

static void sr_answer(const sr_host *h, const ctl_env *req, const char *state, const char *gid,
                      const char *detail, int64_t now_ms, ctl_env *answer)
{
    ctl_init(answer, CTL_TYPE_SPAWNED, h->coord_id, req->from, now_ms, CTL_TTL_MS);
    g_strlcpy(answer->requestId, req->msgId, sizeof answer->requestId);
    g_strlcpy(answer->state, state, sizeof answer->state);
    g_strlcpy(answer->gid, gid ? gid : "", sizeof answer->gid);
    g_strlcpy(answer->detail, detail, sizeof answer->detail);
    log_clean(answer->detail);
}

/* ---- closing ------------------------------------------------------------ */

/* A ready agent's herdr pane, closed only while it still holds that
 * agent: herdr may have given the recorded pane id to another pane (its
 * restart renumbers them), and a stop must never close a pane this
 * fleetfs did not make. A start not yet ready has no agent to ask for;
 * its pane is closed by id (recovery of a half-done start). */
static int sr_herdr_close(sr_host *h, const lg_entry *e, char *why, size_t n)
{
    hd_reply rep = {0};
    hd_agent a;
    int k;

    if (e->state != LG_READY)
        return sp_herdr_close(h->herdr, e->pane, SR_CALL_MS(h), why, n);
    k = hd_agent_get(h->herdr, e->pane, SR_CALL_MS(h), &a, &rep);
    if (k == HD_OK && !strcmp(a.name, e->name)) {
        hd_reply_clear(&rep);
        return sp_herdr_close(h->herdr, e->pane, SR_CALL_MS(h), why, n);
    }
    if (k == HD_OK) {
        snprintf(why, n,
                 "herdr pane %s now holds agent '%s', not %s that this fleetfs started: "
                 "left open",
                 e->pane, a.name, e->name);
        hd_reply_clear(&rep);
        return -1;
    }
    if (k == HD_ERR_REMOTE && strcmp(rep.code, "pane_not_found") &&
        strcmp(rep.code, "agent_not_found")) {
        snprintf(why, n, "herdr agent.get %s: %s %s: left open", e->pane, hd_kind_name(k),
                 rep.code);
        hd_reply_clear(&rep);
        return -1;
    }
    hd_reply_clear(&rep);
    if (k != HD_ERR_REMOTE) {
        snprintf(why, n, "herdr pane %s holds no agent %s (agent.get: %s): left open", e->pane,
                 e->name, hd_kind_name(k));
        return -1;
    }
    /* no agent there: gone, or a pane holding no agent now (left open) */
    k = hd_pane_get(h->herdr, e->pane, SR_CALL_MS(h), NULL, &rep);
    if (k == HD_ERR_REMOTE && !strcmp(rep.code, "pane_not_found")) {
        hd_reply_clear(&rep);
        return 0;
    }
    snprintf(why, n,
             "herdr pane %s holds no agent %s now (pane.get: %s %s): left open; close "
             "it by hand if it is the one this fleetfs started",
             e->pane, e->name, hd_kind_name(k), rep.code);
    hd_reply_clear(&rep);
    return -1;
}

/* Closes e's pane, whichever backend made it. 0 closed or gone. */
static int sr_close(sr_host *h, const lg_entry *e, char *why, size_t n)
{
    if (!strcmp(e->backend, "tmux"))
        return e->window[0] ? sp_tmux_close(e->window, e->gid, why, n) : 0;
    if (!h->herdr) {
        snprintf(why, n, "no herdr to close pane %s in", e->pane);
        return -1;
    }
    if (!e->pane[0]) {
        /* made but not recorded: herdr knows the agent by its name */
        hd_reply rep = {0};
        hd_agent a;
        int k = hd_agent_get(h->herdr, e->name, SR_CALL_MS(h), &a, &rep);

        hd_reply_clear(&rep);
        if (k != HD_OK)
            return 0;
        return sp_herdr_close(h->herdr, a.pane_id, SR_CALL_MS(h), why, n);
    }
    return sr_herdr_close(h, e, why, n);
}

/* ---- spawn -------------------------------------------------------------- */

typedef struct {
    sr_host *h;
    lg_entry *e;
} sr_made_ctx;

static void sr_made(const char *pane, const char *window, void *arg)
{
    sr_made_ctx *m = arg;

    g_strlcpy(m->e->pane, pane, sizeof m->e->pane);
    g_strlcpy(m->e->window, window, sizeof m->e->window);
    if (lg_record(m->h->ledger, m->e) < 0)
        log_warn("spawn: %s: cannot record pane %s (%s); a restart would look for it by its "
                 "name",
                 m->e->gid, pane, g_strerror(errno));
}

static sp_request sr_request(sr_host *h, const sc_spawn *ok, sr_made_ctx *m)
{
    const prof *p = ok->profile;
    sp_request rq = {.name = ok->name,
                     .dir = ok->dir[0] ? ok->dir : p->dir_root,
                     .ready_ms = (int)p->ready_timeout_ms,
                     .kind = p->kind,
                     .args = (const char *const *)p->args,
                     .argv = (const char *const *)p->command,
                     .program = p->program,
                     .tag = ok->gid,
                     .session = h->tmux_session,
                     .quiet_ms = h->quiet_ms,
                     .made = sr_made,
                     .made_arg = m};

    return rq;
}

/* Whether ok's agent can be started as its profile says: confined (the
 * default) only through tmux, with a sandbox tool here and a directory to
 * give it.  0, or -1 and why (nothing started: the request is refused). */
static int sr_confinable(sr_host *h, const sc_spawn *ok, char *why, size_t n)
{
    const prof *p = ok->profile;

    if (p->unconfined)
        return 0;
    if (strcmp(h->backend, "tmux") != 0) {
        snprintf(why, n,
                 "profile %s: herdr starts the agent itself (agent.start), so this host cannot "
                 "confine it; the agent is not started unconfined: set sandbox = none in "
                 "[profile %s] to start it with this daemon's reach, or use inject=tmux",
                 p->name, p->name);
        return -1;
    }
    if (!h->sandbox || !h->sandbox->tool) {
        snprintf(why, n,
                 "profile %s: no sandbox on this host: bwrap is not installed (Debian: apt-get "
                 "install bubblewrap); the agent is not started unconfined: install it, or set "
                 "sandbox = none in [profile %s]",
                 p->name, p->name);
        return -1;
    }
    if (!ok->dir[0] && !p->dir_root) {
        snprintf(why, n,
                 "profile %s: a sandboxed agent writes only in its directory, and the request "
                 "names none and the profile has no dir_root",
                 p->name);
        return -1;
    }
    return 0;
}

/* The start itself, once checked and recorded as starting. */
static int sr_start(sr_host *h, const sc_spawn *ok, lg_entry *e, char *why, size_t n)
{
    sr_made_ctx m = {h, e};
    sp_request rq = sr_request(h, ok, &m);
    sp_result out;
    char **confined = NULL;
    int rc;

    if (!strcmp(h->backend, "tmux") && rq.argv && !ok->profile->unconfined) {
        confined = sb_argv(h->sandbox, ok->gid, rq.dir, rq.argv, why, n);
        if (!confined)
            return -1;
        if (h->prepare && h->prepare(ok->name, h->arg, why, n) < 0) {
            g_strfreev(confined);
            return -1;
        }
        rq.argv = (const char *const *)confined;
    } else if (ok->profile->unconfined) {
        log_warn("spawn: %s starts unconfined (profile %s: sandbox = none): it can read this "
                 "host's key, trust directory and every agent's mail under the mount",
                 ok->gid, ok->profile->name);
    }

    if (!strcmp(h->backend, "tmux") && !rq.argv) {
        snprintf(why, n, "profile %s has no command for tmux", ok->profile->name);
        return -1;
    }
    if (!strcmp(h->backend, "herdr") && (!rq.kind || !h->herdr)) {
        snprintf(why, n, "profile %s has no kind for herdr", ok->profile->name);
        return -1;
    }
    rc = !strcmp(h->backend, "tmux") ? sp_tmux_start(&rq, &out)
                                     : sp_herdr_start(h->herdr, &rq, SR_CALL_MS(h), &out);
    if (confined && rc < 0 && h->unprepare)
        h->unprepare(ok->gid, h->arg);
    g_strfreev(confined);
    if (rc < 0) {
        snprintf(why, n, "%s", out.why);
        return -1;
    }
    g_strlcpy(e->pane, out.pane_id, sizeof e->pane);
    g_strlcpy(e->window, out.window_id, sizeof e->window);
    return 0;
}

sc_verdict sr_spawn(sr_host *h, const ctl_env *req, int64_t now_ms, ctl_env *answer)
{
    sc_host c = sr_check_host(h);
    sc_spawn ok;
    lg_entry e = {.state = LG_STARTING, .at_ms = now_ms};
    char why[600];
    sc_verdict v = sc_check_spawn(&c, req, &ok, why, sizeof why);

    if (v == SC_OK && sr_confinable(h, &ok, why, sizeof why) < 0)
        v = SC_NO_SANDBOX;
    if (v != SC_OK) {
        log_warn("spawn: refused %s's request %s (%s, profile %s): %s", req->from, req->msgId,
                 req->name, req->profile, why);
        sr_answer(h, req, "refused", NULL, why, now_ms, answer);
        return v;
    }
    g_strlcpy(e.gid, ok.gid, sizeof e.gid);
    g_strlcpy(e.name, ok.name, sizeof e.name);
    g_strlcpy(e.profile, ok.profile->name, sizeof e.profile);
    g_strlcpy(e.request_id, req->msgId, sizeof e.request_id);
    g_strlcpy(e.requester, req->from, sizeof e.requester);
    g_strlcpy(e.backend, h->backend, sizeof e.backend);
    if (lg_record(h->ledger, &e) < 0) {
        snprintf(why, sizeof why, "this host cannot record the start (%s); nothing was started",
                 g_strerror(errno));
    } else if (sr_start(h, &ok, &e, why, sizeof why) < 0) {
        e.state = LG_FAILED;
        if (lg_record(h->ledger, &e) < 0)
            log_warn("spawn: %s: cannot record its failure (%s)", e.gid, g_strerror(errno));
    } else {
        e.state = LG_READY;
        if (lg_record(h->ledger, &e) == 0) {
            log_info("spawn: started %s for %s (request %s, profile %s) in %s %s", e.gid, req->from,
                     req->msgId, e.profile, h->backend, e.pane);
            snprintf(why, sizeof why, "ready in %s pane %s", h->backend, e.pane);
            sr_answer(h, req, "ready", e.gid, why, now_ms, answer);
            return SC_OK;
        }
        snprintf(why, sizeof why, "this host cannot record the agent (%s); its pane was closed",
                 g_strerror(errno));
        sr_close(h, &e, why + strlen(why), sizeof why - strlen(why));
    }
    log_warn("spawn: %s for %s (request %s) failed: %s", ok.gid, req->from, req->msgId, why);
    sr_answer(h, req, "failed", ok.gid, why, now_ms, answer);
    return SC_OK;
}

/* Ends e, a start that will not be ready: its pane closed, recorded
 * failed, logged, *answer `failed` with why and what became of the pane. */
static void sr_fail_entry(sr_host *h, lg_entry e, const char *why, int64_t now_ms, ctl_env *answer)
{
    char detail[600];
    ctl_env req = {0};

    g_strlcpy(req.msgId, e.request_id, sizeof req.msgId);
    g_strlcpy(req.from, e.requester, sizeof req.from);
    snprintf(detail, sizeof detail, "%s; ", why);
    if (sr_close(h, &e, detail + strlen(detail), sizeof detail - strlen(detail)) == 0)
        g_strlcat(detail, "its pane was closed", sizeof detail);
    e.state = LG_FAILED;
    e.at_ms = now_ms;
    if (lg_record(h->ledger, &e) < 0)
        log_warn("spawn: %s: cannot record its failure (%s)", e.gid, g_strerror(errno));
    log_warn("spawn: %s for %s (request %s) failed: %s", e.gid, e.requester, e.request_id, detail);
    sr_answer(h, &req, "failed", e.gid, detail, now_ms, answer);
}

void sr_abandon(sr_host *h, const char *gid, const char *why, int64_t now_ms, ctl_env *answer)
{
    const lg_entry *found = lg_find(h->ledger, gid);

    if (found)
        sr_fail_entry(h, *found, why, now_ms, answer);
}

/* ---- stop --------------------------------------------------------------- */

sc_verdict sr_stop(sr_host *h, const ctl_env *req, int64_t now_ms, ctl_env *answer)
{
    sc_host c = sr_check_host(h);
    char why[600];
    sc_verdict v = sc_check_stop(&c, req, why, sizeof why);
    lg_entry e;

    if (v != SC_OK) {
        log_warn("spawn: refused %s's stop %s of %s: %s", req->from, req->msgId, req->gid, why);
        sr_answer(h, req, "refused", req->gid, why, now_ms, answer);
        return v;
    }
    e = *lg_find(h->ledger, req->gid);
    if (sr_close(h, &e, why, sizeof why) < 0) {
        log_warn("spawn: stop of %s for %s failed: %s", e.gid, req->from, why);
        sr_answer(h, req, "failed", e.gid, why, now_ms, answer);
        return SC_OK;
    }
    e.state = LG_STOPPED;
    e.at_ms = now_ms;
    if (lg_record(h->ledger, &e) < 0)
        log_warn("spawn: %s: cannot record its stop (%s)", e.gid, g_strerror(errno));
    log_info("spawn: stopped %s for %s (request %s)", e.gid, req->from, req->msgId);
    sr_answer(h, req, "stopped", e.gid, "its pane was closed", now_ms, answer);
    return SC_OK;
}

/* ---- after a restart ---------------------------------------------------- */

/* A ready entry whose pane is gone. */
static bool sr_pane_gone(sr_host *h, const lg_entry *e, char **marked)
{
    if (!strcmp(e->backend, "tmux")) {
        for (char **m = marked; m && *m; m++)
            if (g_str_has_prefix(*m, e->window) && (*m)[strlen(e->window)] == '\t')
                return false;
        return marked != NULL;
    }
    if (h->herdr) {
        hd_reply rep = {0};
        int k = hd_pane_get(h->herdr, e->pane, SR_CALL_MS(h), NULL, &rep);
        bool gone = k == HD_ERR_REMOTE && !strcmp(rep.code, "pane_not_found");

        hd_reply_clear(&rep);
        return gone;
    }
    return false;
}

/* tmux windows marked for one of our agents that the ledger does not hold. */
static void sr_close_orphans(sr_host *h, char **marked)
{
    char suffix[80], why[300];

    snprintf(suffix, sizeof suffix, "@%s", h->coord_id);
    for (char **m = marked; m && *m; m++) {
        char *tab = strchr(*m, '\t'), *window;

        if (!tab || !g_str_has_suffix(tab + 1, suffix) || lg_find(h->ledger, tab + 1))
            continue;
        window = g_strndup(*m, (gsize)(tab - *m));
        if (sp_tmux_close(window, tab + 1, why, sizeof why) == 0)
            log_warn("spawn: closed tmux window %s of %s, which no record of this host holds "
                     "(left by an earlier run)",
                     window, tab + 1);
        else
            log_warn("spawn: tmux window %s of %s is not recorded and could not be closed: %s",
                     window, tab + 1, why);
        g_free(window);
    }
}

size_t sr_recover(sr_host *h, int64_t now_ms, ctl_env **answers)
{
    GArray *out = g_array_new(FALSE, TRUE, sizeof(ctl_env));
    char why[300], **marked = NULL;
    const lg_entry *const *live;
    GArray *todo = g_array_new(FALSE, FALSE, sizeof(lg_entry));
    size_t n;

    if (!strcmp(h->backend, "tmux") && !(marked = sp_tmux_marked(why, sizeof why)))
        log_warn("spawn: cannot list tmux windows after the restart: %s", why);
    live = lg_live(h->ledger, &n);
    for (size_t i = 0; i < n; i++)
        g_array_append_val(todo, *live[i]); /* lg_record changes the live set */
    for (guint i = 0; i < todo->len; i++) {
        lg_entry e = g_array_index(todo, lg_entry, i);
        ctl_env a;

        if (e.state == LG_READY) {
            if (sr_pane_gone(h, &e, marked)) {
                e.state = LG_STOPPED;
                e.at_ms = now_ms;
                lg_record(h->ledger, &e);
                log_warn("spawn: %s's pane %s is gone since the last run: recorded stopped", e.gid,
                         e.pane);
            }
            continue;
        }
        sr_fail_entry(h, e, "this host's fleetfs restarted during the start", now_ms, &a);
        g_array_append_val(out, a);
    }
    /* listed again: the loop above closed some of them */
    g_strfreev(marked);
    if (!strcmp(h->backend, "tmux") && (marked = sp_tmux_marked(why, sizeof why)))
        sr_close_orphans(h, marked);
    g_strfreev(marked);
    g_array_free(todo, TRUE);
    n = out->len;
    *answers = (ctl_env *)g_array_free(out, FALSE);
    return n;
}
