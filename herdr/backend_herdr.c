/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/backend_herdr.c — the injector's herdr backend.
 *
 * Target: inject_target when set (an agent name or a pane id), else the
 * agent named after the coord_id, else the one pane labelled so that runs
 * an agent.  Zero or several matches never guess: the injector stalls with
 * words that say how to fix it.  Every call is one connection
 * (HERDR-PROTOCOL.md) with a client-side timeout; a herdr that is down or
 * restarting makes us wait.
 *
 * Never into a shell (issue 12): a pane is typed into only while herdr
 * reports an agent in it (AgentInfo "agent" set) with a known status; a
 * labelled pane without one (a plain shell, or an agent that exited:
 * agent_status unknown) is not a candidate, and agent.prompt itself
 * refuses a pane with no agent in the foreground (agent_not_ready,
 * agent_not_running), which counts as nothing typed.
 *
 * Spawning (herdr/spawn.h) lives here too: it is the same client and the
 * same rule of one connection per call; sp_herdr_start makes a pane,
 * starts the agent in it, and closes the pane again on any failure.
 */
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "fleetfs/base/log.h"
#include "herdr/backend.h"
#include "herdr/inputline.h"
#include "herdr/spawn.h"

typedef struct {
    ib_config *cfg;
    hd_client *c;
    bool pinged;
} hb;

#define CFG(b) ((const ib_config *)((hb *)(b)->priv)->cfg)
#define CALL_MS(b) (CFG(b)->call_ms > 0 ? CFG(b)->call_ms : 3000)
#define PROMPT_MS(b) (CFG(b)->prompt_ms > 0 ? CFG(b)->prompt_ms : 10000)

static hd_client *client(inj_backend *b)
{
    hb *h = b->priv;
    if (!h->c)
        h->c = hd_client_new(h->cfg->herdr_socket);
    return h->c;
}

static ib_verdict down(inj_backend *b, const hd_reply *rep, char *why, size_t n)
{
    hd_client *c = client(b);
    hb *h = b->priv;
    h->pinged = false;
    if (rep->kind == HD_ERR_DOWN)
        snprintf(why, n, "waiting: herdr is not running (no server at %s); messages stay held",
                 c ? hd_client_path(c) : "(no socket path: set HERDR_SOCKET_PATH)");
    else
        snprintf(why, n, "waiting: herdr did not answer (%s %s)", hd_kind_name(rep->kind),
                 rep->code);
    return IB_WAIT;
}

/* Log herdr's version once per (re)connection; refuse nothing we can use. */
static void hello(inj_backend *b)
{
    hb *h = b->priv;
    hd_version v;
    hd_reply rep = {0};
    if (h->pinged)
        return;
    if (hd_ping(client(b), CALL_MS(b), &v, &rep) == HD_OK) {
        log_info("inject: talking to %s at %s", v.text, hd_client_path(client(b)));
        h->pinged = true;
    }
    hd_reply_clear(&rep);
}

static ib_verdict by_target(inj_backend *b, ib_target *t, char *why, size_t n)
{
    const char *target = CFG(b)->inject_target;
    hd_agent a;
    hd_pane p;
    hd_reply rep = {0};
    ib_verdict v = IB_OK;

    if (hd_agent_get(client(b), target, CALL_MS(b), &a, &rep) == HD_OK && a.pane_id[0]) {
        g_strlcpy(t->id, a.pane_id, sizeof t->id);
        snprintf(t->name, sizeof t->name, "agent %s (%s)", a.name[0] ? a.name : target, a.pane_id);
    } else if (rep.kind == HD_ERR_REMOTE || rep.kind == HD_OK) {
        hd_reply_clear(&rep);
        if (hd_pane_get(client(b), target, CALL_MS(b), &p, &rep) == HD_OK) {
            g_strlcpy(t->id, p.pane_id, sizeof t->id);
            snprintf(t->name, sizeof t->name, "pane %s", p.pane_id);
        } else if (rep.kind == HD_ERR_REMOTE) {
            snprintf(why, n,
                     "stalled: inject_target '%s' is neither an agent nor a pane herdr "
                     "knows (%s); fix -o inject_target",
                     target, rep.code);
            v = IB_STALL;
        } else {
            v = down(b, &rep, why, n);
        }
    } else {
        v = down(b, &rep, why, n);
    }
    hd_reply_clear(&rep);
    return v;
}

static ib_verdict resolve(inj_backend *b, ib_target *t, char *why, size_t n)
{
    const char *me = CFG(b)->coord_id;
    hd_agent *agents = NULL;
    hd_pane *panes = NULL;
    size_t na = 0, np = 0, hits = 0, hit = 0, shells = 0, shell = 0;
    hd_reply rep = {0};
    ib_verdict v = IB_OK;

    if (!client(b)) {
        snprintf(why, n, "waiting: no herdr socket path (set HERDR_SOCKET_PATH or HOME)");
        return IB_WAIT;
    }
    hello(b);
    if (CFG(b)->inject_target)
        return by_target(b, t, why, n);
    if (hd_agent_list(client(b), CALL_MS(b), &agents, &na, &rep) != HD_OK) {
        v = down(b, &rep, why, n);
        goto out;
    }
    for (size_t i = 0; i < na; i++)
        if (!strcmp(agents[i].name, me)) {
            g_strlcpy(t->id, agents[i].pane_id, sizeof t->id);
            snprintf(t->name, sizeof t->name, "agent %s (%s)", me, agents[i].pane_id);
            goto out;
        }
    hd_reply_clear(&rep);
    if (hd_pane_list(client(b), CALL_MS(b), &panes, &np, &rep) != HD_OK) {
        v = down(b, &rep, why, n);
        goto out;
    }
    /* only a pane that runs an agent herdr knows: a labelled shell is
     * never a candidate, however it is labelled */
    for (size_t i = 0; i < np; i++)
        if (!strcmp(panes[i].label, me)) {
            if (!panes[i].agent[0] || panes[i].status == HD_UNKNOWN) {
                if (!shells++)
                    shell = i;
                continue;
            }
            hits++;
            hit = i;
        }
    if (hits == 0 && shells > 0) {
        snprintf(why, n,
                 "stalled: pane labelled %s (%s) runs no agent herdr knows (a shell, or its "
                 "agent exited): start the agent there, or name the lead's agent %s "
                 "(herdr agent rename)",
                 me, panes[shell].pane_id, me);
        v = IB_STALL;
    } else if (hits == 1) {
        g_strlcpy(t->id, panes[hit].pane_id, sizeof t->id);
        snprintf(t->name, sizeof t->name, "pane labelled %s (%s)", me, panes[hit].pane_id);
    } else if (hits == 0) {
        snprintf(why, n,
                 "stalled: no herdr agent named %s and no pane labelled %s; name the "
                 "lead's agent %s (herdr agent rename), label its pane, or set "
                 "-o inject_target",
                 me, me, me);
        v = IB_STALL;
    } else {
        snprintf(why, n, "stalled: %zu panes labelled %s; rename one or set -o inject_target", hits,
                 me);
        v = IB_STALL;
    }
out:
    free(agents);
    free(panes);
    hd_reply_clear(&rep);
    return v;
}

static ib_verdict status(inj_backend *b, const ib_target *t, hd_status *st, char *why, size_t n)
{
    hd_agent a;
    hd_reply rep = {0};
    ib_verdict v = IB_OK;
    if (hd_agent_get(client(b), t->id, CALL_MS(b), &a, &rep) == HD_OK) {
        *st = a.status;
        if (!a.agent[0] || a.status == HD_UNKNOWN) {
            snprintf(why, n,
                     "stalled: %s runs no agent herdr knows (agent_status %s: a shell, or the "
                     "agent exited): nothing is typed until an agent runs there",
                     t->name, hd_status_name(a.status));
            v = IB_STALL;
        } else if (a.launch_pending) {
            /* a prompt sent before the agent's UI listens is lost */
            snprintf(why, n,
                     "waiting: %s is still starting (herdr: launch pending); nothing is typed "
                     "until its input listens",
                     t->name);
            v = IB_WAIT;
        }
    } else if (rep.kind == HD_ERR_REMOTE) {
        snprintf(why, n, "waiting: %s runs no agent herdr knows (%s)", t->name, rep.code);
        v = IB_WAIT;
    } else {
        v = down(b, &rep, why, n);
    }
    hd_reply_clear(&rep);
    return v;
}

/* herdr's error codes that mean nothing was written to the pane. */
static bool nothing_typed(const char *code)
{
    static const char *codes[] = {"agent_blocked",    "agent_not_ready", "empty_agent_prompt",
                                  "agent_not_found",  "pane_not_found",  "agent_target_ambiguous",
                                  "invalid_request",  "invalid_params",  "agent_not_running",
                                  "pane_send_failed", "unsafe_text"};
    for (size_t i = 0; i < G_N_ELEMENTS(codes); i++)
        if (!strcmp(code, codes[i]))
            return true;
    return false;
}

static ib_typed type(inj_backend *b, const ib_target *t, const char *text, char *why, size_t n)
{
    hd_agent a;
    hd_reply rep = {0};
    ib_typed r;
    int k = hd_agent_prompt(client(b), t->id, text, NULL, 0, PROMPT_MS(b), &a, &rep);
    if (k == HD_OK) {
        r = IT_TYPED;
    } else if (k == HD_ERR_REMOTE && !strcmp(rep.code, "agent_prompt_stalled")) {
        /* herdr wrote the text (and Enter) and saw no turn start: whether
         * it was submitted is not known, and it is never typed again */
        snprintf(why, n,
                 "herdr answered agent_prompt_stalled while typing into %s (%s): it wrote the "
                 "text but saw no turn start; whether it was submitted is not known, and it "
                 "will not be typed again",
                 t->name, rep.message);
        r = IT_UNKNOWN;
    } else if ((k == HD_ERR_REMOTE || k == HD_ERR_PROTOCOL) && nothing_typed(rep.code)) {
        snprintf(why, n, "herdr refused to type into %s (%s: %s)", t->name, rep.code, rep.message);
        r = IT_REFUSED;
    } else if (k == HD_ERR_DOWN) {
        snprintf(why, n, "herdr went away before it took the text");
        r = IT_REFUSED;
    } else {
        snprintf(why, n,
                 "herdr gave no clear answer while typing into %s (%s %s); it may or "
                 "may not have been typed, and will not be typed again",
                 t->name, hd_kind_name(k), rep.code);
        r = IT_UNKNOWN;
    }
    hd_reply_clear(&rep);
    return r;
}

/* Does the text still wait in the agent's input?  herdr's pane.read of
 * the visible screen: one of its last INPUT_LINES non-empty lines ends
 * with the end of what was typed (herdr gives no cursor position). */
#define INPUT_LINES 4
static int waits(inj_backend *b, const ib_target *t, const char *text)
{
    hd_reply rep = {0};
    json_t *p = json_pack("{s:s, s:s}", "pane_id", t->id, "source", "visible");
    const char *screen;
    int found = -1;

    hd_call(client(b), "pane.read", p, CALL_MS(b), &rep);
    json_decref(p);
    screen = rep.kind == HD_OK && json_is_object(rep.result)
                 ? json_string_value(json_object_get(json_object_get(rep.result, "read"), "text"))
                 : NULL;
    if (screen) {
        gchar **lines = g_strsplit(screen, "\n", -1);
        int seen = 0;
        found = 0;
        for (int i = (int)g_strv_length(lines) - 1; i >= 0 && seen < INPUT_LINES && !found; i--) {
            if (!*g_strstrip(lines[i]))
                continue;
            seen++;
            found = il_waits(lines[i], text);
        }
        g_strfreev(lines);
    }
    hd_reply_clear(&rep);
    return found;
}

/* One more Enter (pane.send_input keys ["enter"]), never the text again;
 * only to an agent still there and not blocked (a dialog's default
 * button). */
static bool submit(inj_backend *b, const ib_target *t, char *why, size_t n)
{
    static const char *const enter[] = {"enter", NULL};
    hd_reply rep = {0};
    hd_status st = HD_UNKNOWN;
    bool ok;
    if (status(b, t, &st, why, n) != IB_OK)
        return false;
    if (st == HD_BLOCKED) {
        snprintf(why, n, "%s is blocked (an approval or question is up)", t->name);
        return false;
    }
    ok = hd_pane_send_input(client(b), t->id, NULL, enter, CALL_MS(b), &rep) == HD_OK;
    if (!ok)
        snprintf(why, n, "herdr refused the Enter (%s %s)", hd_kind_name(rep.kind), rep.code);
    hd_reply_clear(&rep);
    return ok;
}

static void hb_free(inj_backend *b)
{
    hb *h = b->priv;
    hd_client_free(h->c);
    ib_config_free(h->cfg);
    g_free(h);
    g_free(b);
}

inj_backend *inj_backend_herdr(const ib_config *cfg)
{
    hb *h = g_new0(hb, 1);
    inj_backend *b = g_new0(inj_backend, 1);
    b->name = "herdr";
    b->has_status = true;
    b->resolve = resolve;
    b->status = status;
    b->type = type;
    b->free = hb_free;
    b->waits = waits;
    b->submit = submit;
    h->cfg = ib_config_copy(cfg);
    b->priv = h;
    return b;
}

/* ------------------------------------------------------------- spawning */

int sp_herdr_close(hd_client *c, const char *pane_id, int call_ms, char *why, size_t n)
{
    hd_reply rep = {0};
    int k = hd_pane_close(c, pane_id, call_ms, &rep);

    /* a pane already gone is what we wanted */
    if (k == HD_OK || (k == HD_ERR_REMOTE && !strcmp(rep.code, "pane_not_found"))) {
        hd_reply_clear(&rep);
        return 0;
    }
    snprintf(why, n, "herdr pane.close %s: %s %s%s%s", pane_id, hd_kind_name(k), rep.code,
             rep.message[0] ? ": " : "", rep.message);
    hd_reply_clear(&rep);
    return -1;
}

/* On failure after the pane exists: close it, and say what became of it. */
static int sp_herdr_fail(hd_client *c, const char *pane_id, int call_ms, sp_result *out)
{
    char cw[256];
    size_t len = strlen(out->why);

    if (sp_herdr_close(c, pane_id, call_ms, cw, sizeof cw) == 0)
        snprintf(out->why + len, sizeof out->why - len, "; pane %s closed", pane_id);
    else
        snprintf(out->why + len, sizeof out->why - len,
                 "; pane %s may remain (%s): close it by hand", pane_id, cw);
    out->pane_id[0] = '\0';
    return -1;
}

int sp_herdr_start(hd_client *c, const sp_request *rq, int call_ms, sp_result *out)
{
    hd_reply rep = {0};
    hd_pane pane;
    hd_agent a;
    int k;

    memset(out, 0, sizeof *out);
    k = rq->dir ? hd_pane_split(c, NULL, "right", rq->dir, call_ms, &pane, &rep)
                : hd_tab_create(c, NULL, rq->name, call_ms, &pane, &rep);
    if (k != HD_OK) {
        /* a split or tab herdr made but whose answer we lost is a pane
         * nobody knows of: say so rather than claim nothing was made */
        snprintf(out->why, sizeof out->why, "herdr %s: %s %s%s%s%s",
                 rq->dir ? "pane.split" : "tab.create", hd_kind_name(k), rep.code,
                 rep.message[0] ? ": " : "", rep.message,
                 k == HD_ERR_TIMEOUT || k == HD_ERR_CLOSED
                     ? " (herdr may have made a pane it did not tell us of)"
                     : "");
        hd_reply_clear(&rep);
        return -1;
    }
    g_strlcpy(out->pane_id, pane.pane_id, sizeof out->pane_id);
    if (rq->made)
        rq->made(pane.pane_id, "", rq->made_arg);
    k = hd_agent_start(c, rq->name, rq->kind, pane.pane_id, rq->args, rq->ready_ms, call_ms, &a,
                       &rep);
    if (k == HD_OK && a.pane_id[0] && strcmp(a.pane_id, pane.pane_id) != 0) {
        snprintf(out->why, sizeof out->why,
                 "herdr agent.start answered for pane %s, not the new pane %s", a.pane_id,
                 pane.pane_id);
        k = HD_ERR_PROTOCOL;
    } else if (k == HD_ERR_REMOTE && !strcmp(rep.code, "timeout")) {
        snprintf(out->why, sizeof out->why, "%s did not become ready within %d ms (herdr: %s)",
                 rq->kind, rq->ready_ms, rep.message);
    } else if (k != HD_OK) {
        snprintf(out->why, sizeof out->why, "herdr agent.start %s: %s %s%s%s", rq->kind,
                 hd_kind_name(k), rep.code, rep.message[0] ? ": " : "", rep.message);
    }
    hd_reply_clear(&rep);
    return k == HD_OK ? 0 : sp_herdr_fail(c, pane.pane_id, call_ms, out);
}
