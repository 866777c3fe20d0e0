/* SPDX-License-Identifier: Apache-2.0 */
/* test_spawn_run.c — one control request on the far host, end to end but
 * for the wire (fleetfs/spawn/run.h): with a real tmux server of its own
 * and BUILD/tools/fake-agent as the profile's program (skipped without
 * tmux), and with the fake herdr. What is checked is what tmux or the fake
 * shows afterwards (which windows or panes exist), what the ledger file
 * holds after a reopen, and the answer to the requester. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/spawn/run.h"
#include "herdr/spawn.h"
#include "herdr/tmux_int.h"
#include "tests/unit/fake_herdr_run.h"
#include "tests/unit/tmux_run.h"

static char tmp[PATH_MAX], agent[PATH_MAX], typed[PATH_MAX + 8], ledger_path[PATH_MAX + 16];
static char *worker_cmd[3], *false_cmd[2];
static prof profs[2];
static prof_set set = {profs, 2};
static const char *const from[] = {"alpha", NULL};

static int setup(void **state)
{
    (void)state;
    tr_start(tmp, agent);
    if (!tmp[0])
        return 0;
    snprintf(typed, sizeof typed, "%s/typed", tmp);
    snprintf(ledger_path, sizeof ledger_path, "%s/spawned.jsonl", tmp);
    worker_cmd[0] = agent;
    worker_cmd[1] = typed;
    false_cmd[0] = "/bin/false";
    profs[0] = (prof){.name = "worker",
                      .command = worker_cmd,
                      .program = "fake-agent",
                      .max = 1,
                      .ready_timeout_ms = 5000,
                      .unconfined = true}; /* the sandbox: t1051 */
    profs[1] = (prof){.name = "broken",
                      .command = false_cmd,
                      .program = "false",
                      .max = 2,
                      .ready_timeout_ms = 3001,
                      .unconfined = true};
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tr_stop(tmp);
    return 0;
}

static lg_ledger *open_ledger(void)
{
    char *err = NULL;
    lg_ledger *l = lg_open(ledger_path, &err);

    if (!l)
        fail_msg("%s", err);
    return l;
}

static sr_host host_with(lg_ledger *l)
{
    sr_host h = {.coord_id = "beta",
                 .spawn_from = from,
                 .profiles = &set,
                 .ledger = l,
                 .backend = "tmux",
                 .quiet_ms = 200};

    return h;
}

static ctl_env request(const char *type, const char *requester, const char *profile,
                       const char *name)
{
    ctl_env e;

    ctl_init(&e, type, requester, "beta", env_now_ms(), CTL_TTL_MS);
    g_strlcpy(e.profile, profile, sizeof e.profile);
    g_strlcpy(e.name, name, sizeof e.name);
    snprintf(e.gid, sizeof e.gid, "%s@beta", name);
    return e;
}

#define SKIP_WITHOUT_TMUX() TR_NEED_TMUX(tmp)

static void spawn_refuse_fail_stop(void **state)
{
    lg_ledger *l;
    sr_host h;
    ctl_env req, a;

    SKIP_WITHOUT_TMUX();
    l = open_ledger();
    h = host_with(l);
    req = request(CTL_TYPE_SPAWN, "alpha", "worker", "w1");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_OK);
    if (strcmp(a.state, "ready") != 0)
        fail_msg("not ready: %s", a.detail);
    assert_string_equal(a.type, CTL_TYPE_SPAWNED);
    assert_string_equal(a.to, "alpha");
    assert_string_equal(a.from, "beta");
    assert_string_equal(a.requestId, req.msgId);
    assert_string_equal(a.gid, "w1@beta");
    assert_int_equal(tr_windows(), 2);
    /* max 1; a name in use; someone not in spawn_from: refused, nothing made */
    req = request(CTL_TYPE_SPAWN, "alpha", "worker", "w2");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_OVER_MAX);
    assert_string_equal(a.state, "refused");
    req = request(CTL_TYPE_SPAWN, "alpha", "broken", "w1");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_NAME_TAKEN);
    req = request(CTL_TYPE_SPAWN, "gamma", "worker", "w3");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_NOT_ALLOWED);
    assert_non_null(strstr(a.detail, "gamma may not start agents here"));
    assert_int_equal(tr_windows(), 2);
    /* a program that dies: failed, with why, and no window */
    req = request(CTL_TYPE_SPAWN, "alpha", "broken", "w4");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_OK);
    assert_string_equal(a.state, "failed");
    assert_non_null(strstr(a.detail, "false exited"));
    assert_int_equal(tr_windows(), 2);
    assert_null(lg_find(l, "w4@beta"));
    /* the ledger as a restart reads it */
    lg_close(l);
    l = open_ledger();
    h = host_with(l);
    assert_non_null(lg_find(l, "w1@beta"));
    assert_int_equal(lg_running(l, "worker"), 1);
    /* stop: only what was started here */
    req = request(CTL_TYPE_STOP, "alpha", "", "w9");
    assert_int_equal(sr_stop(&h, &req, env_now_ms(), &a), SC_NOT_OURS);
    req = request(CTL_TYPE_STOP, "gamma", "", "w1");
    assert_int_equal(sr_stop(&h, &req, env_now_ms(), &a), SC_NOT_ALLOWED);
    assert_int_equal(tr_windows(), 2);
    req = request(CTL_TYPE_STOP, "alpha", "", "w1");
    assert_int_equal(sr_stop(&h, &req, env_now_ms(), &a), SC_OK);
    assert_string_equal(a.state, "stopped");
    assert_int_equal(tr_windows(), 1);
    assert_int_equal(sr_stop(&h, &req, env_now_ms(), &a), SC_NOT_OURS); /* once */
    lg_close(l);
}

/* A fleetfs killed during a start: the restart closes the pane it was
 * making and answers failed; a marked window no record holds is closed;
 * a window marked for another host is left alone. */
static void recovery_after_a_kill(void **state)
{
    lg_ledger *l;
    sr_host h;
    lg_entry e = {.state = LG_STARTING, .at_ms = 1};
    ctl_env *answers;
    char why[300];
    const char *const mk_other[] = {"new-window", "-d",         "-P", "-F", "#{window_id}",
                                    "--",         "/bin/sleep", "60", NULL};
    sp_request rq = {.name = "w5",
                     .ready_ms = 5000,
                     .argv = (const char *const *)worker_cmd,
                     .program = "fake-agent",
                     .quiet_ms = 200};
    sp_result half, orphan, foreign;
    size_t n;

    SKIP_WITHOUT_TMUX();
    (void)mk_other;
    /* what the killed run left: its record and its window */
    rq.tag = "w5@beta";
    assert_int_equal(sp_tmux_start(&rq, &half), 0);
    rq.tag = "w6@beta";
    rq.name = "w6";
    assert_int_equal(sp_tmux_start(&rq, &orphan), 0);
    rq.tag = "w7@gamma";
    rq.name = "w7";
    assert_int_equal(sp_tmux_start(&rq, &foreign), 0);
    assert_int_equal(tr_windows(), 4);
    l = open_ledger();
    strcpy(e.gid, "w5@beta");
    strcpy(e.name, "w5");
    strcpy(e.profile, "worker");
    env_new_msgid(e.request_id);
    strcpy(e.requester, "alpha");
    strcpy(e.backend, "tmux");
    strcpy(e.pane, half.pane_id);
    strcpy(e.window, half.window_id);
    assert_int_equal(lg_record(l, &e), 0);
    lg_close(l);
    /* the restart */
    l = open_ledger();
    h = host_with(l);
    n = sr_recover(&h, env_now_ms(), &answers);
    assert_int_equal(n, 1);
    assert_string_equal(answers[0].to, "alpha");
    assert_string_equal(answers[0].requestId, e.request_id);
    assert_string_equal(answers[0].state, "failed");
    assert_non_null(strstr(answers[0].detail, "restarted during the start"));
    g_free(answers);
    assert_int_equal(tr_windows(), 2); /* the base window and gamma's */
    assert_null(lg_find(l, "w5@beta"));
    assert_int_equal(sp_tmux_close(foreign.window_id, "w7@gamma", why, sizeof why), 0);
    lg_close(l);
}

/* ------------------------------------------------------------ herdr */

static const char *const yes_args[] = {"--yes", NULL};
static prof hprofs[2] = {
    {.name = "worker",
     .kind = "claude",
     .args = (char **)yes_args,
     .max = 2,
     .ready_timeout_ms = 3001,
     .unconfined = true},
    {.name = "slow", .kind = "codex", .max = 1, .ready_timeout_ms = 3001, .unconfined = true},
};
static prof_set hset = {hprofs, 2};

#define HLEAD                                                                                   \
    "{\"pane_id\":\"w1:p1\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"agent\":\"claude\"," \
    "\"name\":\"beta\",\"agent_status\":\"idle\"}"

static void herdr_spawn_fail_stop(void **state)
{
    fake *f = fake_start("{\"panes\":[" HLEAD "],\"behaviour\":{\"start:codex\":\"never\"}}");
    hd_client *c = hd_client_new(f->sock);
    char dir[] = "/tmp/fleetfs-srunh-XXXXXX", path[64];
    char *err = NULL;
    lg_ledger *l;
    sr_host h;
    ctl_env req, a;
    json_t *p;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/spawned.jsonl", dir);
    l = lg_open(path, &err);
    h = (sr_host){.coord_id = "beta",
                  .spawn_from = from,
                  .profiles = &hset,
                  .ledger = l,
                  .backend = "herdr",
                  .herdr = c,
                  .call_ms = 1000};
    req = request(CTL_TYPE_SPAWN, "alpha", "worker", "w1");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_OK);
    if (strcmp(a.state, "ready") != 0)
        fail_msg("not ready: %s", a.detail);
    assert_int_equal(fake_panes(f), 2);
    p = fake_pane(f, lg_find(l, "w1@beta")->pane); /* the profile's kind and args */
    assert_non_null(p);
    assert_string_equal(json_string_value(json_object_get(p, "agent")), "claude");
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "args"), 0)), "--yes");
    json_decref(p);
    /* never ready: failed after the profile's ready_timeout, no pane */
    req = request(CTL_TYPE_SPAWN, "alpha", "slow", "w2");
    assert_int_equal(sr_spawn(&h, &req, env_now_ms(), &a), SC_OK);
    assert_string_equal(a.state, "failed");
    assert_non_null(strstr(a.detail, "did not become ready within 3001 ms"));
    assert_int_equal(fake_panes(f), 2);
    assert_null(lg_find(l, "w2@beta"));
    req = request(CTL_TYPE_STOP, "alpha", "", "w1");
    assert_int_equal(sr_stop(&h, &req, env_now_ms(), &a), SC_OK);
    assert_string_equal(a.state, "stopped");
    assert_int_equal(fake_panes(f), 1);
    lg_close(l);
    hd_client_free(c);
    fake_stop(f);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

/* Killed during agent.start: the pane was recorded (or not yet: then
 * herdr knows the agent by its name); either way the restart closes it. */
static void herdr_recovery(void **state)
{
    fake *f = fake_start(
        "{\"panes\":[" HLEAD ",{\"pane_id\":\"w1:p7\",\"workspace_id\":\"w1\",\"tab_id\":"
        "\"w1:t2\",\"agent\":\"claude\",\"name\":\"w7\",\"agent_status\":\"working\"},"
        "{\"pane_id\":\"w1:p8\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t3\",\"agent\":"
        "\"claude\",\"name\":\"w8\",\"agent_status\":\"working\"}]}");
    hd_client *c = hd_client_new(f->sock);
    char dir[] = "/tmp/fleetfs-srunh-XXXXXX", path[64];
    char *err = NULL;
    lg_ledger *l;
    sr_host h;
    ctl_env *answers;
    lg_entry e = {.state = LG_STARTING, .at_ms = 1};

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/spawned.jsonl", dir);
    l = lg_open(path, &err);
    strcpy(e.profile, "worker");
    strcpy(e.requester, "alpha");
    strcpy(e.backend, "herdr");
    strcpy(e.gid, "w7@beta");
    strcpy(e.name, "w7");
    strcpy(e.pane, "w1:p7");
    env_new_msgid(e.request_id);
    assert_int_equal(lg_record(l, &e), 0);
    strcpy(e.gid, "w8@beta");
    strcpy(e.name, "w8");
    e.pane[0] = '\0';
    env_new_msgid(e.request_id);
    assert_int_equal(lg_record(l, &e), 0);
    lg_close(l);
    l = lg_open(path, &err);
    h = (sr_host){.coord_id = "beta",
                  .spawn_from = from,
                  .profiles = &hset,
                  .ledger = l,
                  .backend = "herdr",
                  .herdr = c,
                  .call_ms = 1000};
    assert_int_equal(sr_recover(&h, env_now_ms(), &answers), 2);
    assert_string_equal(answers[1].requestId, e.request_id);
    assert_string_equal(answers[1].state, "failed");
    g_free(answers);
    assert_int_equal(fake_panes(f), 1);
    assert_int_equal(lg_running(l, "worker"), 0);
    lg_close(l);
    hd_client_free(c);
    fake_stop(f);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spawn_refuse_fail_stop),
        cmocka_unit_test(recovery_after_a_kill),
        cmocka_unit_test(herdr_spawn_fail_stop),
        cmocka_unit_test(herdr_recovery),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
