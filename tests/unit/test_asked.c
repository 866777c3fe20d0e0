/* SPDX-License-Identifier: Apache-2.0 */
/* test_asked.c — the requester's record of its control requests
 * (fleetfs/spawn/asked.h), through a real file: the lines of
 * hosts/<h>/spawns as a lead reads them, answers believed once and only
 * from the host asked, expiry, restarts, bad lines, the bound. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetfs/spawn/asked.h"

static char *dir, *path;

static int setup(void **state)
{
    (void)state;
    dir = g_dir_make_tmp("fleetfs-asked-XXXXXX", NULL);
    path = g_strdup_printf("%s/spawns.jsonl", dir);
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

static ak_book *book(ak_book *old)
{
    char *err = NULL;
    ak_book *b;

    ak_close(old);
    b = ak_open(path, &err);
    if (!b)
        fail_msg("%s", err);
    return b;
}

static ctl_env spawn_to(const char *host, const char *name, int64_t now)
{
    ctl_env e;

    ctl_init(&e, CTL_TYPE_SPAWN, "alpha", host, now, CTL_TTL_MS);
    strcpy(e.profile, "worker");
    snprintf(e.name, sizeof e.name, "%s", name);
    return e;
}

static ctl_env answer(const ctl_env *req, const char *from, const char *state, const char *detail)
{
    ctl_env a;

    ctl_init(&a, CTL_TYPE_SPAWNED, from, "alpha", 0, CTL_TTL_MS);
    strcpy(a.requestId, req->msgId);
    strcpy(a.state, state);
    strcpy(a.detail, detail);
    snprintf(a.gid, sizeof a.gid, "%s@%s", req->name, req->to);
    return a;
}

/* The lines of hosts/<host>/spawns, parsed. */
static json_t *spawns(ak_book *b, const char *host)
{
    size_t len;
    char *text = ak_render(b, host, &len);
    json_t *a = json_array();
    gchar **lines = g_strsplit(text, "\n", -1);

    for (gchar **l = lines; *l; l++)
        if (**l)
            json_array_append_new(a, json_loads(*l, 0, NULL));
    g_strfreev(lines);
    g_free(text);
    return a;
}

static const char *field(json_t *lines, size_t i, const char *key)
{
    return json_string_value(json_object_get(json_array_get(lines, i), key));
}

static void requested_answered_once(void **state)
{
    int64_t now = env_now_ms();
    ak_book *b = book(NULL);
    ctl_env r1 = spawn_to("beta", "w1", now), r2 = spawn_to("gamma", "w2", now), a;
    char why[300];
    json_t *l;

    (void)state;
    assert_int_equal(ak_requested(b, &r1, now), 0);
    assert_int_equal(ak_requested(b, &r2, now), 0);
    l = spawns(b, "beta");
    assert_int_equal(json_array_size(l), 1);
    assert_string_equal(field(l, 0, "requestId"), r1.msgId);
    assert_string_equal(field(l, 0, "state"), "requested");
    assert_string_equal(field(l, 0, "profile"), "worker");
    assert_null(json_object_get(json_array_get(l, 0), "host")); /* the directory says it */
    json_decref(l);
    /* from a host that was not asked: refused */
    a = answer(&r1, "gamma", "ready", "ready in tmux pane %3");
    assert_int_equal(ak_answer(b, &a, now + 10, why, sizeof why), -1);
    assert_non_null(strstr(why, "it was sent to beta"));
    a = answer(&r1, "beta", "ready", "ready in tmux pane %3");
    assert_int_equal(ak_answer(b, &a, now + 10, why, sizeof why), 0);
    /* a second answer (a replay) changes nothing */
    a = answer(&r1, "beta", "failed", "lies");
    assert_int_equal(ak_answer(b, &a, now + 20, why, sizeof why), -1);
    assert_non_null(strstr(why, "ready already"));
    env_new_msgid(a.requestId);
    assert_int_equal(ak_answer(b, &a, now + 20, why, sizeof why), -1);
    assert_non_null(strstr(why, "did not send"));
    /* after a restart */
    b = book(b);
    l = spawns(b, "beta");
    assert_string_equal(field(l, 0, "state"), "ready");
    assert_string_equal(field(l, 0, "gid"), "w1@beta");
    assert_string_equal(field(l, 0, "detail"), "ready in tmux pane %3");
    json_decref(l);
    l = spawns(b, "gamma");
    assert_string_equal(field(l, 0, "state"), "requested");
    json_decref(l);
    l = spawns(b, "delta");
    assert_int_equal(json_array_size(l), 0);
    json_decref(l);
    ak_close(b);
}

static void unanswered_requests_fail(void **state)
{
    int64_t now = env_now_ms();
    ak_book *b = book(NULL);
    ctl_env r = spawn_to("beta", "w1", now), a;
    char why[300];
    json_t *l;

    (void)state;
    assert_int_equal(ak_requested(b, &r, now), 0);
    assert_int_equal(ak_expire(b, now + CTL_TTL_MS + AK_GRACE_MS - 1), 0);
    assert_int_equal(ak_expire(b, now + CTL_TTL_MS + AK_GRACE_MS), 1);
    l = spawns(b, "beta");
    assert_string_equal(field(l, 0, "state"), "failed");
    assert_non_null(strstr(field(l, 0, "detail"), "no answer"));
    json_decref(l);
    /* a late answer changes nothing */
    a = answer(&r, "beta", "ready", "late");
    assert_int_equal(ak_answer(b, &a, now, why, sizeof why), -1);
    assert_int_equal(ak_expire(b, now + 10 * AK_GRACE_MS), 0);
    ak_close(b);
}

/* spawn_grace: a shorter grace fails an unanswered request sooner, and
 * only the unanswered ones */
static void a_set_grace(void **state)
{
    int64_t now = env_now_ms();
    ak_book *b = book(NULL);
    ctl_env r = spawn_to("beta", "w1", now), r2 = spawn_to("beta", "w2", now), a;
    char why[300];
    json_t *l;

    (void)state;
    ak_set_grace(b, 1000);
    assert_int_equal(ak_requested(b, &r, now), 0);
    assert_int_equal(ak_requested(b, &r2, now), 0);
    a = answer(&r2, "beta", "ready", "");
    assert_int_equal(ak_answer(b, &a, now, why, sizeof why), 0);
    assert_int_equal(ak_expire(b, now + CTL_TTL_MS + 999), 0);
    assert_int_equal(ak_expire(b, now + CTL_TTL_MS + 1000), 1);
    l = spawns(b, "beta");
    assert_string_equal(field(l, 0, "state"), "failed");
    assert_string_equal(field(l, 1, "state"), "ready");
    json_decref(l);
    ak_close(b);
}

static void bad_lines_and_the_bound(void **state)
{
    int64_t now = env_now_ms();
    ak_book *b = book(NULL);
    FILE *f;
    json_t *l;
    ctl_env first = spawn_to("beta", "w0", now);

    (void)state;
    assert_int_equal(ak_requested(b, &first, now), 0);
    ak_close(b);
    f = fopen(path, "a");
    fputs("garbage\n{\"requestId\":\"x\"}\n", f);
    fclose(f);
    b = book(NULL);
    l = spawns(b, "beta");
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
    for (int i = 0; i < AK_KEEP + 5; i++) {
        ctl_env r = spawn_to("beta", "w", now);

        assert_int_equal(ak_requested(b, &r, now), 0);
    }
    b = book(b);
    l = spawns(b, "beta");
    assert_int_equal(json_array_size(l), AK_KEEP);
    for (size_t i = 0; i < json_array_size(l); i++)
        assert_string_not_equal(field(l, i, "requestId"), first.msgId); /* the oldest went */
    json_decref(l);
    ak_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(requested_answered_once, setup, teardown),
        cmocka_unit_test_setup_teardown(unanswered_requests_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(a_set_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_lines_and_the_bound, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
