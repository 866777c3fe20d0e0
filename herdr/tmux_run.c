/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux_run.c — the one way fleetfs runs tmux (tb_run, tmux_int.h),
 * for the tmux backend (tmux.c), what it reads off a pane (tmux_look.c)
 * and the spawn primitives (tmux_spawn.c): an argv, never a shell; the
 * input on tmux's stdin, never through a file; each command given
 * TMUX_TIMEOUT_MS and killed after it, so a stopped or wedged tmux server
 * cannot hold the injector (and with it the unmount).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib.h>

#include "fleetfs/base/log.h"
#include "herdr/tmux_int.h"

/* One tmux command's pipes: stdin (the input still to write), stdout and
 * stderr (collected). */
typedef struct {
    int fd[3]; /* -1 once done */
    const char *in;
    size_t in_len, in_off;
    GString *out, *err;
} tmux_io;

/* Writes the input and reads stdout and stderr to their end, or until
 * timeout_ms passed (false).  The input pipe is non-blocking: a stopped
 * tmux must not hold a write of a large paste either. */
static bool tmux_io_run(tmux_io *io, int64_t timeout_ms)
{
    int64_t deadline = g_get_monotonic_time() / 1000 + timeout_ms;
    if (io->fd[0] >= 0)
        g_unix_set_fd_nonblocking(io->fd[0], TRUE, NULL);
    while (io->fd[0] >= 0 || io->fd[1] >= 0 || io->fd[2] >= 0) {
        struct pollfd p[3] = {{.fd = io->fd[0], .events = POLLOUT},
                              {.fd = io->fd[1], .events = POLLIN},
                              {.fd = io->fd[2], .events = POLLIN}};
        int64_t left = deadline - g_get_monotonic_time() / 1000;
        int r;
        if (left <= 0)
            return false;
        r = poll(p, 3, (int)left); /* a negative fd is skipped */
        if (r < 0 && errno != EINTR)
            return false;
        if (r > 0 && p[0].revents) {
            ssize_t w = write(io->fd[0], io->in + io->in_off, io->in_len - io->in_off);
            if (w > 0)
                io->in_off += (size_t)w;
            if ((w < 0 && errno != EINTR && errno != EAGAIN) || io->in_off == io->in_len) {
                close(io->fd[0]);
                io->fd[0] = -1;
            }
        }
        for (int i = 1; r > 0 && i < 3; i++) {
            char buf[4096];
            ssize_t k;
            if (io->fd[i] < 0 || !p[i].revents)
                continue;
            k = read(io->fd[i], buf, sizeof buf);
            if (k > 0) {
                g_string_append_len(i == 1 ? io->out : io->err, buf, k);
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(io->fd[i]);
                io->fd[i] = -1;
            }
        }
    }
    return true;
}

/* tmux_int.h; also the spawn primitives' (tmux_spawn.c). */
bool tb_run(const char *const *args, const char *input, char **out, char *why, size_t n)
{
    GPtrArray *argv = g_ptr_array_new();
    tmux_io io = {.fd = {-1, -1, -1}, .in = input, .in_len = input ? strlen(input) : 0};
    gint status = 0;
    GError *err = NULL;
    GPid pid;
    bool ok, done;

    if (out)
        *out = NULL;
    g_ptr_array_add(argv, (gpointer) "tmux");
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    ok = g_spawn_async_with_pipes(NULL, (gchar **)argv->pdata, NULL,
                                  G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
                                  input ? &io.fd[0] : NULL, &io.fd[1], &io.fd[2], &err);
    g_ptr_array_free(argv, TRUE);
    if (!ok) {
        snprintf(why, n, "%s", err->message);
        log_clean(why);
        g_error_free(err);
        return false;
    }
    io.out = g_string_new(NULL);
    io.err = g_string_new(NULL);
    done = tmux_io_run(&io, TMUX_TIMEOUT_MS);
    if (!done)
        kill(pid, SIGKILL);
    for (int i = 0; i < 3; i++)
        if (io.fd[i] >= 0)
            close(io.fd[i]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    g_spawn_close_pid(pid);
    ok = done && io.in_off == io.in_len && g_spawn_check_wait_status(status, NULL);
    if (!done)
        snprintf(why, n,
                 "tmux %s did not finish within %d s (a stopped or wedged tmux server?); killed it",
                 args[0], TMUX_TIMEOUT_MS / 1000);
    else if (!ok)
        snprintf(why, n, "%s", io.err->len ? g_strstrip(io.err->str) : "tmux failed");
    if (!ok)
        log_clean(why);
    /* the callers read (and free) *out only when ok */
    if (out && ok)
        *out = g_string_free(io.out, FALSE);
    else
        g_string_free(io.out, TRUE);
    g_string_free(io.err, TRUE);
    return ok;
}
