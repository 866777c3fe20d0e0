/* SPDX-License-Identifier: Apache-2.0 */
/* test_seen.c — the replay guard: membership, FIFO eviction at the cap,
 * survival across a reopen, compaction that keeps exactly the newest
 * entries, a damaged file that loads what it can, and concurrent adders;
 * then the states: each msgId's fate survives a reopen, each class evicts
 * only its own (a flood of refusals never pushes out a consumed msgId),
 * and a file from before states loads as legacy without demoting what a
 * later line recorded.  A replay slipping through after a restart, a
 * compaction or a flood is the failure these tests exist to catch. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fleetfs/store/seen.h"

struct fx {
    char *dir;
    char *path;
};

static int setup(void **state)
{
    struct fx *f = g_new0(struct fx, 1);

    f->dir = g_dir_make_tmp("fleetfs-seen-XXXXXX", NULL);
    assert_non_null(f->dir);
    f->path = g_build_filename(f->dir, "seen", NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char *tmp = g_strdup_printf("%s.tmp", f->path);

    g_remove(f->path);
    g_remove(tmp);
    g_rmdir(f->dir);
    g_free(tmp);
    g_free(f->path);
    g_free(f->dir);
    g_free(f);
    return 0;
}

static void id_of(char out[33], unsigned n)
{
    snprintf(out, 33, "%032x", n);
}

static seen_set *open_caps(const char *path, size_t delivered, size_t consumed, size_t refused)
{
    char *err = NULL;
    seen_caps caps = {delivered, consumed, refused};
    seen_set *s = seen_open(path, &caps, &err);

    if (s == NULL)
        fail_msg("seen_open: %s", err);
    return s;
}

/* The plain set of the first tests: ids recorded as delivered. */
static seen_set *open_ok(const char *path, size_t cap)
{
    return open_caps(path, cap, cap, cap);
}

static int seen_add(seen_set *s, const char *id)
{
    return seen_put(s, id, SEEN_DELIVERED, 0);
}

static bool seen_contains(seen_set *s, const char *id)
{
    return seen_get(s, id, NULL) != SEEN_NONE;
}

static size_t file_lines(const char *path)
{
    char *text = NULL;
    size_t n = 0, i, len = 0;

    assert_true(g_file_get_contents(path, &text, &len, NULL));
    for (i = 0; i < len; i++)
        n += text[i] == '\n';
    g_free(text);
    return n;
}

static void test_add_contains(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_ok(f->path, 8);
    char big[SEEN_ID_MAX + 2];
    struct stat st;

    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_false(seen_contains(s, "a"));
    assert_int_equal(seen_add(s, "a"), 0);
    assert_int_equal(seen_add(s, "b"), 0);
    assert_true(seen_contains(s, "a"));
    assert_true(seen_contains(s, "b"));
    assert_false(seen_contains(s, "c"));
    assert_false(seen_contains(s, NULL));
    assert_int_equal(seen_add(s, "a"), 1);
    assert_int_equal(seen_count(s, SEEN_NONE), 2);
    assert_int_equal(file_lines(f->path), 2);

    /* Not ids: refused, never half-written into the file. */
    errno = 0;
    assert_int_equal(seen_add(s, ""), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(seen_add(s, NULL), -1);
    assert_int_equal(seen_add(s, "two words"), -1);
    assert_int_equal(seen_add(s, "line\nbreak"), -1);
    assert_int_equal(seen_add(s, "esc\x1b[0m"), -1);
    assert_int_equal(seen_add(s, "caf\xc3\xa9"), -1);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(seen_add(s, big), -1);
    big[SEEN_ID_MAX] = '\0';
    assert_int_equal(seen_add(s, big), 0);
    assert_int_equal(file_lines(f->path), 3);
    seen_close(s);
    seen_close(NULL);
}

static void test_fifo_eviction(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_ok(f->path, 3);
    char id[33];
    unsigned i;

    for (i = 1; i <= 5; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
    }
    assert_int_equal(seen_count(s, SEEN_NONE), 3);
    for (i = 1; i <= 5; i++) {
        id_of(id, i);
        assert_int_equal(seen_contains(s, id), i >= 3);
    }
    /* A duplicate does not refresh its age: FIFO, not LRU. */
    id_of(id, 3);
    assert_int_equal(seen_add(s, id), 1);
    id_of(id, 6);
    assert_int_equal(seen_add(s, id), 0);
    id_of(id, 3);
    assert_false(seen_contains(s, id));
    id_of(id, 4);
    assert_true(seen_contains(s, id));
    seen_close(s);
}

static void test_persists_across_reopen(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_ok(f->path, 200);
    char id[33];
    unsigned i;

    for (i = 0; i < 100; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
    }
    seen_close(s);
    s = open_ok(f->path, 200);
    assert_int_equal(seen_count(s, SEEN_NONE), 100);
    for (i = 0; i < 100; i++) {
        id_of(id, i);
        assert_true(seen_contains(s, id));
        assert_int_equal(seen_add(s, id), 1);
    }
    assert_int_equal(file_lines(f->path), 100);
    seen_close(s);

    /* Reopened with a smaller cap: the newest survive. */
    s = open_ok(f->path, 20);
    assert_int_equal(seen_count(s, SEEN_NONE), 20);
    for (i = 0; i < 100; i++) {
        id_of(id, i);
        assert_int_equal(seen_contains(s, id), i >= 80);
    }
    /* 100 lines >= 2 x 20 live (and over 64): compacted on open. */
    assert_int_equal(file_lines(f->path), 20);
    seen_close(s);
}

static void test_compaction_keeps_newest(void **state)
{
    struct fx *f = *state;
    char *tmp = g_strdup_printf("%s.tmp", f->path), *text = NULL;
    seen_set *s = open_ok(f->path, 40);
    char id[33];
    GString *want = g_string_new(NULL);
    unsigned i;

    for (i = 1; i <= 79; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
    }
    assert_int_equal(file_lines(f->path), 79);
    id_of(id, 80);
    assert_int_equal(seen_add(s, id), 0);
    /* 80 = 2 x 40 live lines: rewritten to the newest 40, oldest first. */
    for (i = 41; i <= 80; i++) {
        id_of(id, i);
        g_string_append_printf(want, "d %s\n", id);
    }
    assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
    assert_string_equal(text, want->str);
    g_free(text);
    g_string_free(want, TRUE);
    assert_false(g_file_test(tmp, G_FILE_TEST_EXISTS));

    /* Appends continue on the new file (the old fd must not be used). */
    id_of(id, 81);
    assert_int_equal(seen_add(s, id), 0);
    assert_int_equal(file_lines(f->path), 41);
    for (i = 82; i <= 400; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
        assert_true(file_lines(f->path) < 80);
    }
    seen_close(s);
    s = open_ok(f->path, 40);
    for (i = 1; i <= 400; i++) {
        id_of(id, i);
        assert_int_equal(seen_contains(s, id), i >= 361);
    }
    seen_close(s);
    g_free(tmp);
}

static void test_corrupt_lines_skipped(void **state)
{
    struct fx *f = *state;
    GString *g = g_string_new("d good1\n\n   \nbad id\nd \x01\x1b[31m\nx abc\nc \nc  two\n");
    seen_set *s;
    char *text = NULL;
    size_t i, len = 0;

    for (i = 0; i < 100000; i++)
        g_string_append_c(g, 'x'); /* far over SEEN_ID_MAX */
    g_string_append(g, "\nc good2\nd caf\xc3\xa9\n");
    g_string_append_len(g, "d nul\0byte\n", 11);
    g_string_append(g, "d torn");
    assert_true(g_file_set_contents(f->path, g->str, (gssize)g->len, NULL));
    g_string_free(g, TRUE);

    s = open_ok(f->path, 100);
    assert_int_equal(seen_get(s, "good1", NULL), SEEN_DELIVERED);
    assert_int_equal(seen_get(s, "good2", NULL), SEEN_CONSUMED);
    assert_false(seen_contains(s, "bad id"));
    assert_false(seen_contains(s, "abc"));
    assert_false(seen_contains(s, "torn"));
    assert_false(seen_contains(s, "nul"));
    assert_int_equal(seen_count(s, SEEN_NONE), 2);
    assert_int_equal(seen_add(s, "new"), 0);
    seen_close(s);

    /* The torn line was closed off: "new" is its own line, not "tornnew". */
    assert_true(g_file_get_contents(f->path, &text, &len, NULL));
    assert_true(len > 15);
    assert_memory_equal(text + len - 15, "\nd torn \nd new\n", 15);
    g_free(text);
    s = open_ok(f->path, 100);
    assert_true(seen_contains(s, "new"));
    assert_false(seen_contains(s, "tornnew"));
    assert_false(seen_contains(s, "torn"));
    assert_int_equal(seen_count(s, SEEN_NONE), 3);
    seen_close(s);
}

static void test_open_errors(void **state)
{
    struct fx *f = *state;
    char *err = NULL, *p = g_build_filename(f->dir, "no", "such", NULL);

    seen_caps none = {0, 0, 0}, ten = {10, 10, 10};

    assert_null(seen_open(f->path, &none, &err));
    assert_non_null(err);
    g_free(err);
    err = NULL;
    assert_null(seen_open(p, &ten, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, p));
    g_free(err);
    g_free(p);
}

/* Each msgId's fate, its mark, and what a reopen keeps of them. */
static void test_states_persist(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_caps(f->path, 10, 10, 10);
    uint64_t mark = 99;
    char *text = NULL;

    assert_int_equal(seen_get(s, "a", &mark), SEEN_NONE);
    assert_int_equal(mark, 0);
    assert_int_equal(seen_put(s, "a", SEEN_DELIVERED, 0), 0);
    assert_int_equal(seen_put(s, "b", SEEN_DELIVERED, 0), 0);
    assert_int_equal(seen_put(s, "c", SEEN_REFUSED, 0), 0);
    /* consumed, acked on consumer generation 7 (a mark, memory only) */
    assert_int_equal(seen_put(s, "a", SEEN_CONSUMED, 7), 0);
    assert_int_equal(seen_get(s, "a", &mark), SEEN_CONSUMED);
    assert_int_equal(mark, 7);
    /* the same state again: only the mark changes, nothing is written */
    assert_int_equal(seen_put(s, "a", SEEN_CONSUMED, 8), 1);
    assert_int_equal(seen_get(s, "a", &mark), SEEN_CONSUMED);
    assert_int_equal(mark, 8);
    assert_int_equal(file_lines(f->path), 4);
    assert_int_equal(seen_count(s, SEEN_CONSUMED), 1);
    assert_int_equal(seen_count(s, SEEN_DELIVERED), 1);
    assert_int_equal(seen_count(s, SEEN_REFUSED), 1);
    /* nothing is put as "none" or "legacy" */
    errno = 0;
    assert_int_equal(seen_put(s, "d", SEEN_NONE, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(seen_put(s, "d", SEEN_LEGACY, 0), -1);
    seen_close(s);

    assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
    assert_string_equal(text, "d a\nd b\nr c\nc a\n");
    g_free(text);
    s = open_caps(f->path, 10, 10, 10);
    assert_int_equal(seen_get(s, "a", &mark), SEEN_CONSUMED);
    assert_int_equal(mark, 0); /* marks are not kept across a restart */
    assert_int_equal(seen_get(s, "b", NULL), SEEN_DELIVERED);
    assert_int_equal(seen_get(s, "c", NULL), SEEN_REFUSED);
    assert_string_equal(seen_state_name(SEEN_CONSUMED), "consumed");
    seen_close(s);
}

/* Each class forgets only its own oldest: a flood of refused (or merely
 * delivered) msgIds never evicts a consumed one, across a reopen too. */
static void test_classes_evict_their_own(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_caps(f->path, 5, 3, 5);
    char id[33];
    unsigned i;

    for (i = 1; i <= 3; i++) {
        id_of(id, i);
        assert_int_equal(seen_put(s, id, SEEN_CONSUMED, 0), 0);
    }
    for (i = 100; i < 1100; i++) {
        id_of(id, i);
        assert_int_equal(seen_put(s, id, i % 2 ? SEEN_REFUSED : SEEN_DELIVERED, 0), 0);
    }
    for (int round = 0; round < 2; round++) {
        for (i = 1; i <= 3; i++) {
            id_of(id, i);
            assert_int_equal(seen_get(s, id, NULL), SEEN_CONSUMED);
        }
        assert_int_equal(seen_count(s, SEEN_REFUSED), 5);
        assert_int_equal(seen_count(s, SEEN_DELIVERED), 5);
        assert_int_equal(seen_count(s, SEEN_NONE), 13);
        seen_close(s);
        s = open_caps(f->path, 5, 3, 5);
    }
    /* a fourth consumed one pushes out the oldest consumed, only */
    id_of(id, 4);
    assert_int_equal(seen_put(s, id, SEEN_CONSUMED, 0), 0);
    id_of(id, 1);
    assert_int_equal(seen_get(s, id, NULL), SEEN_NONE);
    id_of(id, 2);
    assert_int_equal(seen_get(s, id, NULL), SEEN_CONSUMED);
    /* moving a delivered id to consumed frees its delivered slot */
    id_of(id, 1098);
    assert_int_equal(seen_get(s, id, NULL), SEEN_DELIVERED);
    assert_int_equal(seen_put(s, id, SEEN_CONSUMED, 0), 0);
    assert_int_equal(seen_count(s, SEEN_DELIVERED), 4);
    assert_int_equal(seen_count(s, SEEN_CONSUMED), 3);
    seen_close(s);
}

/* seen_full says when the next new id of a class would push one out,
 * and whose mark that one carries (its oldest); a class with room, or
 * with cap 0, is not full; marks are memory only (0 after a reopen). */
static void test_full_names_the_oldest(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_caps(f->path, 2, 0, 3);
    uint64_t mark = 99;

    assert_false(seen_full(s, SEEN_REFUSED, &mark));
    assert_int_equal(mark, 0);
    assert_int_equal(seen_put(s, "r1", SEEN_REFUSED, 11), 0);
    assert_int_equal(seen_put(s, "r2", SEEN_REFUSED, 12), 0);
    assert_false(seen_full(s, SEEN_REFUSED, NULL));
    assert_int_equal(seen_put(s, "r3", SEEN_REFUSED, 13), 0);
    assert_true(seen_full(s, SEEN_REFUSED, &mark));
    assert_int_equal(mark, 11);
    /* a delivered id does not fill the refused class */
    assert_int_equal(seen_put(s, "d1", SEEN_DELIVERED, 21), 0);
    assert_false(seen_full(s, SEEN_DELIVERED, NULL));
    assert_false(seen_full(s, SEEN_CONSUMED, NULL));
    assert_false(seen_full(s, SEEN_NONE, NULL));
    /* what goes next is the oldest: r1; then r2 is the oldest */
    assert_int_equal(seen_put(s, "r4", SEEN_REFUSED, 14), 0);
    assert_int_equal(seen_get(s, "r1", NULL), SEEN_NONE);
    assert_true(seen_full(s, SEEN_REFUSED, &mark));
    assert_int_equal(mark, 12);
    seen_close(s);
    s = open_caps(f->path, 2, 0, 3);
    assert_true(seen_full(s, SEEN_REFUSED, &mark));
    assert_int_equal(mark, 0);
    seen_close(s);
}

/* A class with cap 0 takes nothing: the receipts' set has only one. */
static void test_class_without_room(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_caps(f->path, 0, 4, 0);

    errno = 0;
    assert_int_equal(seen_put(s, "a", SEEN_DELIVERED, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(seen_put(s, "a", SEEN_REFUSED, 0), -1);
    assert_int_equal(seen_put(s, "a", SEEN_CONSUMED, 0), 0);
    assert_int_equal(seen_count(s, SEEN_NONE), 1);
    seen_close(s);
}

/* A seen file written before states (one bare msgId a line) loads as
 * legacy: known, fate unknown.  A later record wins over a bare line, a
 * bare line never demotes one, and a compaction keeps legacy ids bare. */
static void test_legacy_file(void **state)
{
    struct fx *f = *state;
    GString *g = g_string_new(NULL);
    seen_set *s;
    char id[33], *text = NULL;
    unsigned i;

    for (i = 0; i < 40; i++) {
        id_of(id, i);
        g_string_append_printf(g, "%s\n", id);
    }
    id_of(id, 1);
    g_string_append_printf(g, "c %s\n%s\n", id, id);
    assert_true(g_file_set_contents(f->path, g->str, (gssize)g->len, NULL));
    g_string_free(g, TRUE);

    s = open_caps(f->path, 100, 100, 10);
    id_of(id, 0);
    assert_int_equal(seen_get(s, id, NULL), SEEN_LEGACY);
    id_of(id, 1);
    assert_int_equal(seen_get(s, id, NULL), SEEN_CONSUMED);
    assert_int_equal(seen_count(s, SEEN_LEGACY), 39);
    /* legacy ids move on like any other */
    id_of(id, 2);
    assert_int_equal(seen_put(s, id, SEEN_DELIVERED, 0), 0);
    assert_int_equal(seen_put(s, id, SEEN_CONSUMED, 0), 0);
    for (i = 100; i < 200; i++) {
        id_of(id, i);
        assert_int_equal(seen_put(s, id, SEEN_REFUSED, 0), 0);
    }
    seen_close(s);
    /* 142 lines for 50 live: compacted along the way; legacy ids stay
     * bare lines */
    assert_true(file_lines(f->path) < 100);
    assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
    id_of(id, 3);
    assert_non_null(strstr(text, id));
    assert_null(strstr(text, "d 00000000000000000000000000000003"));
    g_free(text);
    s = open_caps(f->path, 100, 100, 10);
    assert_int_equal(seen_get(s, id, NULL), SEEN_LEGACY);
    id_of(id, 2);
    assert_int_equal(seen_get(s, id, NULL), SEEN_CONSUMED);
    assert_int_equal(seen_count(s, SEEN_LEGACY), 38);
    seen_close(s);
}

struct worker {
    seen_set *s;
    unsigned base;
};

static gpointer adder(gpointer data)
{
    struct worker *w = data;
    char id[33];
    unsigned i;

    for (i = 0; i < 2000; i++) {
        id_of(id, w->base + i);
        /* No contains check here: the other threads may legitimately
		 * evict this id before we look, if we are descheduled. */
        if (seen_add(w->s, id) != 0)
            return GINT_TO_POINTER(1);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct fx *f = *state;
    seen_set *s = open_ok(f->path, 3000);
    static bool held[8000];
    struct worker w[4];
    GThread *t[4];
    char id[33];
    unsigned i, j;

    for (i = 0; i < 4; i++) {
        w[i].s = s;
        w[i].base = i * 100000;
        t[i] = g_thread_new("adder", adder, &w[i]);
    }
    for (i = 0; i < 4; i++)
        assert_null(g_thread_join(t[i]));
    /* 8000 adds through a cap of 3000: compacted along the way, and what
	 * a reopen loads is exactly what memory held. */
    assert_int_equal(seen_count(s, SEEN_NONE), 3000);
    for (i = 0; i < 4; i++) {
        for (j = 0; j < 2000; j++) {
            id_of(id, w[i].base + j);
            held[i * 2000 + j] = seen_contains(s, id);
        }
    }
    seen_close(s);
    assert_true(file_lines(f->path) < 6000);
    s = open_ok(f->path, 3000);
    assert_int_equal(seen_count(s, SEEN_NONE), 3000);
    for (i = 0; i < 4; i++) {
        for (j = 0; j < 2000; j++) {
            id_of(id, w[i].base + j);
            assert_int_equal(seen_contains(s, id), held[i * 2000 + j]);
        }
    }
    seen_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_contains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_eviction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persists_across_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_keeps_newest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_lines_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_states_persist, setup, teardown),
        cmocka_unit_test_setup_teardown(test_classes_evict_their_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_class_without_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_names_the_oldest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_file, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
