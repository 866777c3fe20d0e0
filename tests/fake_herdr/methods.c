/* SPDX-License-Identifier: Apache-2.0 */
/* methods.c — fake herdr: what one request does.
 *
 * The statefile is the fake's whole world and is re-read on every request,
 * so a test changes the world by rewriting it (write + rename):
 *
 *   { "version": "0.8.2", "protocol": 20,
 *     "capabilities": {...} | null,            (optional; default {})
 *     "panes": [ { "pane_id": "w1:p1", "workspace_id": "w1",
 *                  "tab_id": "w1:t1", "label": "beta", "agent": "claude",
 *                  "name": "beta", "agent_status": "idle",
 *                  "title": "...", "focused": false, ...any other keys } ],
 *     "behaviour": { "all": "ok"|"hang"|"close"|"garbage",
 *                    "prompt": "ok"|"hang"|"slow:<ms>"|"close"|"stalled"
 *                              |"stalled-always"|"error:<code>",
 *                    "send_input": same as "prompt" but "stalled" },
 *     "after_prompt_status": "working",
 *     "busy_ms": 300,                          (optional: back to idle 300 ms
 *                                               after a prompt it took)
 *     "enter_delay_ms": 300,                   (optional: herdr's own 300 ms
 *                                               between text and Enter; the
 *                                               turn starts only then)
 *     "cold_start": true }                     (optional: herdr's false stall)
 *
 * The agent's input line: text taken but not yet submitted (its Enter has
 * not landed, or was swallowed) is kept in the pane's "input" and shown by
 * pane.read {pane_id, source} as the screen's "> " line.  With
 * "swallow_enters": N the next N Enters (agent.prompt's own, then
 * pane.send_input's "enter") are swallowed, as a TUI still taking a paste
 * does; an Enter that lands submits the input: the status becomes
 * after_prompt_status.
 *
 * A pane's "launch_pending": true is served in AgentInfo, and agent.prompt
 * refuses it agent_not_ready, as herdr does while a managed start is not
 * ready.
 *
 * herdr's known failure modes, as its source shows them (doc/injection.md
 * section 12): agent.prompt answers before its delayed Enter lands, so
 * with enter_delay_ms the pane's status changes (after_prompt_status) only
 * that long after the answer — and a prompt with "wait" is answered at
 * once with the status before the Enter (a wait that resolved before the
 * Enter landed).  With cold_start, a prompt with "wait" to an agent whose
 * turn starts late is answered agent_prompt_stalled although the text and
 * the Enter were delivered (it is logged as typed; the status still
 * changes after enter_delay_ms).
 * Which herdr: its source up to 0.8.2 and the unreleased commits after it
 * (the library holds no 0.9 source).  herdr 0.9.0, as third parties
 * report it, answers ping with protocol 22 and writes the text and its
 * Enter in one write before it answers agent.prompt: the statefile's
 * "version"/"protocol" say what the fake answers to ping, and without
 * enter_delay_ms the Enter lands with the text, as 0.9.0's is said to.
 *
 * Pane objects are served as PaneInfo verbatim (unknown keys included) with
 * the required keys filled in when missing. A pane is an agent when its
 * "agent" is a non-empty string; its agent name is "name". agent.get and
 * agent.prompt take a pane id or a name; several panes with one name give
 * agent_target_ambiguous.
 *
 * A prompt or input the fake takes (it "typed" the text) is appended to the
 * prompt log as {"method","target","text","at"} (send_input adds "keys");
 * one it refuses is appended to <log>.refused with its "code". "stalled"
 * counts as typed (herdr wrote the text, the agent never started) and
 * answers agent_prompt_stalled to a prompt with "wait", as herdr does;
 * "stalled-always" answers it to a prompt without "wait" too (no herdr
 * source read here does: a server whose effect gate is always on); "hang"
 * and "close" type nothing. Every request's method is appended to
 * <log>.calls (one a line), so a test can wait until fleetfs has looked
 * again before it asserts that nothing was typed. After a successful prompt the pane's
 * agent_status becomes after_prompt_status and the statefile is written
 * back (temp file + rename). One mutex serialises all of this.
 *
 * Making panes and starting agents (SPEC section 11), with the state
 * written back so a test sees which panes exist:
 *   tab.create {workspace_id?, label?, focus?}  → a new tab and its root pane
 *   pane.split {direction, target_pane_id?, cwd?, env?, focus?} → a new pane
 *     (cwd and env kept in it); a pane starts at its prompt: no agent
 *   agent.start {name, kind, pane_id, args?, timeout_ms?} → the agent in
 *     that pane, answered once "ready"; appended as asked to <log>.starts
 *   pane.close {pane_id} → the pane is removed
 * New ids are numbered from the state's "next_id" (default 100), never
 * reused. behaviour keys "tab", "split", "close" take ok/hang/slow/close/
 * error:<code>; "start" (or "start:<kind>" for one kind) takes those and
 *   "never"   the agent runs (status working) but is never ready: error
 *             timeout after timeout_ms (default 30000), as herdr answers
 *   "blocked" the agent comes up blocked: agent_not_ready at once
 *   "slow:<ms>" ready after ms; ms >= timeout_ms is "never".
 * agent.start refuses (invalid_params) a timeout_ms outside 3001..300000,
 * a bad name, a name a live agent has, a pane that runs an agent already. */
#include "tests/fake_herdr/fake_herdr.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t world_lock = PTHREAD_MUTEX_INITIALIZER;

typedef enum { B_OK, B_HANG, B_SLOW, B_CLOSE, B_STALLED, B_ERROR, B_GARBAGE } bkind;

typedef struct {
    bkind kind;
    int ms;
    char code[48];
} behaviour;

typedef struct {
    const fh_config *cfg;
    json_t *state;
    json_t *params;
    fh_outcome *out;
    const char *ecode; /* set → error reply (points at ecode_buf) */
    char ecode_buf[48];
    char emsg[200];
} req;

/* The code is copied: it may live in a behaviour passed by value. */
static void fail(req *r, const char *code, const char *msg)
{
    snprintf(r->ecode_buf, sizeof(r->ecode_buf), "%s", code);
    r->ecode = r->ecode_buf;
    snprintf(r->emsg, sizeof(r->emsg), "%s", msg);
}

static behaviour get_behaviour(json_t *state, const char *key)
{
    const char *s = json_string_value(json_object_get(json_object_get(state, "behaviour"), key));
    behaviour b = {.kind = B_OK};

    if (!s || !strcmp(s, "ok"))
        return b;
    if (!strcmp(s, "hang"))
        b.kind = B_HANG;
    else if (!strcmp(s, "close"))
        b.kind = B_CLOSE;
    else if (!strcmp(s, "garbage"))
        b.kind = B_GARBAGE;
    else if (!strcmp(s, "stalled"))
        b.kind = B_STALLED;
    else if (!strcmp(s, "stalled-always"))
        b.kind = B_STALLED, b.ms = 1;
    else if (!strncmp(s, "slow:", 5))
        b.kind = B_SLOW, b.ms = atoi(s + 5);
    else if (!strncmp(s, "error:", 6))
        b.kind = B_ERROR, snprintf(b.code, sizeof(b.code), "%s", s + 6);
    return b;
}

/* ------------------------------------------------------------ the world */

static json_t *panes(const req *r)
{
    json_t *p = json_object_get(r->state, "panes");

    return json_is_array(p) ? p : NULL;
}

static const char *sfield(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool is_agent(const json_t *pane)
{
    const char *a = sfield(pane, "agent");

    return a && *a;
}

static const char *status_of(const json_t *pane)
{
    const char *s = sfield(pane, "agent_status");

    return s ? s : "unknown";
}

static json_t *find_pane(const req *r, const char *pane_id)
{
    size_t i;
    json_t *p;

    json_array_foreach(panes(r), i, p)
    {
        const char *id = sfield(p, "pane_id");

        if (id && !strcmp(id, pane_id))
            return p;
    }
    return NULL;
}

/* A pane id, else a unique agent name. */
static json_t *resolve(req *r, const char *target)
{
    json_t *p, *hit = find_pane(r, target);
    size_t i, n = 0;

    if (hit)
        return hit;
    json_array_foreach(panes(r), i, p)
    {
        const char *name = sfield(p, "name");

        if (name && !strcmp(name, target))
            hit = p, n++;
    }
    if (n == 0)
        fail(r, "agent_not_found", "no agent matches the target");
    else if (n > 1)
        fail(r, "agent_target_ambiguous", "several agents match");
    return n == 1 ? hit : NULL;
}

static json_t *pane_info(const json_t *pane)
{
    json_t *o = json_deep_copy(pane);
    static const char *const req_keys[] = {"workspace_id", "tab_id"};

    for (size_t i = 0; i < 2; i++)
        if (!json_object_get(o, req_keys[i]))
            json_object_set_new(o, req_keys[i], json_string(""));
    if (!json_object_get(o, "focused"))
        json_object_set_new(o, "focused", json_false());
    if (!json_object_get(o, "agent_status"))
        json_object_set_new(o, "agent_status", json_string("unknown"));
    return o;
}

static json_t *agent_info(const json_t *pane)
{
    json_t *id = json_object_get(pane, "pane_id");
    json_t *name = json_object_get(pane, "name");
    json_t *agent = json_object_get(pane, "agent");

    json_t *pending = json_object_get(pane, "launch_pending");

    return json_pack("{s:O, s:O, s:O, s:s, s:b}", "pane_id", id ? id : json_null(), "name",
                     name ? name : json_null(), "agent", agent ? agent : json_null(),
                     "agent_status", status_of(pane), "launch_pending", json_is_true(pending));
}

static void save_state(const req *r)
{
    char *tmp;

    if (asprintf(&tmp, "%s.fake-tmp", r->cfg->state_path) < 0)
        return;
    if (json_dump_file(r->state, tmp, JSON_INDENT(1)) == 0)
        rename(tmp, r->cfg->state_path);
    else
        unlink(tmp);
    free(tmp);
}

static void append_log(const char *path, json_t *entry)
{
    char at[48], *line;
    struct timeval tv;
    struct tm tm;
    int fd;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(at + strlen(at), sizeof(at) - strlen(at), ".%03ldZ", (long)tv.tv_usec / 1000);
    json_object_set_new(entry, "at", json_string(at));
    line = json_dumps(entry, JSON_COMPACT);
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (line && fd >= 0) {
        size_t n = strlen(line);

        line[n] = '\n';
        if (write(fd, line, n + 1) < 0)
            perror("fake-herdr: prompt log");
    }
    if (fd >= 0)
        close(fd);
    free(line);
    json_decref(entry);
}

static void log_call(const fh_config *cfg, const char *method)
{
    int fd = open(cfg->calls_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0)
        return;
    if (dprintf(fd, "%s\n", method) < 0)
        perror("fake-herdr: calls log");
    close(fd);
}

static void log_input(const req *r, const char *method, const char *target, const char *text,
                      json_t *keys, const char *refused_code)
{
    json_t *e =
        json_pack("{s:s, s:s, s:s}", "method", method, "target", target, "text", text ? text : "");

    if (keys)
        json_object_set(e, "keys", keys);
    if (refused_code)
        json_object_set_new(e, "code", json_string(refused_code));
    append_log(refused_code ? r->cfg->refused_path : r->cfg->log_path, e);
}

/* -------------------------------------------------------------- methods */

static json_t *m_ping(req *r)
{
    json_t *v = json_object_get(r->state, "version");
    json_t *p = json_object_get(r->state, "protocol");
    json_t *caps = json_object_get(r->state, "capabilities");

    return json_pack("{s:s, s:o, s:o, s:o}", "type", "pong", "version",
                     v ? json_incref(v) : json_string("0.8.2"), "protocol",
                     p ? json_incref(p) : json_integer(20), "capabilities",
                     caps ? json_incref(caps) : json_object());
}

static json_t *m_pane_list(req *r)
{
    json_t *a = json_array(), *p;
    size_t i;

    json_array_foreach(panes(r), i, p) json_array_append_new(a, pane_info(p));
    return json_pack("{s:s, s:o}", "type", "pane_list", "panes", a);
}

static json_t *m_agent_list(req *r)
{
    json_t *a = json_array(), *p;
    size_t i;

    json_array_foreach(panes(r), i, p) if (is_agent(p)) json_array_append_new(a, agent_info(p));
    return json_pack("{s:s, s:o}", "type", "agent_list", "agents", a);
}

/* Required string parameter; a missing one is a malformed request. */
static const char *param(req *r, const char *key)
{
    const char *s = sfield(r->params, key);

    if (!s)
        fail(r, "invalid_request", "missing or mistyped parameter");
    return s;
}

static json_t *m_pane_get(req *r)
{
    const char *id = param(r, "pane_id");
    json_t *p = id ? find_pane(r, id) : NULL;

    if (id && !p)
        fail(r, "pane_not_found", "no such pane");
    return p ? json_pack("{s:s, s:o}", "type", "pane_info", "pane", pane_info(p)) : NULL;
}

static json_t *m_agent_get(req *r)
{
    const char *target = param(r, "target");
    json_t *p = target ? resolve(r, target) : NULL;

    return p ? json_pack("{s:s, s:o}", "type", "agent_info", "agent", agent_info(p)) : NULL;
}

static bool valid_wait(const json_t *wait)
{
    static const char *const ok[] = {"idle", "done", "working", "blocked", "unknown"};
    const json_t *until = json_object_get(wait, "until"), *v;
    const json_t *t = json_object_get(wait, "timeout_ms");
    size_t i;

    if (!wait || json_is_null(wait))
        return true;
    if (!json_is_object(wait) || (t && !json_is_integer(t)) || (until && !json_is_array(until)))
        return false;
    json_array_foreach(until, i, v)
    {
        bool known = false;

        for (size_t k = 0; k < 5; k++)
            known |= json_is_string(v) && !strcmp(json_string_value(v), ok[k]);
        if (!known)
            return false;
    }
    return true;
}

/* Applies a prompt/send_input behaviour. true → go on and take the text. */
static bool apply_behaviour(req *r, behaviour b)
{
    switch (b.kind) {
    case B_HANG:
        r->out->action = FH_HANG;
        return false;
    case B_CLOSE:
        r->out->action = FH_CLOSE;
        return false;
    case B_ERROR:
        fail(r, b.code, "failure injected by the fake's statefile");
        return false;
    case B_SLOW:
        r->out->delay_ms = b.ms;
        return true;
    default:
        return true;
    }
}

static long long wall_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* "busy_ms": N in the state: an agent that took a prompt goes back to idle
 * by itself N ms later (its turn ended), so a stream of messages can be
 * typed without a test flipping the status by hand. */
static void settle_turns(req *r)
{
    json_t *ps = json_object_get(r->state, "panes"), *p;
    size_t i;
    bool changed = false;

    json_array_foreach(ps, i, p)
    {
        json_t *at = json_object_get(p, "idle_at");
        json_t *sub = json_object_get(p, "submit_at");

        /* the delayed Enter landed: the turn starts */
        if (json_is_integer(sub) && wall_ms() >= json_integer_value(sub)) {
            json_t *st = json_object_get(p, "submit_status");
            json_int_t busy = json_integer_value(json_object_get(r->state, "busy_ms"));
            if (json_is_string(st))
                json_object_set(p, "agent_status", st);
            json_object_del(p, "input");
            if (busy > 0)
                json_object_set_new(p, "idle_at", json_integer(wall_ms() + busy));
            json_object_del(p, "submit_at");
            json_object_del(p, "submit_status");
            at = json_object_get(p, "idle_at");
            changed = true;
        }

        if (json_is_integer(at) && wall_ms() >= json_integer_value(at)) {
            json_object_set_new(p, "agent_status", json_string("idle"));
            json_object_del(p, "idle_at");
            changed = true;
        }
    }
    if (changed)
        save_state(r);
}

static json_t *m_agent_prompt(req *r)
{
    const char *target = param(r, "target");
    const char *text = target ? param(r, "text") : NULL;
    json_t *wait = json_object_get(r->params, "wait"), *p;
    const char *after = sfield(r->state, "after_prompt_status");
    behaviour b = get_behaviour(r->state, "prompt");

    if (!text)
        return NULL;
    if (!valid_wait(wait)) {
        fail(r, "invalid_request", "malformed wait");
        return NULL;
    }
    p = resolve(r, target);
    if (p && !*text)
        fail(r, "empty_agent_prompt", "prompt text is empty");
    else if (p && !is_agent(p))
        fail(r, "agent_not_ready", "no agent in the foreground");
    else if (p && !strcmp(status_of(p), "blocked"))
        fail(r, "agent_blocked", "agent is waiting for approval");
    else if (p && json_is_true(json_object_get(p, "launch_pending")))
        fail(r, "agent_not_ready", "agent launch is still pending");
    if (!r->ecode && !apply_behaviour(r, b))
        p = NULL;
    if (r->ecode) {
        log_input(r, "agent.prompt", target, text, NULL, r->ecode);
        return NULL;
    }
    if (!p)
        return NULL; /* hang or close: nothing typed */
    log_input(r, "agent.prompt", target, text, NULL, NULL);
    if (b.kind == B_STALLED && (b.ms || (wait && !json_is_null(wait)))) {
        fail(r, "agent_prompt_stalled", "agent did not start");
        return NULL;
    }
    json_int_t delay = json_integer_value(json_object_get(r->state, "enter_delay_ms"));
    json_int_t swallow = json_integer_value(json_object_get(r->state, "swallow_enters"));
    if (b.kind != B_STALLED && swallow > 0) {
        /* its Enter swallowed: the text waits in the input line */
        json_object_set_new(r->state, "swallow_enters", json_integer(swallow - 1));
        json_object_set_new(p, "input", json_string(text));
        save_state(r);
        return json_pack("{s:s, s:o}", "type", "agent_prompted", "agent", agent_info(p));
    }
    if (b.kind != B_STALLED && after && delay > 0) {
        json_object_set_new(p, "input", json_string(text));
        /* the Enter lands later: so does the turn */
        json_object_set_new(p, "submit_at", json_integer(wall_ms() + delay));
        json_object_set_new(p, "submit_status", json_string(after));
        save_state(r);
        if (wait && !json_is_null(wait) && json_is_true(json_object_get(r->state, "cold_start"))) {
            fail(r, "agent_prompt_stalled", "agent prompt produced no observed state change");
            return NULL;
        }
        return json_pack("{s:s, s:o}", "type", "agent_prompted", "agent", agent_info(p));
    }
    if (b.kind != B_STALLED && after) {
        json_int_t busy = json_integer_value(json_object_get(r->state, "busy_ms"));

        json_object_set_new(p, "agent_status", json_string(after));
        if (busy > 0)
            json_object_set_new(p, "idle_at", json_integer(wall_ms() + busy));
        save_state(r);
    }
    return json_pack("{s:s, s:o}", "type", "agent_prompted", "agent", agent_info(p));
}

static bool valid_key(const char *k)
{
    static const char *const names[] = {
        "enter", "tab",  "esc",   "escape", "backspace", "delete", "space",    "up",
        "down",  "left", "right", "home",   "end",       "pageup", "pagedown",
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(k, names[i]))
            return true;
    return !strncmp(k, "ctrl+", 5) && k[5] >= 'a' && k[5] <= 'z' && !k[6];
}

static json_t *m_send_input(req *r)
{
    const char *id = param(r, "pane_id");
    json_t *tv = json_object_get(r->params, "text");
    json_t *keys = json_object_get(r->params, "keys"), *k;
    const char *text = json_string_value(tv);
    size_t i;

    if (!id)
        return NULL;
    if ((tv && !json_is_null(tv) && !text) ||
        (keys && !json_is_null(keys) && !json_is_array(keys))) {
        fail(r, "invalid_request", "malformed text or keys");
        return NULL;
    }
    json_array_foreach(keys, i, k) if (!json_is_string(k) || !valid_key(json_string_value(k)))
        fail(r, "invalid_key", "unknown key name");
    if (!r->ecode && !find_pane(r, id))
        fail(r, "pane_not_found", "no such pane");
    if (!r->ecode && !apply_behaviour(r, get_behaviour(r->state, "send_input")) && !r->ecode)
        return NULL; /* hang or close: nothing typed */
    if (r->ecode) {
        log_input(r, "pane.send_input", id, text, keys, r->ecode);
        return NULL;
    }
    log_input(r, "pane.send_input", id, text, json_is_array(keys) ? keys : NULL, NULL);
    json_array_foreach(keys, i, k) if (!strcmp(json_string_value(k), "enter"))
    {
        json_t *p = find_pane(r, id);
        json_int_t swallow = json_integer_value(json_object_get(r->state, "swallow_enters"));
        const char *after = sfield(r->state, "after_prompt_status");
        json_int_t busy = json_integer_value(json_object_get(r->state, "busy_ms"));
        if (!p || !json_object_get(p, "input"))
            continue;
        if (swallow > 0) {
            json_object_set_new(r->state, "swallow_enters", json_integer(swallow - 1));
        } else {
            json_object_del(p, "input");
            if (after)
                json_object_set_new(p, "agent_status", json_string(after));
            if (after && busy > 0)
                json_object_set_new(p, "idle_at", json_integer(wall_ms() + busy));
        }
        save_state(r);
    }
    return json_pack("{s:s}", "type", "ok");
}

/* pane.read {pane_id, source}: the screen, its last line the agent's input
 * line ("> " and the text waiting there, if any). */
static json_t *m_pane_read(req *r)
{
    const char *id = param(r, "pane_id");
    const char *source = id ? param(r, "source") : NULL;
    json_t *p;
    char *screen;
    json_t *res;

    if (!source)
        return NULL;
    p = find_pane(r, id);
    if (!p) {
        fail(r, "pane_not_found", "no such pane");
        return NULL;
    }
    const char *input = json_string_value(json_object_get(p, "input"));
    if (asprintf(&screen, "welcome\n\n> %s\n? for shortcuts\n", input ? input : "") < 0)
        return NULL;
    res = json_pack("{s:s, s:{s:O, s:s, s:s, s:s, s:s, s:s, s:i, s:b}}", "type", "pane_read",
                    "read", "pane_id", json_object_get(p, "pane_id"), "workspace_id", "w1",
                    "tab_id", "w1:t1", "source", source, "format", "text", "text", screen,
                    "revision", 0, "truncated", 0);
    free(screen);
    return res;
}

/* ------------------------------------------ making panes, starting agents */

/* A fresh id number: "next_id" in the state (default 100), never reused,
 * so a test can tell a new pane from one it wrote itself. */
static json_int_t next_id(req *r)
{
    json_int_t n = json_integer_value(json_object_get(r->state, "next_id"));

    if (n <= 0)
        n = 100;
    json_object_set_new(r->state, "next_id", json_integer(n + 1));
    return n;
}

static bool opt_type(req *r, const char *key, json_type type)
{
    json_t *v = json_object_get(r->params, key);

    if (!v || json_typeof(v) == type || (type == JSON_TRUE && json_is_boolean(v)))
        return true;
    fail(r, "invalid_request", "mistyped parameter");
    return false;
}

static json_t *new_pane(req *r, const char *workspace, const char *tab, const char *cwd)
{
    char id[64];
    json_t *p;

    snprintf(id, sizeof id, "%s:p%lld", workspace, (long long)next_id(r));
    p = json_pack("{s:s, s:s, s:s, s:s, s:b}", "pane_id", id, "workspace_id", workspace, "tab_id",
                  tab, "agent_status", "unknown", "focused", 0);
    if (cwd)
        json_object_set_new(p, "cwd", json_string(cwd));
    json_array_append_new(panes(r), p); /* the world owns it; p is borrowed */
    return p;
}

/* The state's "panes" array, made when missing. */
static void ensure_panes(req *r)
{
    if (!panes(r))
        json_object_set_new(r->state, "panes", json_array());
}

static json_t *m_tab_create(req *r)
{
    const char *ws = sfield(r->params, "workspace_id");
    char tab[64];
    json_t *p;

    if (!opt_type(r, "workspace_id", JSON_STRING) || !opt_type(r, "label", JSON_STRING) ||
        !opt_type(r, "focus", JSON_TRUE) || !apply_behaviour(r, get_behaviour(r->state, "tab")))
        return NULL;
    ensure_panes(r);
    snprintf(tab, sizeof tab, "%s:t%lld", ws ? ws : "w1", (long long)next_id(r));
    p = new_pane(r, ws ? ws : "w1", tab, NULL);
    save_state(r);
    return json_pack("{s:s, s:{s:s, s:s, s:s}, s:o}", "type", "tab_created", "tab", "tab_id", tab,
                     "workspace_id", ws ? ws : "w1", "label", sfield(r->params, "label") ?: "",
                     "root_pane", pane_info(p));
}

static json_t *m_pane_split(req *r)
{
    const char *target = sfield(r->params, "target_pane_id");
    const char *dir = sfield(r->params, "direction");
    json_t *t = NULL, *p;

    if (!opt_type(r, "target_pane_id", JSON_STRING) || !opt_type(r, "cwd", JSON_STRING) ||
        !opt_type(r, "env", JSON_OBJECT) || !opt_type(r, "focus", JSON_TRUE) ||
        !opt_type(r, "workspace_id", JSON_STRING))
        return NULL;
    if (!dir || (strcmp(dir, "right") != 0 && strcmp(dir, "down") != 0)) {
        fail(r, "invalid_request", "direction must be right or down");
        return NULL;
    }
    if (target && !(t = find_pane(r, target))) {
        fail(r, "pane_not_found", "no such pane");
        return NULL;
    }
    if (!apply_behaviour(r, get_behaviour(r->state, "split")))
        return NULL;
    ensure_panes(r);
    p = new_pane(r, t ? sfield(t, "workspace_id") ?: "w1" : "w1",
                 t ? sfield(t, "tab_id") ?: "w1:t1" : "w1:t1", sfield(r->params, "cwd"));
    if (json_object_get(r->params, "env"))
        json_object_set(p, "env", json_object_get(r->params, "env"));
    save_state(r);
    return json_pack("{s:s, s:o}", "type", "pane_info", "pane", pane_info(p));
}

static bool name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 32 || s[0] < 'a' || s[0] > 'z')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

/* agent.start's checks of its parameters; the pane, or NULL (failed). */
static json_t *start_target(req *r, const char *name, json_int_t *wait)
{
    json_t *args = json_object_get(r->params, "args"),
           *t = json_object_get(r->params, "timeout_ms");
    json_t *p, *v;
    size_t i;

    json_array_foreach(args, i, v) if (!json_is_string(v)) args = NULL;
    if ((json_object_get(r->params, "args") && !json_is_array(args)) ||
        (t && !json_is_integer(t))) {
        fail(r, "invalid_request", "mistyped parameter");
        return NULL;
    }
    *wait = t ? json_integer_value(t) : 30000;
    if (*wait <= 3000 || *wait > 300000 || !name_ok(name)) {
        fail(r, "invalid_params",
             "timeout_ms must be > 3000 and <= 300000; name [a-z][a-z0-9_-]{0,31}");
        return NULL;
    }
    json_array_foreach(panes(r), i, p)
    {
        const char *n = sfield(p, "name");

        if (is_agent(p) && n && !strcmp(n, name)) {
            fail(r, "invalid_params", "an agent of that name is live");
            return NULL;
        }
    }
    p = find_pane(r, sfield(r->params, "pane_id"));
    if (!p)
        fail(r, "pane_not_found", "no such pane");
    else if (is_agent(p))
        fail(r, "invalid_params", "the pane is not at its shell prompt");
    return p;
}

/* The behaviour for this kind ("start:<kind>"), else "start"; *word is
 * its text ("never" and "blocked" are agent.start's own). */
static behaviour start_behaviour(req *r, const char *kind, const char **word)
{
    json_t *all = json_object_get(r->state, "behaviour");
    char key[64];

    snprintf(key, sizeof key, "start:%s", kind);
    if (!json_object_get(all, key))
        snprintf(key, sizeof key, "start");
    *word = json_string_value(json_object_get(all, key));
    if (!*word)
        *word = "ok";
    return get_behaviour(r->state, key);
}

static json_t *m_agent_start(req *r)
{
    const char *name = param(r, "name");
    const char *kind = name ? param(r, "kind") : NULL;
    const char *pane_id = kind ? param(r, "pane_id") : NULL, *word;
    json_t *p, *args = json_object_get(r->params, "args");
    json_int_t wait;
    behaviour b;
    bool never, blocked;

    if (!pane_id || !(p = start_target(r, name, &wait)))
        return NULL;
    b = start_behaviour(r, kind, &word);
    never = !strcmp(word, "never");
    blocked = !strcmp(word, "blocked");
    append_log(r->cfg->starts_path,
               json_pack("{s:s, s:s, s:s, s:O}", "name", name, "kind", kind, "pane_id", pane_id,
                         "args", args ? args : json_null()));
    if (!never && !blocked && !apply_behaviour(r, b))
        return NULL; /* hang, close, error: the pane stays at its prompt */
    json_object_set_new(p, "agent", json_string(kind));
    json_object_set_new(p, "name", json_string(name));
    json_object_set_new(p, "agent_status",
                        json_string(blocked ? "blocked"
                                    : never ? "working"
                                            : "idle"));
    if (args)
        json_object_set(p, "args", args);
    save_state(r);
    if (blocked) {
        fail(r, "agent_not_ready", "the agent came up blocked");
        return NULL;
    }
    if (never || (b.kind == B_SLOW && b.ms >= wait)) {
        r->out->delay_ms = (int)wait;
        fail(r, "timeout", "the agent did not become ready within timeout_ms");
        return NULL;
    }
    return json_pack("{s:s, s:o}", "type", "agent_started", "agent", agent_info(p));
}

static json_t *m_pane_close(req *r)
{
    const char *id = param(r, "pane_id");
    json_t *ps = panes(r), *p;
    size_t i;

    if (!id)
        return NULL;
    json_array_foreach(ps, i, p)
    {
        const char *pid = sfield(p, "pane_id");

        if (pid && !strcmp(pid, id)) {
            if (!apply_behaviour(r, get_behaviour(r->state, "close")))
                return NULL;
            json_array_remove(ps, i);
            save_state(r);
            return json_pack("{s:s}", "type", "ok");
        }
    }
    fail(r, "pane_not_found", "no such pane");
    return NULL;
}

static const struct {
    const char *name;
    json_t *(*fn)(req *);
} methods[] = {
    {"ping", m_ping},
    {"pane.list", m_pane_list},
    {"pane.get", m_pane_get},
    {"agent.get", m_agent_get},
    {"agent.list", m_agent_list},
    {"agent.prompt", m_agent_prompt},
    {"pane.send_input", m_send_input},
    {"pane.read", m_pane_read},
    {"tab.create", m_tab_create},
    {"pane.split", m_pane_split},
    {"agent.start", m_agent_start},
    {"pane.close", m_pane_close},
};

/* ------------------------------------------------------------- dispatch */

static char *envelope(const char *id, json_t *result, const char *code, const char *msg)
{
    json_t *o =
        result ? json_pack("{s:s, s:o}", "id", id, "result", result)
               : json_pack("{s:s, s:{s:s, s:s}}", "id", id, "error", "code", code, "message", msg);
    char *s = json_dumps(o, JSON_COMPACT);

    json_decref(o);
    return s;
}

static void handle_locked(const fh_config *cfg, json_t *root, fh_outcome *out)
{
    const char *id = sfield(root, "id");
    const char *method = sfield(root, "method");
    json_t *params = json_object_get(root, "params"), *res = NULL;
    json_error_t jerr;
    req r = {.cfg = cfg, .out = out, .params = params};
    behaviour all;
    size_t i;

    if (!id || !method || !json_is_object(params)) {
        out->reply = envelope("", NULL, "invalid_request", "malformed request");
        return;
    }
    log_call(cfg, method);
    r.state = json_load_file(cfg->state_path, 0, &jerr);
    if (!json_is_object(r.state)) {
        out->reply = envelope(id, NULL, "internal_error", "fake-herdr: statefile unreadable");
        json_decref(r.state);
        return;
    }
    settle_turns(&r);
    all = get_behaviour(r.state, "all");
    if (all.kind == B_HANG || all.kind == B_CLOSE) {
        out->action = all.kind == B_HANG ? FH_HANG : FH_CLOSE;
    } else if (all.kind == B_GARBAGE) {
        out->reply = strdup("herdr says: this is not {json");
    } else {
        for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
            if (!strcmp(method, methods[i].name))
                break;
        if (i == sizeof(methods) / sizeof(methods[0]))
            fail(&r, "invalid_request", "unknown method");
        else
            res = methods[i].fn(&r);
        if (r.ecode)
            out->reply =
                envelope(strcmp(r.ecode, "invalid_request") ? id : "", NULL, r.ecode, r.emsg);
        else if (res)
            out->reply = envelope(id, res, NULL, NULL);
    }
    json_decref(r.state);
}

void fh_handle(const fh_config *cfg, const char *line, size_t len, fh_outcome *out)
{
    json_t *root = json_loadb(line, len, 0, NULL);

    memset(out, 0, sizeof(*out));
    if (!json_is_object(root)) {
        out->reply = envelope("", NULL, "invalid_request", "not a JSON object");
    } else {
        pthread_mutex_lock(&world_lock);
        handle_locked(cfg, root, out);
        pthread_mutex_unlock(&world_lock);
    }
    json_decref(root);
    if (out->action == FH_REPLY && !out->reply)
        out->action = FH_CLOSE;
}
