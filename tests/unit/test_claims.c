/* SPDX-License-Identifier: Apache-2.0 */
/* test_claims.c — the claims listing's table (fleetfs/face/claims.c,
 * doc/claims.md "The listing"): announcements add, update and remove
 * names (a stale token never wins, our own coord_id and malformed events
 * are ignored), a probe that finds no consumer removes another's claim, a
 * listing is sorted, names are checked before the broker is asked, and
 * nothing is granted without a connection.  The claims thread never runs
 * here: what reaches the table is fed to its callbacks directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/face/claims.h"
#include "fleetfs/face/fleet.h"

static fleet F;
static fs_opts O;

static int setup(void **state)
{
    memset(&F, 0, sizeof F);
    opts_init(&O);
    g_free(O.coord_id); /* opts_init's default: the host name */
    O.coord_id = g_strdup("alpha");
    F.opts = &O;
    g_strlcpy(F.host, "h1", sizeof F.host);
    *state = cl_new(&F, (char *[]){"amqp://127.0.0.1:1", NULL});
    return 0;
}

static int teardown(void **state)
{
    cl_free(*state);
    opts_free(&O);
    return 0;
}

static void ev(claims *c, const char *op, const char *name, const char *coord, long token,
               const char *note)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"op\":\"%s\",\"name\":\"%s\",\"host\":\"hb\",\"coord\":\"%s\",\"since\":1,"
             "\"token\":%ld,\"note\":\"%s\"}",
             op, name, coord, token, note);
    cl_event(c, body, strlen(body));
}

static json_t *holder(claims *c, const char *name)
{
    GString *g = cl_render(c, name, NULL);
    json_t *j = json_loads(g->str, 0, NULL);
    g_string_free(g, TRUE);
    return j;
}

static void test_take_note_release(void **state)
{
    claims *c = *state;
    json_t *j;
    ev(c, "take", "deploy", "beta", 3, "");
    assert_true(cl_known(c, "deploy"));
    ev(c, "note", "deploy", "beta", 3, "migrating");
    j = holder(c, "deploy");
    assert_string_equal(json_string_value(json_object_get(j, "holder")), "beta");
    assert_int_equal(json_integer_value(json_object_get(j, "token")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "note")), "migrating");
    assert_false(json_boolean_value(json_object_get(j, "mine")));
    json_decref(j);
    /* a stale holder's word never wins */
    ev(c, "held", "deploy", "gamma", 2, "old");
    j = holder(c, "deploy");
    assert_string_equal(json_string_value(json_object_get(j, "holder")), "beta");
    json_decref(j);
    ev(c, "release", "deploy", "gamma", 2, "");
    assert_true(cl_known(c, "deploy"));
    /* nor can another host release it for us: only the holder's EPERM */
    assert_int_equal(cl_release(c, "deploy", NULL), EPERM);
    assert_int_equal(cl_note(c, "deploy", NULL, "x", 1), EPERM);
    ev(c, "release", "deploy", "beta", 3, "");
    assert_false(cl_known(c, "deploy"));
    assert_int_equal(cl_release(c, "deploy", NULL), ENOENT);
}

static void test_ignored(void **state)
{
    claims *c = *state;
    const char *bad[] = {"",
                         "{",
                         "[]",
                         "{\"op\":\"take\"}",
                         "{\"op\":\"take\",\"name\":\"Bad\",\"coord\":\"b\",\"token\":1}",
                         "{\"op\":\"take\",\"name\":\"ok\",\"coord\":\"b\",\"token\":0}",
                         "{\"op\":\"take\",\"name\":\"ok\",\"token\":1}"};
    char **l;
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        cl_event(c, bad[i], strlen(bad[i]));
    /* our own announcements: what the broker granted us is what counts */
    ev(c, "take", "mine", "alpha", 1, "");
    l = cl_list(c);
    assert_null(l[0]);
    g_strfreev(l);
}

static void test_probe_removes_and_sorted(void **state)
{
    claims *c = *state;
    char **l;
    ev(c, "take", "c", "beta", 1, "");
    ev(c, "take", "a", "beta", 1, "");
    ev(c, "take", "b", "gamma", 1, "");
    l = cl_list(c);
    assert_string_equal(l[0], "a");
    assert_string_equal(l[1], "b");
    assert_string_equal(l[2], "c");
    assert_null(l[3]);
    g_strfreev(l);
    cl_probed(c, "b", 1);
    assert_true(cl_known(c, "b"));
    cl_probed(c, "b", 0);
    assert_false(cl_known(c, "b"));
    /* a probe of a name nobody here asked about adds nothing */
    cl_probed(c, "zz", 1);
    assert_false(cl_known(c, "zz"));
}

static void test_names_and_no_connection(void **state)
{
    claims *c = *state;
    char why[256], long_name[80];
    const char *bad[] = {"", "Deploy", "-x", ".x", "a b", "a/b", long_name};
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        assert_int_equal(cl_take(c, bad[i], NULL, NULL, why, sizeof why), EINVAL);
    long_name[63] = '\0';
    /* valid, but the claims thread is not connected: never a grant */
    assert_int_equal(cl_take(c, long_name, NULL, NULL, why, sizeof why), ENOTCONN);
    assert_int_equal(cl_take(c, "deploy", NULL, NULL, why, sizeof why), ENOTCONN);
    assert_false(cl_known(c, "deploy"));
}

/* 10 000 names: added and listed without quadratic work (a listing
 * copies and sorts once) */
static void test_many(void **state)
{
    claims *c = *state;
    char name[32], **l;
    gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < 10000; i++) {
        snprintf(name, sizeof name, "n%05d", i);
        ev(c, "take", name, "beta", 1, "");
    }
    l = cl_list(c);
    assert_int_equal(g_strv_length(l), 10000);
    assert_string_equal(l[0], "n00000");
    assert_string_equal(l[9999], "n09999");
    g_strfreev(l);
    assert_true(g_get_monotonic_time() - t0 < 10 * G_USEC_PER_SEC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_take_note_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_removes_and_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_and_no_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
