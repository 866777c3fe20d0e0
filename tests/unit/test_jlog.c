/* Unit tests for fleetfs/jlog.c: the bounded JSON Lines files behind
 * history and sent — append, reload, a torn last line, compaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fleetfs/jlog.h"

static char *tmpfile_path(void)
{
    char *dir = g_dir_make_tmp("jlog-XXXXXX", NULL);
    char *p = g_build_filename(dir, "log.jsonl", NULL);
    g_free(dir);
    return p;
}

static guint count_lines(const char *path)
{
    gchar *text = NULL;
    guint n = 0;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    for (char *c = text; *c; c++)
        n += *c == '\n';
    g_free(text);
    return n;
}

static void test_append_and_reload(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    jlog *j = jlog_open(path, &lines);
    (void)state;
    assert_int_equal(lines->len, 0);
    g_ptr_array_free(lines, TRUE);
    jlog_append(j, "{\"n\":1}");
    jlog_append(j, "{\"n\":2}");
    jlog_close(j);
    j = jlog_open(path, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[0], "{\"n\":1}");
    assert_string_equal(lines->pdata[1], "{\"n\":2}");
    g_ptr_array_free(lines, TRUE);
    jlog_close(j);
    g_free(path);
}

static void test_torn_and_garbage_lines_are_skipped(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    jlog *j;
    (void)state;
    assert_true(
        g_file_set_contents(path, "{\"ok\":1}\nnot json\n[1,2]\n{\"ok\":2}\n{\"torn\":", -1, NULL));
    j = jlog_open(path, &lines);
    assert_int_equal(lines->len, 2);
    assert_string_equal(lines->pdata[1], "{\"ok\":2}");
    g_ptr_array_free(lines, TRUE);
    jlog_close(j);
    g_free(path);
}

static GString *render_ten(void *ud)
{
    GString *s = g_string_new(NULL);
    for (int i = 0; i < 10; i++)
        g_string_append_printf(s, "{\"kept\":%d,\"by\":\"%s\"}\n", i, (const char *)ud);
    return s;
}

static void test_compaction_bounds_the_file(void **state)
{
    char *path = tmpfile_path();
    GPtrArray *lines;
    jlog *j = jlog_open(path, &lines);
    (void)state;
    g_ptr_array_free(lines, TRUE);
    for (int i = 0; i < 500; i++) {
        char line[64];
        snprintf(line, sizeof line, "{\"n\":%d}", i);
        jlog_append(j, line);
        jlog_maybe_compact(j, 10, render_ten, "render");
    }
    /* never more than max(64, 2 x live) lines, and what is there is the
     * render plus what was appended after it */
    assert_true(count_lines(path) <= 64);
    jlog_append(j, "{\"last\":true}");
    jlog_close(j);
    j = jlog_open(path, &lines);
    assert_string_equal(g_ptr_array_index(lines, lines->len - 1), "{\"last\":true}");
    assert_non_null(strstr(lines->pdata[0], "\"kept\":0"));
    g_ptr_array_free(lines, TRUE);
    jlog_close(j);
    g_free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_reload),
        cmocka_unit_test(test_torn_and_garbage_lines_are_skipped),
        cmocka_unit_test(test_compaction_bounds_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
