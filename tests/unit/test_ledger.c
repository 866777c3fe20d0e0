/* SPDX-License-Identifier: Apache-2.0 */
/* test_ledger.c — the far host's record of the agents it started
 * (fleetfs/spawn/ledger.h), through a real file: what a restart finds
 * (a start caught half way included), what counts against max, lines
 * that are not records, and that the file stays bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/spawn/ledger.h"

static char *dir, *path;

static int setup(void **state)
{
    (void)state;
    dir = g_dir_make_tmp("fleetfs-ledger-XXXXXX", NULL);
    path = g_strdup_printf("%s/spawned.jsonl", dir);
    return 0;
}

static int teardown(void **state)
{
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);

    (void)state;
    assert_int_equal(system(cmd), 0);
    g_free(cmd);
    g_free(path);
    g_free(dir);
    return 0;
}

static lg_entry entry(const char *name, const char *profile, lg_state st)
{
    lg_entry e = {.state = st, .at_ms = 1764583200000};

    snprintf(e.gid, sizeof e.gid, "%s@beta", name);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.profile, sizeof e.profile, "%s", profile);
    env_new_msgid(e.request_id);
    strcpy(e.requester, "alpha");
    strcpy(e.backend, "tmux");
    if (st != LG_STARTING) {
        strcpy(e.pane, "%3");
        strcpy(e.window, "@2");
    }
    return e;
}

static lg_ledger *reopen(lg_ledger *l)
{
    char *err = NULL;

    lg_close(l);
    l = lg_open(path, &err);
    if (!l)
        fail_msg("%s", err);
    return l;
}

static void survives_a_restart(void **state)
{
    lg_ledger *l = reopen(NULL);
    lg_entry w1 = entry("w1", "worker", LG_STARTING), w2 = entry("w2", "worker", LG_STARTING);
    lg_entry r1 = w1;
    const lg_entry *const *live;
    size_t n;

    (void)state;
    assert_int_equal(lg_record(l, &w1), 0);
    assert_int_equal(lg_record(l, &w2), 0);
    strcpy(r1.pane, "%3");
    strcpy(r1.window, "@2");
    r1.state = LG_READY;
    assert_int_equal(lg_record(l, &r1), 0);
    assert_int_equal(lg_running(l, "worker"), 2); /* starting counts too */
    assert_int_equal(lg_running(l, "other"), 0);
    /* killed here: w1 ready, w2 half way */
    l = reopen(l);
    assert_int_equal(lg_running(l, "worker"), 2);
    assert_non_null(lg_find(l, "w1@beta"));
    assert_string_equal(lg_find(l, "w1@beta")->pane, "%3");
    assert_int_equal(lg_find(l, "w1@beta")->state, LG_READY);
    assert_string_equal(lg_find(l, "w1@beta")->request_id, w1.request_id);
    live = lg_live(l, &n);
    assert_int_equal(n, 2);
    assert_string_equal(live[1]->gid, "w2@beta");
    assert_int_equal(live[1]->state, LG_STARTING); /* to close and answer failed */
    /* ended: no longer live, also after a restart */
    w2.state = LG_FAILED;
    assert_int_equal(lg_record(l, &w2), 0);
    r1.state = LG_STOPPED;
    assert_int_equal(lg_record(l, &r1), 0);
    assert_null(lg_find(l, "w1@beta"));
    l = reopen(l);
    assert_int_equal(lg_running(l, "worker"), 0);
    assert_null(lg_find(l, "w2@beta"));
    lg_close(l);
}

static void bad_lines_are_skipped(void **state)
{
    lg_ledger *l = reopen(NULL);
    lg_entry ok = entry("good", "worker", LG_READY);
    FILE *f;

    (void)state;
    assert_int_equal(lg_record(l, &ok), 0);
    lg_close(l);
    f = fopen(path, "a");
    fputs("not json\n", f);
    fputs("{\"gid\":\"x\"}\n", f);
    fputs(
        "{\"gid\":\"Evil@beta\",\"name\":\"Evil\",\"profile\":\"worker\",\"requestId\":"
        "\"0123456789abcdef0123456789abcdef\",\"requester\":\"alpha\",\"backend\":\"tmux\","
        "\"pane\":\"%1\",\"window\":\"@1\",\"state\":\"ready\",\"at\":\"2026-12-01T10:00:00Z\"}\n",
        f);
    fputs(
        "{\"gid\":\"w9@beta\",\"name\":\"w9\",\"profile\":\"worker\",\"requestId\":"
        "\"0123456789abcdef0123456789abcdef\",\"requester\":\"alpha\",\"backend\":\"sh\","
        "\"pane\":\"%1\",\"window\":\"@1\",\"state\":\"ready\",\"at\":\"2026-12-01T10:00:00Z\"}\n",
        f);
    fputs("{\"gid\":\"w8@beta\",\"name\":\"w8\",\"profile\":\"worker\",\"requestId\":"
          "\"0123456789abcdef0123456789abcdef\",\"requester\":\"alpha\",\"backend\":\"tmux\","
          "\"pane\":\"%1\\u001b[2J\",\"window\":\"@1\",\"state\":\"ready\",\"at\":"
          "\"2026-12-01T10:00:00Z\"}\n",
          f);
    fclose(f);
    l = reopen(NULL);
    assert_int_equal(lg_running(l, "worker"), 1);
    assert_non_null(lg_find(l, "good@beta"));
    lg_close(l);
}

static void file_stays_bounded(void **state)
{
    lg_ledger *l = reopen(NULL);
    lg_entry keep = entry("keep", "worker", LG_READY);
    char *text = NULL;
    size_t lines = 0;

    (void)state;
    assert_int_equal(lg_record(l, &keep), 0);
    for (int i = 0; i < 300; i++) {
        lg_entry e = entry("tmp", "worker", LG_STARTING);

        assert_int_equal(lg_record(l, &e), 0);
        e.state = LG_FAILED;
        assert_int_equal(lg_record(l, &e), 0);
    }
    l = reopen(l);
    assert_int_equal(lg_running(l, "worker"), 1);
    assert_non_null(lg_find(l, "keep@beta"));
    lg_close(l);
    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    g_free(text);
    if (lines > 200)
        fail_msg("%zu lines for one live agent", lines);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(survives_a_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_lines_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(file_stays_bounded, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
