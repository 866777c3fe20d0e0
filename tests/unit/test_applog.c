/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for fleetfs/store/applog.c: the one append-only log under history,
 * sent, the seen set, the injector's journal and the receipts outbox —
 * append, reload, torn and hostile lines, the crash-safe rewrite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fleetfs/store/applog.h"

static char *tmpfile_path(void)
{
    char *dir = g_dir_make_tmp("applog-XXXXXX", NULL);
    char *p = g_build_filename(dir, "log", NULL);
    g_free(dir);
    return p;
}

static char *slurp(const char *path)
{
    gchar *text = NULL;
    assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

static applog *open_ok(const char *path, applog_sync sync, GPtrArray **lines)
{
    char *err = NULL;
    applog *a = applog_open(path, sync, 100, lines, &err);
    assert_non_null(a);
    assert_null(err);
    return a;
}

static void test_append_and_reload(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    applog *a = open_ok(path, APPLOG_WRITE, &lines);
    (void)state;
    assert_int_equal(lines->len, 0);
    g_ptr_array_free(lines, TRUE);
    assert_int_equal(applog_append(a, "one"), 0);
    assert_int_equal(applog_append(a, "two"), 0);
    assert_int_equal(applog_lines(a), 2);
    applog_close(a);
    a = open_ok(path, APPLOG_FSYNC, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[0], "one");
    assert_string_equal(lines->pdata[1], "two");
    assert_int_equal(applog_append(a, "three"), 0);
    applog_close(a);
    char *text = slurp(path);
    assert_string_equal(text, "one\ntwo\nthree\n");
    g_free(text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    g_ptr_array_free(lines, TRUE);
    g_free(path);
}

static void test_torn_and_hostile_lines_are_skipped(void **state)
{
    char *path = tmpfile_path();
    GString *g = g_string_new("ok1\n\n");
    GPtrArray *lines;
    applog *a;
    (void)state;
    for (int i = 0; i < 5000; i++)
        g_string_append_c(g, 'x'); /* over max_line (100) */
    g_string_append(g, "\nok2\n");
    g_string_append_len(g, "nul\0byte\n", 9);
    g_string_append(g, "torn");
    assert_true(g_file_set_contents(path, g->str, (gssize)g->len, NULL));
    g_string_free(g, TRUE);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[0], "ok1");
    assert_string_equal(lines->pdata[1], "ok2");
    g_ptr_array_free(lines, TRUE);
    /* the torn line is closed off: "new" is its own line */
    assert_int_equal(applog_append(a, "new"), 0);
    applog_close(a);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_int_equal(lines->len, 4);
    assert_string_equal(lines->pdata[2], "torn ");
    assert_string_equal(lines->pdata[3], "new");
    g_ptr_array_free(lines, TRUE);
    applog_close(a);
    g_free(path);
}

/* How many rewrite leftovers (PATH.tmp*) lie beside path. */
static int tmp_files(const char *path)
{
    char *dir = g_path_get_dirname(path), *prefix = g_strconcat(path, ".tmp", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    int n = 0;
    while ((name = g_dir_read_name(d))) {
        char *p = g_build_filename(dir, name, NULL);
        n += g_str_has_prefix(p, prefix);
        g_free(p);
    }
    g_dir_close(d);
    g_free(prefix);
    g_free(dir);
    return n;
}

/* A rewrite never writes into a .tmp file someone else made (O_EXCL, a
 * fresh name), and a crash's leftovers are removed at the next open. */
static void test_rewrite_uses_a_fresh_tmp_file(void **state)
{
    char *path = tmpfile_path();
    char *planted = g_strconcat(path, ".tmp", NULL);
    char *left = g_strconcat(path, ".tmp.0badf00d", NULL);
    GPtrArray *lines;
    GString *all = g_string_new("one\n");
    applog *a;
    (void)state;
    /* another writer's file (or a link an attacker planted) */
    assert_true(g_file_set_contents(planted, "not ours\n", -1, NULL));
    a = open_ok(path, APPLOG_WRITE, &lines);
    g_ptr_array_free(lines, TRUE);
    assert_int_equal(tmp_files(path), 0); /* a leftover goes at open */
    assert_true(g_file_set_contents(planted, "not ours\n", -1, NULL));
    assert_true(g_file_set_contents(left, "a crash's\n", -1, NULL));
    assert_int_equal(applog_rewrite(a, all, 1), 0);
    char *text = slurp(planted);
    assert_string_equal(text, "not ours\n"); /* untouched */
    g_free(text);
    text = slurp(path);
    assert_string_equal(text, "one\n");
    g_free(text);
    applog_close(a);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_int_equal(tmp_files(path), 0);
    g_ptr_array_free(lines, TRUE);
    applog_close(a);
    g_string_free(all, TRUE);
    g_free(left);
    g_free(planted);
    g_free(path);
}

static void test_rewrite_bounds_the_file(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    applog *a = open_ok(path, APPLOG_WRITE, &lines);
    GString *live = g_string_new(NULL);
    (void)state;
    g_ptr_array_free(lines, TRUE);
    for (int i = 0; i < 200; i++) {
        char line[32];
        snprintf(line, sizeof line, "n%d", i);
        assert_int_equal(applog_append(a, line), 0);
        if (applog_wants_compact(a, 10)) {
            g_string_truncate(live, 0);
            for (int k = i - 9; k <= i; k++)
                g_string_append_printf(live, "n%d\n", k);
            assert_int_equal(applog_rewrite(a, live, 10), 0);
            assert_int_equal(applog_lines(a), 10);
        }
        assert_true(applog_lines(a) <= 65);
    }
    applog_close(a);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_true(lines->len <= 65);
    assert_string_equal(lines->pdata[lines->len - 1], "n199");
    assert_int_equal(tmp_files(path), 0);
    g_ptr_array_free(lines, TRUE);
    g_string_free(live, TRUE);
    applog_close(a);
    g_free(path);
}

static GString *render_last10(void *ud)
{
    int *n = ud;
    GString *s = g_string_new(NULL);
    for (int k = *n - 9; k <= *n; k++)
        g_string_append_printf(s, "m%d\n", k);
    return s;
}

static void test_add_rewrites_from_the_owner(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    applog *a = open_ok(path, APPLOG_WRITE, &lines);
    (void)state;
    g_ptr_array_free(lines, TRUE);
    for (int i = 0; i < 300; i++) {
        char line[32];
        snprintf(line, sizeof line, "m%d", i);
        assert_int_equal(applog_add(a, line, 10, render_last10, &i), 0);
        assert_true(applog_lines(a) <= 65);
    }
    applog_close(a);
    a = open_ok(path, APPLOG_WRITE, &lines);
    /* the newest line is in the file whether or not the last add rewrote it */
    assert_string_equal(lines->pdata[lines->len - 1], "m299");
    g_ptr_array_free(lines, TRUE);
    applog_close(a);
    g_free(path);
}

/* A file size limit (RLIMIT_FSIZE, as `ulimit -f` or systemd's LimitFSIZE;
 * a full disk or quota behaves alike) n bytes above what the file holds. */
static void limit_file_size(const char *path, long above)
{
    struct stat st;
    struct rlimit rl;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = (rlim_t)(st.st_size + above);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static void unlimit_file_size(void)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* A short write (EFBIG here; ENOSPC and EDQUOT alike) must not leave a
 * fragment for the next append to be glued to: for the injector's journal
 * that would lose "injected B" and break at-most-once. */
static void test_a_short_append_leaves_no_fragment(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    applog *a = open_ok(path, APPLOG_FSYNC, &lines);
    char *text;
    (void)state;
    g_ptr_array_free(lines, TRUE);
    assert_int_equal(applog_append(a, "injected A"), 0);
    limit_file_size(path, 5);
    errno = 0;
    assert_int_equal(applog_append(a, "injecting 0123456789abcdef"), -1);
    assert_int_equal(errno, EFBIG);
    assert_non_null(applog_failed(a) ? "failed" : NULL);
    unlimit_file_size();
    text = slurp(path);
    assert_string_equal(text, "injected A\n");
    g_free(text);
    assert_int_equal(applog_append(a, "injected B"), 0);
    assert_int_equal(applog_failed(a), 0);
    applog_close(a);
    a = open_ok(path, APPLOG_FSYNC, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[0], "injected A");
    assert_string_equal(lines->pdata[1], "injected B");
    g_ptr_array_free(lines, TRUE);
    applog_close(a);
    g_free(path);
}

/* At start, a torn last line on a disk that is still full: every complete
 * line is loaded, the log opens (degraded: applog_failed says why), and
 * once space is back the next append is a line of its own. */
static void test_a_torn_tail_on_a_full_disk_keeps_every_line(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    applog *a;
    (void)state;
    assert_true(g_file_set_contents(path, "one\ntwo\nthr", -1, NULL));
    limit_file_size(path, 0);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[0], "one");
    assert_string_equal(lines->pdata[1], "two");
    g_ptr_array_free(lines, TRUE);
    assert_int_equal(applog_failed(a), EFBIG);
    unlimit_file_size();
    assert_int_equal(applog_append(a, "four"), 0);
    assert_int_equal(applog_failed(a), 0);
    applog_close(a);
    a = open_ok(path, APPLOG_WRITE, &lines);
    assert_int_equal(lines->len, 3);
    assert_string_equal(lines->pdata[2], "four");
    g_ptr_array_free(lines, TRUE);
    applog_close(a);
    g_free(path);
}

static void test_open_errors(void **state)
{
    GPtrArray *lines = NULL;
    char *err = NULL;
    (void)state;
    assert_null(applog_open("/nonexistent-dir/x/log", APPLOG_WRITE, 100, &lines, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "/nonexistent-dir/x/log"));
    assert_null(lines);
    g_free(err);
}

int main(void)
{
    /* past RLIMIT_FSIZE, write(2) fails EFBIG instead of killing us (as
     * the daemon does) */
    signal(SIGXFSZ, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_reload),
        cmocka_unit_test(test_torn_and_hostile_lines_are_skipped),
        cmocka_unit_test(test_rewrite_bounds_the_file),
        cmocka_unit_test(test_rewrite_uses_a_fresh_tmp_file),
        cmocka_unit_test(test_add_rewrites_from_the_owner),
        cmocka_unit_test(test_a_short_append_leaves_no_fragment),
        cmocka_unit_test(test_a_torn_tail_on_a_full_disk_keeps_every_line),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
