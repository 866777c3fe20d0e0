/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for fleetfs/store/statelock.c: one daemon per state_dir — a
 * second taker waits, then refuses naming the lock and the holder's pid,
 * and gets the lock once the holder lets go within the wait. */
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

#include "fleetfs/store/statelock.h"

static void test_a_second_taker_is_refused_with_the_holder(void **state)
{
    char *dir = g_dir_make_tmp("statelock-XXXXXX", NULL);
    char *err = NULL, pid[32];
    state_lock *a = sl_acquire(dir, 0, &err), *b;
    (void)state;
    assert_non_null(a);
    assert_null(err);
    b = sl_acquire(dir, 300, &err);
    assert_null(b);
    assert_non_null(err);
    assert_non_null(strstr(err, "is in use"));
    assert_non_null(strstr(err, "/lock"));
    snprintf(pid, sizeof pid, "pid %ld)", (long)getpid());
    assert_non_null(strstr(err, pid));
    g_free(err);
    err = NULL;
    sl_release(a);
    b = sl_acquire(dir, 0, &err);
    assert_non_null(b);
    sl_release(b);
    g_free(dir);
}

static gpointer let_go_later(gpointer l)
{
    g_usleep(300 * 1000);
    sl_release(l);
    return NULL;
}

static void test_a_taker_waits_for_the_holder_to_let_go(void **state)
{
    char *dir = g_dir_make_tmp("statelock-XXXXXX", NULL);
    char *err = NULL;
    state_lock *a = sl_acquire(dir, 0, &err), *b;
    GThread *t;
    (void)state;
    assert_non_null(a);
    t = g_thread_new("holder", let_go_later, a);
    b = sl_acquire(dir, 10000, &err);
    assert_non_null(b);
    assert_null(err);
    g_thread_join(t);
    sl_release(b);
    g_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_second_taker_is_refused_with_the_holder),
        cmocka_unit_test(test_a_taker_waits_for_the_holder_to_let_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
