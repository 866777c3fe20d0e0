/* test_seen.c — the replay guard: membership, FIFO eviction at the cap,
 * survival across a reopen, compaction that keeps exactly the newest
 * entries, a damaged file that loads what it can, and concurrent adders.
 * A replay slipping through after a restart or a compaction is the failure
 * these tests exist to catch. */
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

static seen_set *open_ok(const char *path, size_t cap)
{
    char *err = NULL;
    seen_set *s = seen_open(path, cap, &err);

    if (s == NULL)
        fail_msg("seen_open: %s", err);
    return s;
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
    assert_int_equal(seen_count(s), 2);
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
    assert_int_equal(seen_count(s), 3);
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
    seen_set *s = open_ok(f->path, 100);
    char id[33];
    unsigned i;

    for (i = 0; i < 50; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
    }
    seen_close(s);
    s = open_ok(f->path, 100);
    assert_int_equal(seen_count(s), 50);
    for (i = 0; i < 50; i++) {
        id_of(id, i);
        assert_true(seen_contains(s, id));
        assert_int_equal(seen_add(s, id), 1);
    }
    assert_int_equal(file_lines(f->path), 50);
    seen_close(s);

    /* Reopened with a smaller cap: the newest survive. */
    s = open_ok(f->path, 10);
    assert_int_equal(seen_count(s), 10);
    for (i = 0; i < 50; i++) {
        id_of(id, i);
        assert_int_equal(seen_contains(s, id), i >= 40);
    }
    /* 50 lines >= 2 x 10: compacted on open. */
    assert_int_equal(file_lines(f->path), 10);
    seen_close(s);
}

static void test_compaction_keeps_newest(void **state)
{
    struct fx *f = *state;
    char *tmp = g_strdup_printf("%s.tmp", f->path), *text = NULL;
    seen_set *s = open_ok(f->path, 3);
    char id[33], want[200] = "";
    unsigned i;

    for (i = 1; i <= 5; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
    }
    assert_int_equal(file_lines(f->path), 5);
    id_of(id, 6);
    assert_int_equal(seen_add(s, id), 0);
    /* 6 = 2 x cap lines: rewritten to the newest three, oldest first. */
    for (i = 4; i <= 6; i++) {
        id_of(id, i);
        strcat(want, id);
        strcat(want, "\n");
    }
    assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
    assert_string_equal(text, want);
    g_free(text);
    assert_false(g_file_test(tmp, G_FILE_TEST_EXISTS));

    /* Appends continue on the new file (the old fd must not be used). */
    id_of(id, 7);
    assert_int_equal(seen_add(s, id), 0);
    assert_int_equal(file_lines(f->path), 4);
    for (i = 8; i <= 40; i++) {
        id_of(id, i);
        assert_int_equal(seen_add(s, id), 0);
        assert_true(file_lines(f->path) < 6);
    }
    seen_close(s);
    s = open_ok(f->path, 3);
    for (i = 1; i <= 40; i++) {
        id_of(id, i);
        assert_int_equal(seen_contains(s, id), i >= 38);
    }
    seen_close(s);
    g_free(tmp);
}

static void test_corrupt_lines_skipped(void **state)
{
    struct fx *f = *state;
    GString *g = g_string_new("good1\n\n   \nbad id\n\x01\x1b[31m\n");
    seen_set *s;
    char *text = NULL;
    size_t i, len = 0;

    for (i = 0; i < 100000; i++)
        g_string_append_c(g, 'x'); /* far over SEEN_ID_MAX */
    g_string_append(g, "\ngood2\ncaf\xc3\xa9\n");
    g_string_append_len(g, "nul\0byte\n", 9);
    g_string_append(g, "torn");
    assert_true(g_file_set_contents(f->path, g->str, (gssize)g->len, NULL));
    g_string_free(g, TRUE);

    s = open_ok(f->path, 100);
    assert_true(seen_contains(s, "good1"));
    assert_true(seen_contains(s, "good2"));
    assert_false(seen_contains(s, "bad id"));
    assert_false(seen_contains(s, "torn"));
    assert_false(seen_contains(s, "nul"));
    assert_int_equal(seen_count(s), 2);
    assert_int_equal(seen_add(s, "new"), 0);
    seen_close(s);

    /* The torn line was closed off: "new" is its own line, not "tornnew". */
    assert_true(g_file_get_contents(f->path, &text, &len, NULL));
    assert_true(len > 11);
    assert_memory_equal(text + len - 11, "\ntorn \nnew\n", 11);
    g_free(text);
    s = open_ok(f->path, 100);
    assert_true(seen_contains(s, "new"));
    assert_false(seen_contains(s, "tornnew"));
    assert_false(seen_contains(s, "torn"));
    assert_int_equal(seen_count(s), 3);
    seen_close(s);
}

static void test_open_errors(void **state)
{
    struct fx *f = *state;
    char *err = NULL, *p = g_build_filename(f->dir, "no", "such", NULL);

    assert_null(seen_open(f->path, 0, &err));
    assert_non_null(err);
    g_free(err);
    err = NULL;
    assert_null(seen_open(p, 10, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, p));
    g_free(err);
    g_free(p);
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
    assert_int_equal(seen_count(s), 3000);
    for (i = 0; i < 4; i++) {
        for (j = 0; j < 2000; j++) {
            id_of(id, w[i].base + j);
            held[i * 2000 + j] = seen_contains(s, id);
        }
    }
    seen_close(s);
    assert_true(file_lines(f->path) < 6000);
    s = open_ok(f->path, 3000);
    assert_int_equal(seen_count(s), 3000);
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
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
