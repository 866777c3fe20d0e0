/* SPDX-License-Identifier: Apache-2.0 */
/* test_names.c — lead names, agent names, gids, groups, addresses and
 * strict UTF-8: the gates every external string passes. Cases are chosen at
 * the edges of each rule, and hostile ones (two '@', empty parts, case,
 * length, NUL, non-ASCII). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "fleetfs/wire/names.h"

static void test_name_valid_accepts(void **state)
{
    (void)state;
    assert_true(name_valid("a"));
    assert_true(name_valid("0"));
    assert_true(name_valid("mac"));
    assert_true(name_valid("fleet01"));
    assert_true(name_valid("a_b-c"));
    assert_true(name_valid("a-"));
    assert_true(name_valid("9_"));
    /* 63 characters: the maximum */
    assert_true(name_valid("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"));
}

static void test_name_valid_rejects(void **state)
{
    (void)state;
    assert_false(name_valid(NULL));
    assert_false(name_valid(""));
    assert_false(name_valid("-a"));
    assert_false(name_valid("_a"));
    assert_false(name_valid("Mac"));
    assert_false(name_valid("a.b"));
    assert_false(name_valid("a/b"));
    assert_false(name_valid(".."));
    assert_false(name_valid("."));
    assert_false(name_valid("a b"));
    assert_false(name_valid("a\n"));
    assert_false(name_valid("caf\xc3\xa9"));
    /* 64 characters: one too many */
    assert_false(name_valid("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"));
}

static bool u8(const char *s)
{
    return text_utf8_valid(s, strlen(s));
}

static void test_utf8_accepts(void **state)
{
    (void)state;
    assert_true(text_utf8_valid("", 0));
    assert_true(text_utf8_valid(NULL, 0));
    assert_true(u8("hello, world\n\t"));
    assert_true(u8("caf\xc3\xa9"));      /* U+00E9 */
    assert_true(u8("\xc2\x80"));         /* U+0080, smallest 2-byte */
    assert_true(u8("\xdf\xbf"));         /* U+07FF */
    assert_true(u8("\xe0\xa0\x80"));     /* U+0800, smallest 3-byte */
    assert_true(u8("\xed\x9f\xbf"));     /* U+D7FF, just below surrogates */
    assert_true(u8("\xee\x80\x80"));     /* U+E000, just above */
    assert_true(u8("\xef\xbf\xbf"));     /* U+FFFF */
    assert_true(u8("\xf0\x90\x80\x80")); /* U+10000 */
    assert_true(u8("\xf0\x9f\x98\x80")); /* emoji */
    assert_true(u8("\xf4\x8f\xbf\xbf")); /* U+10FFFF, the last */
}

static void test_utf8_rejects(void **state)
{
    (void)state;
    assert_false(text_utf8_valid("a\0b", 3)); /* embedded NUL */
    assert_false(text_utf8_valid("\0", 1));
    assert_false(u8("\x80")); /* lone continuation */
    assert_false(u8("\xbf"));
    assert_false(u8("\xc0\x80"));     /* overlong NUL */
    assert_false(u8("\xc1\xbf"));     /* overlong 2-byte */
    assert_false(u8("\xe0\x80\x80")); /* overlong 3-byte */
    assert_false(u8("\xe0\x9f\xbf"));
    assert_false(u8("\xf0\x80\x80\x80")); /* overlong 4-byte */
    assert_false(u8("\xf0\x8f\xbf\xbf"));
    assert_false(u8("\xed\xa0\x80"));     /* U+D800 */
    assert_false(u8("\xed\xbf\xbf"));     /* U+DFFF */
    assert_false(u8("\xf4\x90\x80\x80")); /* U+110000 */
    assert_false(u8("\xf5\x80\x80\x80"));
    assert_false(u8("\xff"));
    assert_false(u8("\xfe"));
    assert_false(u8("\xc3")); /* truncated */
    assert_false(u8("\xe2\x82"));
    assert_false(u8("\xf0\x9f\x98"));
    assert_false(u8("\xc3\x28")); /* bad continuation */
    assert_false(u8("\xe2\x28\xa1"));
    assert_false(u8("ok\xe2\x82\x28"));
    /* a valid sequence cut by the length argument */
    assert_false(text_utf8_valid("\xc3\xa9", 1));
}

/* ---- SPEC section 10: agent names, gids, groups, addresses ---- */

#define A32 "abcdefghijklmnopqrstuvwxyz012345"
#define C63 "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"

static void test_agent_name(void **state)
{
    (void)state;
    assert_true(agent_name_valid("w"));
    assert_true(agent_name_valid("w1"));
    assert_true(agent_name_valid("build-bot_2"));
    assert_true(agent_name_valid("w-"));
    assert_true(agent_name_valid(A32)); /* 32: the maximum */
    assert_false(agent_name_valid(A32 "6"));
    assert_false(agent_name_valid(NULL));
    assert_false(agent_name_valid(""));
    assert_false(agent_name_valid("1w")); /* a letter first, unlike a coord_id */
    assert_false(agent_name_valid("-w"));
    assert_false(agent_name_valid("_w"));
    assert_false(agent_name_valid("W1"));
    assert_false(agent_name_valid("w.1"));
    assert_false(agent_name_valid("w@a"));
    assert_false(agent_name_valid("w 1"));
    assert_false(agent_name_valid("w\xc3\xa9"));
}

static void test_gid(void **state)
{
    (void)state;
    assert_true(gid_valid("w1@alpha"));
    assert_true(gid_valid("w@0"));
    assert_true(gid_valid(A32 "@" C63)); /* 96 bytes: the longest */
    assert_false(gid_valid(A32 "6@alpha"));
    assert_false(gid_valid("w1@" C63 "x"));
    assert_false(gid_valid(NULL));
    assert_false(gid_valid(""));
    assert_false(gid_valid("@"));
    assert_false(gid_valid("w1"));    /* a coord_id is not a gid */
    assert_false(gid_valid("alpha")); /* nor is a lead */
    assert_false(gid_valid("@alpha"));
    assert_false(gid_valid("w1@"));
    assert_false(gid_valid("w1@alpha@beta"));
    assert_false(gid_valid("w1@@alpha"));
    assert_false(gid_valid("W1@alpha"));
    assert_false(gid_valid("w1@Alpha"));
    assert_false(gid_valid("1w@alpha"));
    assert_false(gid_valid("w1@-alpha"));
    assert_false(gid_valid("w1@al pha"));
    assert_false(gid_valid("w1@alpha\n"));
    assert_false(gid_valid("w\xc3\xa9@alpha"));
    assert_false(gid_valid("w1@alph\xc3\xa9"));
    assert_false(gid_valid("group:w1@alpha"));
    /* a NUL ends the C string: what follows it is not part of the id */
    assert_false(gid_valid("w1\0@alpha"));
}

static void test_group(void **state)
{
    (void)state;
    assert_true(group_valid("all"));
    assert_true(group_valid("build"));
    assert_true(group_valid("0team_a-b"));
    assert_true(group_valid(C63));
    assert_false(group_valid(C63 "x"));
    assert_false(group_valid(NULL));
    assert_false(group_valid(""));
    assert_false(group_valid("Build"));
    assert_false(group_valid("-b"));
    assert_false(group_valid("a.b")); /* a '.' would add a routing-key word */
    assert_false(group_valid("a*"));
    assert_false(group_valid("a#"));
    assert_false(group_valid("w1@alpha"));
    assert_false(group_valid("group:a"));
}

static void test_id_host(void **state)
{
    char h[NAME_MAX_LEN + 1];

    (void)state;
    assert_true(id_valid("alpha"));
    assert_true(id_valid("w1@alpha"));
    assert_false(id_valid("group:all"));
    assert_false(id_valid("w1@alpha@beta"));
    assert_true(id_host("alpha", h));
    assert_string_equal(h, "alpha");
    assert_true(id_host("w1@beta", h));
    assert_string_equal(h, "beta");
    assert_true(id_host(A32 "@" C63, h));
    assert_string_equal(h, C63);
    strcpy(h, "junk");
    assert_false(id_host("w1@beta@gamma", h));
    assert_string_equal(h, "");
    assert_false(id_host("w1@", h));
    assert_false(id_host("@beta", h));
    assert_false(id_host("", h));
    assert_false(id_host(NULL, h));
    assert_false(id_host("group:all", h));
    assert_false(id_host("W1@beta", h));
    assert_false(id_host("w1@b\xc3\xa9ta", h));
}

static void test_addr_parse(void **state)
{
    addr a;

    (void)state;
    assert_true(addr_parse("alpha", &a));
    assert_int_equal(a.kind, ADDR_LEAD);
    assert_string_equal(a.name, "alpha");
    assert_string_equal(a.host, "alpha");
    assert_true(addr_parse("w1@beta", &a));
    assert_int_equal(a.kind, ADDR_AGENT);
    assert_string_equal(a.name, "w1");
    assert_string_equal(a.host, "beta");
    assert_true(addr_parse("group:build", &a));
    assert_int_equal(a.kind, ADDR_GROUP);
    assert_string_equal(a.name, "build");
    assert_string_equal(a.host, "");
    assert_true(addr_parse("group:all", &a));
    assert_int_equal(a.kind, ADDR_GROUP);
    assert_string_equal(a.name, "all");
    assert_true(addr_parse("group:" C63, &a));
    assert_string_equal(a.name, C63);

    a.kind = ADDR_GROUP;
    strcpy(a.name, "junk");
    assert_false(addr_parse("group:", &a));
    assert_string_equal(a.name, "");
    assert_false(addr_parse("group:" C63 "x", &a));
    assert_false(addr_parse(NULL, &a));
    assert_false(addr_parse("", &a));
    assert_false(addr_parse("group", &a) && a.kind == ADDR_GROUP); /* a lead named group */
    assert_false(addr_parse("group:Build", &a));
    assert_false(addr_parse("group:a b", &a));
    assert_false(addr_parse("group:group:a", &a));
    assert_false(addr_parse("group:w1@alpha", &a));
    assert_false(addr_parse("Group:a", &a));
    assert_false(addr_parse("group: a", &a));
    assert_false(addr_parse("w1@alpha@beta", &a));
    assert_false(addr_parse("w1@", &a));
    assert_false(addr_parse("@alpha", &a));
    assert_false(addr_parse("ALPHA", &a));
    assert_false(addr_parse("alph\xc3\xa9", &a));
    assert_false(addr_parse("alpha/../x", &a));
    assert_false(addr_parse(C63 "x", &a));
}

/* SPEC section 10: a receiver takes a message only when its to names the
 * entity whose mailbox it arrived on, or a group that entity is in. */
static void test_addr_matches(void **state)
{
    const char *const build[] = {"build", "ops", NULL};
    const char *const none[] = {NULL};

    (void)state;
    assert_true(addr_matches("alpha", "alpha", build));
    assert_true(addr_matches("w1@alpha", "w1@alpha", NULL));
    assert_true(addr_matches("group:all", "alpha", NULL));
    assert_true(addr_matches("group:all", "w1@alpha", none));
    assert_true(addr_matches("group:ops", "w1@alpha", build));
    assert_false(addr_matches("group:review", "w1@alpha", build));
    assert_false(addr_matches("group:build", "alpha", none));
    assert_false(addr_matches("group:build", "alpha", NULL));
    assert_false(addr_matches("beta", "alpha", build));
    assert_false(addr_matches("w1@alpha", "alpha", build)); /* the lead is not its agent */
    assert_false(addr_matches("alpha", "w1@alpha", build)); /* nor the other way */
    assert_false(addr_matches("w2@alpha", "w1@alpha", build));
    assert_false(addr_matches("group:", "alpha", build));
    assert_false(addr_matches("group:Build", "alpha", (const char *const[]){"Build", NULL}));
    assert_false(addr_matches("ALPHA", "ALPHA", NULL)); /* not an address at all */
    assert_false(addr_matches(NULL, "alpha", NULL));
    assert_false(addr_matches("alpha", NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_valid_accepts),
        cmocka_unit_test(test_name_valid_rejects),
        cmocka_unit_test(test_utf8_accepts),
        cmocka_unit_test(test_utf8_rejects),
        cmocka_unit_test(test_agent_name),
        cmocka_unit_test(test_gid),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_id_host),
        cmocka_unit_test(test_addr_parse),
        cmocka_unit_test(test_addr_matches),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
