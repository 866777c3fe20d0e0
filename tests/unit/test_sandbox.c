/* SPDX-License-Identifier: Apache-2.0 */
/* test_sandbox.c — the spawn sandbox's command line (fleetfs/spawn/sandbox.h):
 * refused without a tool or an absolute directory; the hidden paths come
 * before the agent's directory and home are bound (a later bind would
 * otherwise be hidden again); a fresh environment that never carries the
 * daemon's broker URI; the agent's own command last, after "--".  What the
 * sandbox does when run is t1051's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <string.h>

#include "fleetfs/spawn/sandbox.h"

static const char *const cmd[] = {"/usr/bin/claude", "--model", "opus", NULL};

/* the index of the first argument equal to s at or after from; -1 none */
static int at(char **argv, const char *s, int from)
{
    for (int i = from; argv[i]; i++)
        if (!strcmp(argv[i], s))
            return i;
    return -1;
}

static void refused_without_tool_or_dir(void **state)
{
    sb_host h = {.tool = NULL, .mountpoint = "/fleet"};
    char why[200];

    (void)state;
    assert_null(sb_argv(&h, "w1@beta", "/srv/work", cmd, why, sizeof why));
    assert_non_null(strstr(why, "bwrap"));
    h.tool = "/usr/bin/bwrap";
    assert_null(sb_argv(&h, "w1@beta", "work", cmd, why, sizeof why));
    assert_non_null(strstr(why, "absolute"));
}

static void the_command_line(void **state)
{
    sb_host h = {.tool = "/usr/bin/bwrap",
                 .mountpoint = "/fleet",
                 .hide = {"/etc", NULL, "/nonexistent/key", "/dev/null"}};
    char why[200], **argv;
    int dash, bind_dir, tmpfs_mount, bind_home;

    (void)state;
    g_setenv("FLEET_BROKER_URI", "amqp://u:secret@broker/", TRUE);
    argv = sb_argv(&h, "w1@beta", "/srv/work/w1", cmd, why, sizeof why);
    assert_non_null(argv);
    assert_string_equal(argv[0], "/usr/bin/bwrap");
    assert_true(at(argv, "--die-with-parent", 1) > 0);
    assert_true(at(argv, "--unshare-pid", 1) > 0);
    assert_true(at(argv, "--clearenv", 1) > 0);
    dash = at(argv, "--", 1);
    assert_true(dash > 0);
    assert_string_equal(argv[dash + 1], "/usr/bin/claude");
    assert_string_equal(argv[dash + 3], "opus");
    assert_null(argv[dash + 4]);
    /* a directory is hidden with a tmpfs, a file with /dev/null, a missing
     * one not at all */
    assert_string_equal(argv[at(argv, "/etc", 1) - 1], "--tmpfs");
    assert_int_equal(at(argv, "/nonexistent/key", 1), -1);
    bind_dir = at(argv, "/srv/work/w1", 1);
    tmpfs_mount = at(argv, "/fleet", 1);
    bind_home = at(argv, "/fleet/agents/w1@beta", 1);
    assert_string_equal(argv[bind_dir - 1], "--bind");
    assert_string_equal(argv[tmpfs_mount - 1], "--tmpfs");
    assert_string_equal(argv[bind_home - 1], "--bind");
    assert_true(at(argv, "/etc", 1) < bind_dir && at(argv, "/dev/null", 1) < bind_dir);
    assert_true(tmpfs_mount < bind_home && bind_home < dash);
    for (int i = 0; i < dash; i++) {
        assert_null(strstr(argv[i], "secret"));
        assert_null(strstr(argv[i], "FLEET_BROKER"));
    }
    assert_string_equal(argv[at(argv, "FLEETFS_AGENT", 1) + 1], "w1@beta");
    assert_string_equal(argv[at(argv, "FLEET", 1) + 1], "/fleet");
    g_strfreev(argv);
    g_unsetenv("FLEET_BROKER_URI");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_without_tool_or_dir),
        cmocka_unit_test(the_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
