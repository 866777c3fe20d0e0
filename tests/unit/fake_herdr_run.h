/* SPDX-License-Identifier: Apache-2.0 */
/* fake_herdr_run.h — for unit tests: start the fake herdr
 * (BUILD/fake-herdr, beside BUILD/tests/) on a socket of its own with a
 * given world, read that world back, stop it. Include after cmocka.h. The
 * fake dies with the test (PR_SET_PDEATHSIG), also when a test fails. */
#ifndef FLEETFS_TESTS_FAKE_HERDR_RUN_H
#define FLEETFS_TESTS_FAKE_HERDR_RUN_H

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char dir[64], sock[128], state[128], log[128];
    pid_t pid;
} fake;

static inline fake *fake_start(const char *state_json)
{
    fake *f = calloc(1, sizeof *f);
    char exe[PATH_MAX], bin[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    FILE *fp;

    assert_true(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0'; /* BUILD/tests */
    *strrchr(exe, '/') = '\0'; /* BUILD */
    snprintf(bin, sizeof bin, "%s/fake-herdr", exe);
    if (access(bin, X_OK) != 0)
        fail_msg("%s is missing: make all builds it", bin);
    snprintf(f->dir, sizeof f->dir, "/tmp/hd-fake-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof f->sock, "%s/herdr.sock", f->dir);
    snprintf(f->state, sizeof f->state, "%s/state.json", f->dir);
    snprintf(f->log, sizeof f->log, "%s/prompts.jsonl", f->dir);
    fp = fopen(f->state, "w");
    assert_non_null(fp);
    fputs(state_json, fp);
    fclose(fp);
    f->pid = fork();
    assert_true(f->pid >= 0);
    if (f->pid == 0) {
        int null = open("/dev/null", O_RDWR);

#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test leaves no fake behind */
#endif
        dup2(null, 0);
        dup2(null, 1);
        execl(bin, bin, "--socket", f->sock, "--state", f->state, "--log", f->log, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        struct stat st;

        if (stat(f->sock, &st) == 0)
            return f;
        poll(NULL, 0, 10);
    }
    fail_msg("the fake herdr did not start");
    return NULL;
}

static inline void fake_stop(fake *f)
{
    char cmd[128];

    kill(f->pid, SIGTERM);
    waitpid(f->pid, NULL, 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
}

/* The fake's world as the test sees it (the fake writes it back). */
static inline json_t *fake_world(const fake *f)
{
    json_t *w = json_load_file(f->state, 0, NULL);

    assert_non_null(w);
    return w;
}

static inline size_t fake_panes(const fake *f)
{
    json_t *w = fake_world(f);
    size_t n = json_array_size(json_object_get(w, "panes"));

    json_decref(w);
    return n;
}

/* The pane with this id in the fake's world (a new reference), or NULL. */
static inline json_t *fake_pane(const fake *f, const char *id)
{
    json_t *w = fake_world(f), *p, *hit = NULL;
    size_t i;

    json_array_foreach(json_object_get(w, "panes"), i, p)
    {
        if (!strcmp(json_string_value(json_object_get(p, "pane_id")), id))
            hit = json_incref(p);
    }
    json_decref(w);
    return hit;
}

static inline size_t fake_lines(const fake *f, const char *suffix)
{
    char path[160], buf[4096];
    size_t lines = 0, n;
    FILE *fp;

    snprintf(path, sizeof path, "%s%s", f->log, suffix);
    if (!(fp = fopen(path, "r")))
        return 0;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
        for (size_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
    fclose(fp);
    return lines;
}

#endif
