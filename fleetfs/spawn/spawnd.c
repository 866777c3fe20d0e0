/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/spawn/spawnd.c — the far host's control service (design in spawnd.h).
 *
 * One request at a time, on the service's thread:
 *   1. decode (wire/control.c).  Bytes that are no control envelope are
 *      not answered (nothing in them can be believed, not even `from`):
 *      logged and rejected to fleet.dlq.
 *   2. mb_control_accept: signed by the key trusted for `from`, to this
 *      host, within its short expiry.  A request that fails is not
 *      answered either (its sender is not proven; answering would let
 *      anyone make this host write to any receipt queue): logged, to
 *      fleet.dlq.
 *   3. replay: the request's msgId in state_dir/control.seen.  Unknown:
 *      recorded `delivered` before anything is done.  Known and the
 *      broker's copy flagged redelivered: our own unacked delivery coming
 *      back (a crash or a lost link between the outcome and the ack) —
 *      acked unseen when its outcome was recorded (`consumed`, `refused`),
 *      handled again when it never got that far (`delivered`: recovery
 *      below already ended any start it began).  Known otherwise: a
 *      replay, refused (answered, logged, to fleet.dlq).
 *   4. the decision and the work: sr_spawn / sr_stop (spawn/run.c, which
 *      checks with spawn/check.c and keeps the ledger).  A ready agent is
 *      then registered (agents.c: mailbox, box, heartbeat) with its
 *      injector slot pinned to the pane the ledger recorded, and its brief
 *      is typed once through that slot (inj_type_once: the gate and the
 *      journal of a message, keyed by the request's msgId).  If either
 *      fails the agent is retired, its pane closed (sr_abandon) and the
 *      answer is `failed`.  A stop that closed the pane retires the agent.
 *   5. the answer (`spawned`: ready, refused, failed or stopped, with the
 *      reason) is signed and queued in the receipts outbox (durable), the
 *      msgId is recorded `consumed` (or `refused`), and only then is the
 *      delivery acked.
 *
 * Restart: before the consumer starts, sr_recover closes the pane of
 * every start the ledger shows half done and answers it `failed`.  A
 * start the ledger shows ready whose request is still `delivered` in the
 * seen store (killed after the agent was ready, before its answer was
 * queued) is ended the same way, so a request ends `failed` or `ready`
 * and never leaves a pane nobody knows of.  Agents started and answered
 * before are registered again and served in their panes.
 *
 * Nothing from a request reaches a command line, an environment variable
 * or a path but the validated name and the resolved dir (check.c); the
 * brief is typed, sanitised, like a message body.
 */
#include "fleetfs/spawn/spawnd.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fleetfs/agents/agents.h"
#include "fleetfs/inject/inject.h"
#include "fleetfs/base/log.h"
#include "fleetfs/spawn/ledger.h"
#include "fleetfs/spawn/run.h"
#include "fleetfs/store/seen.h"

#define SPD_SEEN_DELIVERED 1000
#define SPD_SEEN_DONE 10000
/* A refusal flood is said at most this often (with the count since). */
#define SPD_FLOOD_LOG_MS 10000

typedef struct {
    bool stop;
    uint64_t epoch, tag;
    bool redelivered;
    char *body;
    size_t len;
} spd_job;

struct spawnd {
    spd_ctx f; /* what the service uses of the daemon (spawnd.h) */
    lg_ledger *ledger;
    seen_set *seen;
    hd_client *herdr;
    sr_host host;
    sb_host sandbox;    /* what confines a spawned agent (sandbox.h) */
    char *sandbox_tool; /* its tool, g_free */
    char *user_conf;    /* ~/.config/fleetfs: the default config (and keys) */
    GAsyncQueue *jobs;
    GThread *thread;
    gint stopping;
    /* Until when an id loaded from control.seen may still be accepted
     * (its expiry was not kept): start + CTL_MAX_TTL_MS + CTL_SKEW_MS. */
    int64_t loaded_until_ms;
    uint64_t dropped;      /* requests dropped in a refusal flood, not yet logged */
    int64_t flood_said_ms; /* when that was last logged; 0 never */
};

static void spd_job_free(spd_job *j)
{
    if (!j)
        return;
    g_free(j->body);
    g_free(j);
}

/* ---- the host as spawn/run.c sees it -------------------------------------- */

/* A sandboxed agent is registered before its start (its home is bound
 * then), and retired again when the start fails. */
static int spd_prepare(const char *name, void *arg, char *why, size_t n)
{
    spawnd *s = arg;
    char *err = NULL;

    if (ag_prepare(s->f.ag, name, &err) == 0)
        return 0;
    snprintf(why, n, "the agent could not be registered here before its sandboxed start (%s)", err);
    g_free(err);
    return -1;
}

static void spd_unprepare(const char *gid, void *arg)
{
    spawnd *s = arg;
    char detail[300];

    ag_retire(s->f.ag, gid, detail, sizeof detail);
}

/* A name taken by a local agent the ledger does not hold (configured,
 * mkdir'd), or the lead's own. */
static bool spd_name_taken(const char *name, void *arg)
{
    spawnd *s = arg;
    char gid[CTL_GID_MAX + 1];
    mailbox *mb;

    snprintf(gid, sizeof gid, "%s@%s", name, s->f.opts->coord_id);
    mb = mb_find(s->f.mb, gid);
    mb_unref(mb);
    return mb != NULL;
}

/* Where agents start: tmux with inject=tmux, else herdr (inject=herdr,
 * or auto, which has no profile unless it finds herdr; inject=none allows
 * no profile at all: profile.c). */
static const char *spd_backend(const fs_opts *o)
{
    return !strcmp(o->inject, "tmux") ? "tmux" : "herdr";
}

/* ---- answers and acks ------------------------------------------------------- */

static void spd_send(spawnd *s, ctl_env *answer)
{
    if (mb_control_send(s->f.mb, answer) == 0)
        log_info("spawn: answered %s to %s about %s: %s", answer->state, answer->to,
                 answer->requestId, answer->detail);
}

static void spd_ack(spawnd *s, const spd_job *j, bool reject)
{
    fe_code r = br_ack_control(s->f.br, j->epoch, j->tag, reject, s->f.opts->send_timeout_ms);

    if (r != FE_OK)
        log_info("spawn: the control delivery could not be %s now (%s); the broker gives it "
                 "back and it is acked then, handled once",
                 reject ? "rejected" : "acked", fe_name(r));
}

/* Records id's state; until: when its request expires (ms; 0 unknown),
 * kept as the entry's mark so that a flood can be told (spd_flooded). */
static void spd_seen(spawnd *s, const char *id, seen_state st, int64_t until)
{
    if (seen_put(s->seen, id, st, until > 0 ? (uint64_t)until : 0) < 0)
        log_warn("spawn: cannot record request %s as %s (%s); a redelivery of it may be taken "
                 "for a replay or handled again",
                 id, seen_state_name(st), g_strerror(errno));
}

/* ---- spawn and stop ----------------------------------------------------------- */

/* After sr_spawn said ready: register the agent and type its brief. */
static void spd_finish_ready(spawnd *s, const ctl_env *req, ctl_env *answer)
{
    const spd_ctx *f = &s->f;
    const lg_entry *e = lg_find(s->ledger, answer->gid);
    char why[600] = "", detail[400], gid[CTL_GID_MAX + 1], pane[64];
    char *err = NULL;

    g_strlcpy(gid, answer->gid, sizeof gid);
    g_strlcpy(pane, e ? e->pane : "", sizeof pane);
    if (ag_spawned(f->ag, req->name, pane, &err) < 0) {
        snprintf(why, sizeof why, "the agent could not be registered here (%s)", err);
        g_free(err);
        sr_abandon(&s->host, gid, why, env_now_ms(), answer);
        return;
    }
    if (req->brief && req->brief_len) {
        mailbox *mb = mb_find(f->mb, gid);
        char *text =
            inj_render_brief(req->from, req->msgId, gid, f->mountpoint, req->brief, req->brief_len);
        const prof *p = prof_find(&f->opts->profiles, req->profile);
        int rc = mb ? inj_type_once(g_atomic_pointer_get(f->inj), mb, req->msgId, text,
                                    p ? (int)p->ready_timeout_ms : 30000, why, sizeof why)
                    : -1;

        g_free(text);
        mb_unref(mb);
        if (rc < 0) {
            char gone[300];
            snprintf(detail, sizeof detail, "the brief could not be typed (%s)",
                     why[0] ? why : "the agent is not registered");
            ag_retire(f->ag, gid, gone, sizeof gone);
            sr_abandon(&s->host, gid, detail, env_now_ms(), answer);
            return;
        }
        g_strlcat(answer->detail, "; brief typed", sizeof answer->detail);
    }
    /* a brief present but empty ("") is signed and taken as none: nothing typed */
    log_info("spawn: %s is ready for %s (request %s)%s", gid, req->from, req->msgId,
             req->brief_len ? ", its brief typed"
             : req->brief   ? ", its brief empty: nothing typed"
                            : ", no brief");
}

static sc_verdict spd_spawn(spawnd *s, const ctl_env *req, ctl_env *answer)
{
    sc_verdict v = sr_spawn(&s->host, req, env_now_ms(), answer);

    if (v == SC_OK && !strcmp(answer->state, "ready"))
        spd_finish_ready(s, req, answer);
    return v;
}

static sc_verdict spd_stop_agent(spawnd *s, const ctl_env *req, ctl_env *answer)
{
    sc_verdict v = sr_stop(&s->host, req, env_now_ms(), answer);
    char detail[300];

    if (v == SC_OK && !strcmp(answer->state, "stopped"))
        ag_retire(s->f.ag, req->gid, detail, sizeof detail);
    return v;
}

/* ---- one delivery ------------------------------------------------------------- */

/* The replay guard holds SPD_SEEN_DONE refused msgIds.  A request may be
 * accepted until its expiresAt, so an id must not be forgotten before
 * then: were it pushed out by later refusals (any trusted host can make
 * requests that are refused), a captured copy would be judged again.  So
 * when the refused class is full and the id that would go has not expired
 * yet, no request is judged (nothing is recorded, so nothing is forgotten):
 * each is dropped unanswered to fleet.dlq until that id expires.  Requests
 * seen before are still refused as replays meanwhile. */
static bool spd_flooded(spawnd *s, const ctl_env *req, int64_t now)
{
    uint64_t mark;
    int64_t until;

    if (!seen_full(s->seen, SEEN_REFUSED, &mark))
        return false;
    until = mark ? (int64_t)mark : s->loaded_until_ms;
    if (until <= now)
        return false;
    s->dropped++;
    if (!s->flood_said_ms || now - s->flood_said_ms >= SPD_FLOOD_LOG_MS) {
        log_warn("spawn: dropped %llu control request(s), the last %s's %s request %s, unanswered "
                 "to fleet.dlq: %u refused requests were received within their lifetime (a "
                 "refusal flood; see who in the log's refusals) and the replay guard may not "
                 "forget one before it expires; requests are judged again in %lld s at most",
                 (unsigned long long)s->dropped, req->from, req->type, req->msgId,
                 (unsigned)seen_count(s->seen, SEEN_REFUSED),
                 (long long)((until - now) / 1000 + 1));
        s->dropped = 0;
        s->flood_said_ms = now;
    }
    return true;
}

static void spd_handle(spawnd *s, const spd_job *j)
{
    ctl_env req, answer;
    char why[400];
    seen_state st;
    sc_verdict v;
    int64_t until;

    if (ctl_decode(j->body, j->len, s->f.opts->max_message, &req, why, sizeof why) < 0) {
        log_warn("spawn: refused a delivery of control.%s that is no control envelope (%s); not "
                 "answered (nothing in it can be believed), it goes to fleet.dlq",
                 s->f.opts->coord_id, why);
        spd_ack(s, j, true);
        return;
    }
    if (mb_control_accept(s->f.mb, &req, why, sizeof why) < 0) {
        log_warn("spawn: refused %s request %s claiming to be from %s: %s; not answered (its "
                 "sender is not proven), it goes to fleet.dlq",
                 req.type, req.msgId, req.from, why);
        ctl_free(&req);
        spd_ack(s, j, true);
        return;
    }
    st = seen_get(s->seen, req.msgId, NULL);
    if (st != SEEN_NONE && j->redelivered && st != SEEN_DELIVERED) {
        log_info("spawn: %s's request %s came again, redelivered by the broker (its ack was "
                 "lost); handled once already, acked",
                 req.from, req.msgId);
        ctl_free(&req);
        spd_ack(s, j, false);
        return;
    }
    if (st != SEEN_NONE && !j->redelivered) {
        log_warn("spawn: refused %s's %s request %s (%s): replayed, its msgId was received "
                 "before; it goes to fleet.dlq",
                 req.from, req.type, req.msgId, req.name[0] ? req.name : req.gid);
        ctl_init(&answer, CTL_TYPE_SPAWNED, s->f.opts->coord_id, req.from, env_now_ms(),
                 CTL_TTL_MS);
        g_strlcpy(answer.requestId, req.msgId, sizeof answer.requestId);
        g_strlcpy(answer.state, "refused", sizeof answer.state);
        snprintf(answer.detail, sizeof answer.detail,
                 "replayed: request %s was received here before", req.msgId);
        spd_send(s, &answer);
        ctl_free(&req);
        spd_ack(s, j, true);
        return;
    }
    if (env_time_parse(req.expiresAt, &until) < 0) /* accept parsed it: never */
        until = 0;
    if (st == SEEN_NONE && spd_flooded(s, &req, env_now_ms())) {
        ctl_free(&req);
        spd_ack(s, j, true);
        return;
    }
    spd_seen(s, req.msgId, SEEN_DELIVERED, until);
    if (!strcmp(req.type, CTL_TYPE_STOP))
        v = spd_stop_agent(s, &req, &answer);
    else /* spawn; a `spawned` sent here is refused by the check as malformed */
        v = spd_spawn(s, &req, &answer);
    /* fault injection for the restart test (t1040): die like kill -9 once
     * the agent is ready, briefed and registered, before its answer */
    if (!strcmp(answer.state, "ready") && g_getenv("FLEETFS_TEST_DIE_BEFORE_ANSWER"))
        raise(SIGKILL);
    spd_send(s, &answer);
    spd_seen(s, req.msgId, v == SC_OK ? SEEN_CONSUMED : SEEN_REFUSED, until);
    ctl_free(&req);
    spd_ack(s, j, false);
}

static gpointer spd_main(gpointer p)
{
    spawnd *s = p;
    spd_job *j;

    while ((j = g_async_queue_pop(s->jobs)) && !j->stop) {
        if (!g_atomic_int_get(&s->stopping))
            spd_handle(s, j);
        spd_job_free(j);
    }
    spd_job_free(j);
    return NULL;
}

br_action spd_delivery(spawnd *s, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                       size_t len)
{
    spd_job *j;

    if (!s || g_atomic_int_get(&s->stopping))
        return BR_KEEP; /* unacked: it comes back on the next run */
    j = g_new0(spd_job, 1);
    j->epoch = epoch;
    j->tag = tag;
    j->redelivered = redelivered;
    j->body = g_malloc(len + 1);
    memcpy(j->body, body, len);
    j->body[len] = '\0';
    j->len = len;
    g_async_queue_push(s->jobs, j);
    return BR_KEEP;
}

/* ---- start and stop ------------------------------------------------------------ */

/* What the last run left: half-done starts ended, answered agents served. */
static void spd_recover(spawnd *s)
{
    ctl_env *answers = NULL, a;
    size_t n = sr_recover(&s->host, env_now_ms(), &answers);
    const lg_entry *const *live;
    GArray *ready = g_array_new(FALSE, FALSE, sizeof(lg_entry));
    size_t k;

    for (size_t i = 0; i < n; i++) {
        spd_send(s, &answers[i]);
        spd_seen(s, answers[i].requestId, SEEN_CONSUMED, 0);
    }
    g_free(answers);
    live = lg_live(s->ledger, &k);
    for (size_t i = 0; i < k; i++)
        if (live[i]->state == LG_READY)
            g_array_append_val(ready, *live[i]);
    for (guint i = 0; i < ready->len; i++) {
        lg_entry *e = &g_array_index(ready, lg_entry, i);
        char *err = NULL;

        if (seen_get(s->seen, e->request_id, NULL) == SEEN_DELIVERED) {
            sr_abandon(&s->host, e->gid,
                       "this host's fleetfs restarted after the agent was ready, before it was "
                       "briefed and answered",
                       env_now_ms(), &a);
            spd_send(s, &a);
            spd_seen(s, e->request_id, SEEN_CONSUMED, 0);
        } else if (ag_spawned(s->f.ag, e->name, e->pane, &err) < 0) {
            log_warn("spawn: %s (started for %s) runs in %s pane %s but cannot be served again: "
                     "%s",
                     e->gid, e->requester, e->backend, e->pane, err);
            g_free(err);
        } else {
            log_info("spawn: %s (started for %s) is served again in %s pane %s", e->gid,
                     e->requester, e->backend, e->pane);
        }
    }
    g_array_free(ready, TRUE);
}

spawnd *spd_start(const spd_ctx *f, char **err)
{
    spawnd *s = g_new0(spawnd, 1);
    char *path = g_build_filename(f->opts->state_dir, "spawned.jsonl", NULL);
    seen_caps caps = {SPD_SEEN_DELIVERED, SPD_SEEN_DONE, SPD_SEEN_DONE};
    const char *backend = spd_backend(f->opts);
    const char *cap = g_getenv("FLEETFS_TEST_CONTROL_SEEN_CAP"); /* t1042: a flood of a few */

    if (cap && atoi(cap) > 0)
        caps.consumed = caps.refused = (size_t)atoi(cap);
    s->f = *f;
    s->loaded_until_ms = env_now_ms() + CTL_MAX_TTL_MS + CTL_SKEW_MS;
    s->ledger = lg_open(path, err);
    g_free(path);
    path = g_build_filename(f->opts->state_dir, "control.seen", NULL);
    if (s->ledger)
        s->seen = seen_open(path, &caps, err);
    g_free(path);
    if (!s->ledger || !s->seen) {
        lg_close(s->ledger);
        g_free(s);
        return NULL;
    }
    if (!strcmp(backend, "herdr"))
        s->herdr = hd_client_new(NULL);
    s->host = (sr_host){.coord_id = f->opts->coord_id,
                        .spawn_from = (const char *const *)f->opts->spawn_from,
                        .profiles = &f->opts->profiles,
                        .ledger = s->ledger,
                        .backend = backend,
                        .herdr = s->herdr,
                        .name_taken = spd_name_taken,
                        .sandbox = &s->sandbox,
                        .prepare = spd_prepare,
                        .unprepare = spd_unprepare,
                        .arg = s};
    s->sandbox_tool = sb_find_tool();
    s->user_conf = g_build_filename(g_get_user_config_dir(), "fleetfs", NULL);
    s->sandbox = (sb_host){.tool = s->sandbox_tool,
                           .mountpoint = f->mountpoint,
                           .hide = {f->opts->state_dir, f->opts->trusted_keys, f->opts->key,
                                    f->opts->config, "/etc/fleetfs", s->user_conf}};
    for (size_t i = 0; i < f->opts->profiles.n; i++)
        if (f->opts->profiles.v[i].unconfined)
            log_warn("spawn: profile %s starts its agents unconfined (sandbox = none): with this "
                     "daemon's reach (its key, its trust directory, every agent's mail)",
                     f->opts->profiles.v[i].name);
    s->jobs = g_async_queue_new();
    spd_recover(s);
    s->thread = g_thread_new("spawn", spd_main, s);
    return s;
}

void spd_consume(spawnd *s)
{
    if (br_control_consume(s->f.br) < 0)
        log_err("spawn: cannot consume control.%s (%s); requests to start agents here wait in "
                "it",
                s->f.opts->coord_id, g_strerror(errno));
}

void spd_stop(spawnd *s)
{
    spd_job *j;

    if (!s || !s->thread)
        return;
    g_atomic_int_set(&s->stopping, 1);
    j = g_new0(spd_job, 1);
    j->stop = true;
    g_async_queue_push_front(s->jobs, j);
    g_thread_join(s->thread);
    s->thread = NULL;
}

void spd_free(spawnd *s)
{
    spd_job *j;

    if (!s)
        return;
    spd_stop(s);
    while ((j = g_async_queue_try_pop(s->jobs)))
        spd_job_free(j);
    g_async_queue_unref(s->jobs);
    seen_close(s->seen);
    lg_close(s->ledger);
    hd_client_free(s->herdr);
    g_free(s->sandbox_tool);
    g_free(s->user_conf);
    g_free(s);
}
