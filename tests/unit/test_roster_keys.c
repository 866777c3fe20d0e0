/* SPDX-License-Identifier: Apache-2.0 */
/* test_roster_keys.c — the routing and binding keys of fleet_view=groups
 * (doc/protocol.md section 11): one key per heartbeat carrying every group,
 * the old key for a host in no group, several keys only when the groups do
 * not fit 255 bytes, each key ending in the coord_id (old receivers read
 * only the last word), and the binding keys. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "broker/topology.h"

static void test_no_group_is_the_old_key(void **state)
{
    GPtrArray *k = topo_roster_keys("fleet02", (const char *const[]){NULL}, "beta");
    char old[256];
    (void)state;
    topo_roster_key("fleet02", "beta", old, sizeof old);
    assert_int_equal(k->len, 1);
    assert_string_equal(k->pdata[0], old);
    assert_string_equal(k->pdata[0], "roster.fleet02.beta");
    g_ptr_array_unref(k);
    k = topo_roster_keys("", NULL, "beta");
    assert_string_equal(k->pdata[0], "roster._.beta");
    g_ptr_array_unref(k);
}

static void test_groups_in_one_key(void **state)
{
    GPtrArray *k = topo_roster_keys("h", (const char *const[]){"build", "review", NULL}, "beta");
    (void)state;
    assert_int_equal(k->len, 1);
    assert_string_equal(k->pdata[0], "roster.h.g=build.g=review.beta");
    g_ptr_array_unref(k);
}

/* 16 groups of 63 characters cannot share one key: each key fits 255
 * bytes, the host word goes first, every group is in exactly one key and
 * every key ends with the coord_id. */
static void test_long_groups_split(void **state)
{
    char names[16][64], host[128];
    const char *groups[17];
    GPtrArray *k;
    size_t seen = 0;
    (void)state;
    for (int i = 0; i < 16; i++) {
        memset(names[i], 'a' + i, 63);
        names[i][63] = '\0';
        groups[i] = names[i];
    }
    groups[16] = NULL;
    memset(host, 'h', 127);
    host[127] = '\0';
    k = topo_roster_keys(host, groups, "beta");
    assert_true(k->len >= 5);
    for (guint i = 0; i < k->len; i++) {
        const char *key = k->pdata[i];
        assert_true(strlen(key) <= TOPO_ROSTER_KEY_MAX);
        assert_true(g_str_has_prefix(key, "roster._.g="));
        assert_true(g_str_has_suffix(key, ".beta"));
        for (int g = 0; g < 16; g++) {
            char w[80];
            snprintf(w, sizeof w, ".g=%s.", names[g]);
            if (strstr(key, w))
                seen++;
        }
    }
    assert_int_equal(seen, 16);
    g_ptr_array_unref(k);
}

static void test_bindings(void **state)
{
    char b[128];
    (void)state;
    topo_roster_bind_lead("beta", b, sizeof b);
    assert_string_equal(b, "roster.#.beta");
    topo_roster_bind_group("build", b, sizeof b);
    assert_string_equal(b, "roster.#.g=build.#");
    topo_roster_ask_key("beta", b, sizeof b);
    assert_string_equal(b, "ask.beta");
    /* a request never matches an old host's binding */
    assert_false(g_str_has_prefix(b, "roster."));
}

/* Which heartbeat carries the group words (doc/presence.md "Group
 * heartbeats"): forced ones, the first, every one when the group interval
 * is the interval, else the beat nearest to the last group beat plus the
 * group interval, never later than what the last group beat announced. */
static void test_group_beat_due(void **state)
{
    (void)state;
    /* the first, and forced ones (connect, ask, groups changed, leaving) */
    assert_true(topo_roster_group_due(0, -1, 0, 5000, 25000, false));
    assert_true(topo_roster_group_due(6000, 5000, 25000, 5000, 25000, true));
    /* group_rate=0 or a small group: every beat */
    assert_true(topo_roster_group_due(10000, 5000, 5000, 5000, 5000, false));
    assert_true(topo_roster_group_due(10000, 5000, 5000, 5000, 3000, false));
    /* every 25 s at 5 s: beats 5, 10, 15, 20 after the last are plain */
    for (int64_t t = 5000; t <= 20000; t += 5000)
        assert_false(topo_roster_group_due(100000 + t, 100000, 25000, 5000, 25000, false));
    assert_true(topo_roster_group_due(125000, 100000, 25000, 5000, 25000, false));
    /* the nearest beat: up to half an interval early, not more */
    assert_true(topo_roster_group_due(122500, 100000, 25000, 5000, 25000, false));
    assert_false(topo_roster_group_due(122499, 100000, 25000, 5000, 25000, false));
    /* whole seconds that are no multiple of the interval: 13 s at 5 s goes
     * at the beat 15 s after (nearest), never at 10 */
    assert_false(topo_roster_group_due(110000, 100000, 13000, 5000, 13000, false));
    assert_true(topo_roster_group_due(115000, 100000, 13000, 5000, 13000, false));
    /* the group interval grew since the last group beat: that one said 10 s,
     * and listeners judge by it, so the next goes 10 s after it */
    assert_true(topo_roster_group_due(110000, 100000, 10000, 5000, 25000, false));
    /* it shrank: the smaller one now */
    assert_true(topo_roster_group_due(110000, 100000, 25000, 5000, 10000, false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_group_is_the_old_key), cmocka_unit_test(test_groups_in_one_key),
        cmocka_unit_test(test_long_groups_split),       cmocka_unit_test(test_bindings),
        cmocka_unit_test(test_group_beat_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
