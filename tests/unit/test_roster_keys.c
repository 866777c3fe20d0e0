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
 * is the interval, else the first beat in a new slot of the wall clock
 * (slots a group interval long, shifted by the group's phase), so that a
 * group's members send theirs within the same interval. */
static void test_group_beat_due(void **state)
{
    (void)state;
    /* the first, and forced ones (connect, ask, groups changed, leaving) */
    assert_true(topo_roster_group_due(0, -1, 0, 5000, 25000, 0, false));
    assert_true(topo_roster_group_due(106000, 105000, 25000, 5000, 25000, 0, true));
    /* group_rate=0 or a small group: every beat */
    assert_true(topo_roster_group_due(110000, 105000, 5000, 5000, 5000, 0, false));
    assert_true(topo_roster_group_due(110000, 105000, 5000, 5000, 3000, 0, false));
    /* slots of 25 s (phase 0): the last at 101 s, in slot [100, 125); the
     * beats at 106, 111, 116, 121 s are plain, the one at 126 s a group one */
    for (int64_t t = 106000; t <= 121000; t += 5000)
        assert_false(topo_roster_group_due(t, 101000, 25000, 5000, 25000, 0, false));
    assert_true(topo_roster_group_due(126000, 101000, 25000, 5000, 25000, 0, false));
    /* members whose beats are 4 s apart in phase both go in the new slot,
     * within one interval of each other */
    assert_true(topo_roster_group_due(125000, 100000, 25000, 5000, 25000, 0, false));
    assert_true(topo_roster_group_due(129000, 104000, 25000, 5000, 25000, 0, false));
    assert_false(topo_roster_group_due(124000, 104000, 25000, 5000, 25000, 0, false));
    /* a phase shifts the slots: with 10 s of phase they start at 115, 140 s */
    assert_false(topo_roster_group_due(114000, 101000, 25000, 5000, 25000, 10000, false));
    assert_true(topo_roster_group_due(116000, 101000, 25000, 5000, 25000, 10000, false));
    assert_int_equal(topo_group_phase(NULL), 0);
    assert_int_equal(topo_group_phase(""), 5381);
    assert_int_equal(topo_group_phase("a"), 5381 * 33 + 'a');
    /* never longer apart than a group interval and an interval: a missed
     * beat, or a clock that jumped back */
    assert_true(topo_roster_group_due(131000, 101000, 25000, 5000, 25000, 0, false));
    assert_true(topo_roster_group_due(90000, 101000, 25000, 5000, 25000, 0, false));
    /* the group interval grew since the last group beat: that one said
     * 10 s, and listeners judge by it, so its slots count */
    assert_true(topo_roster_group_due(111000, 101000, 10000, 5000, 25000, 0, false));
    /* it shrank: the smaller one now */
    assert_true(topo_roster_group_due(111000, 101000, 25000, 5000, 10000, 0, false));
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
