/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the platform seam, fleetfs/os/ (issue 42): what a caller
 * relies on, the same in the default build (eventfd, inotify, pipe2...)
 * and the portable one (make PLATFORM=portable: a pipe, no watch,
 * socket+fcntl...), which run these alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/os/os.h"

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static bool cloexec(int fd)
{
    return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

static bool nonblock(int fd)
{
    return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

/* the build says which it is: a CI log of the ASan run (make san is the
 * portable build) shows it */
static void test_build_name(void **state)
{
    (void)state;
#if defined(__linux__)
    assert_string_equal(os_build_name(), OS_LINUX_NATIVE ? "linux" : "linux-portable");
#elif defined(__APPLE__)
    assert_string_equal(os_build_name(), "macos");
#endif
}

/* many fires before a drain are one wake-up; a drain empties it */
static void test_wake(void **state)
{
    os_wake w;
    (void)state;
    assert_int_equal(os_wake_open(&w), 0);
    assert_true(cloexec(w.rfd) && cloexec(w.wfd) && nonblock(w.rfd) && nonblock(w.wfd));
    assert_false(readable(w.rfd));
    assert_int_equal(os_wake_drain(&w), -1);
    assert_int_equal(errno, EAGAIN);
    for (int i = 0; i < 100000; i++) /* past a pipe's 64 KiB: EAGAIN is as good */
        assert_true(os_wake_fire(&w) == 0 || errno == EAGAIN);
    assert_true(readable(w.rfd));
    assert_int_equal(os_wake_drain(&w), 0);
    assert_false(readable(w.rfd));
    os_wake_close(&w);
    assert_int_equal(w.rfd, -1);
}

static void test_descriptors(void **state)
{
    int p[2], s;
    (void)state;
    assert_int_equal(os_pipe(p, 0), 0);
    assert_true(cloexec(p[0]) && cloexec(p[1]) && !nonblock(p[0]) && !nonblock(p[1]));
    close(p[0]);
    close(p[1]);
    assert_int_equal(os_pipe(p, OS_NONBLOCK), 0);
    assert_true(nonblock(p[0]) && nonblock(p[1]));
    close(p[0]);
    close(p[1]);
    s = os_socket(AF_UNIX, SOCK_STREAM, 0, OS_NONBLOCK);
    assert_true(s >= 0 && cloexec(s) && nonblock(s));
    close(s);
    s = os_socket(AF_UNIX, SOCK_DGRAM, 0, 0);
    assert_true(s >= 0 && cloexec(s) && !nonblock(s));
    close(s);
}

/* a child closes everything from 3 up: what it can still use is 0-2 */
static void test_close_from(void **state)
{
    int p[2], status;
    pid_t pid;
    (void)state;
    assert_int_equal(pipe(p), 0);
    assert_true(p[0] >= 3 && p[1] >= 3);
    pid = fork();
    if (pid == 0) {
        os_close_from(3);
        _exit(fcntl(p[0], F_GETFD) < 0 && fcntl(p[1], F_GETFD) < 0 && fcntl(2, F_GETFD) >= 0 ? 0
                                                                                             : 1);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(p[0]);
    close(p[1]);
}

static void test_times_and_sync(void **state)
{
    char *dir = g_dir_make_tmp("fleetfs-os-XXXXXX", NULL), *path;
    struct stat st;
    int fd;
    (void)state;
    memset(&st, 0, sizeof st);
    os_st_set_times_ms(&st, 1700000000123);
    assert_int_equal(os_st_mtime(&st).tv_sec, 1700000000);
    assert_int_equal(os_st_mtime(&st).tv_nsec, 123000000);
    assert_int_equal(os_st_ctime(&st).tv_nsec, 123000000);
    path = g_build_filename(dir, "f", NULL);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    assert_int_equal(os_datasync(fd), 0);
    close(fd);
    assert_int_equal(os_datasync(-1), -1);
    assert_int_equal(errno, EBADF);
    os_heap_trim();
    unlink(path);
    rmdir(dir);
    g_free(path);
    g_free(dir);
}

/* the default build watches (inotify; kqueue on macOS) and sees a .pub
 * written in place; the portable one on Linux has no watch (the caller
 * then compares stat stamps) */
static void test_dirwatch(void **state)
{
    char *dir = g_dir_make_tmp("fleetfs-os-XXXXXX", NULL), *key;
    os_dirwatch *w;
    bool ended;
    (void)state;
    key = g_build_filename(dir, "a.pub", NULL);
    assert_true(g_file_set_contents(key, "k1", -1, NULL));
    w = os_dirwatch_open(dir, ".pub");
#ifdef __APPLE__
    bool watches = true; /* kqueue */
#else
    bool watches = OS_LINUX_NATIVE; /* inotify */
#endif
    if (!watches) {
        assert_null(w);
        assert_int_equal(errno, ENOSYS);
        assert_false(os_dir_local(dir));
    } else {
        assert_non_null(w);
        assert_int_equal(os_dirwatch_read(w, &ended), 0);
        assert_false(ended);
        FILE *f = fopen(key, "w");
        assert_non_null(f);
        fputs("k2", f);
        fclose(f);
        assert_true(os_dirwatch_read(w, &ended) > 0);
        assert_int_equal(os_dirwatch_read(w, &ended), 0);
        os_dirwatch_close(w);
    }
    unlink(key);
    rmdir(dir);
    g_free(key);
    g_free(dir);
}

/* the mount table has / in it; this process's facts are its own */
static void test_mounts_and_procs(void **state)
{
    size_t n, np;
    os_mount *m = os_mounts(&n);
    os_proc_facts f;
    int *pids;
    bool root = false, me = false;
    char **argv, comm[32];
    (void)state;
    assert_non_null(m);
    for (size_t i = 0; i < n; i++)
        root |= !strcmp(m[i].dir, "/") && m[i].type[0];
    assert_true(root);
    os_mounts_free(m, n);
    assert_int_equal(os_proc_facts_of(getpid(), &f), 0);
    assert_int_equal(f.ppid, getppid());
    assert_int_equal(f.pgrp, getpgrp());
    assert_int_equal(f.session, getsid(0));
    pids = os_proc_list(&np);
    assert_non_null(pids);
    for (size_t i = 0; i < np; i++)
        me |= pids[i] == getpid();
    assert_true(me);
    g_free(pids);
    argv = os_proc_argv(getpid());
    assert_non_null(argv[0]);
    assert_true(g_str_has_suffix(argv[0], "test_os"));
    g_strfreev(argv);
    /* the name the kernel keeps for this process: set here first, since
     * under valgrind it is valgrind's own ("memcheck-amd64-") */
#ifdef __linux__
    assert_int_equal(prctl(PR_SET_NAME, "fleet-os-test"), 0);
    os_proc_comm(getpid(), comm, sizeof comm);
    assert_string_equal(comm, "fleet-os-test");
#else
    os_proc_comm(getpid(), comm, sizeof comm);
    assert_string_equal(comm, "test_os");
#endif
    assert_false(os_proc_waits_for_child(getpid()));
    assert_int_equal(os_proc_facts_of(-5, &f), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_name),       cmocka_unit_test(test_wake),
        cmocka_unit_test(test_descriptors),      cmocka_unit_test(test_close_from),
        cmocka_unit_test(test_times_and_sync),   cmocka_unit_test(test_dirwatch),
        cmocka_unit_test(test_mounts_and_procs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
