/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/cancel.c — a call the client gave up on (issue 43 item 5).
 *
 * The server answers one request at a time, but its input is read by a
 * thread of its own from the start, so that while a call runs (fleet_ask
 * may wait minutes for an answer) the lines that come are seen: a
 * notifications/cancelled naming the running call fires the cancellation
 * (serve.c looks while it waits), everything else is put back and read
 * in order once the call is done.  A fired cancellation is a readable
 * pipe: fleet_ask polls it beside its ask file and, fired, closes the
 * file without reading, so its question's answer, whenever it comes, goes
 * to the inbox as an ordinary reply (model/ask.c); no response is sent
 * for the cancelled request (the MCP revision 2025-06-18 says it should
 * not).
 */
#include "fleetfs/mcp/cancel.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/os/os.h"

struct mcp_in {
    GAsyncQueue *q; /* mcp_in_line*, from the reader thread */
    GQueue back;    /* put back, read first */
    FILE *in;
    mcp_read_fn read;
};

static gpointer reader(gpointer p)
{
    mcp_in *c = p;
    GString *line = g_string_new(NULL);
    for (;;) {
        mcp_in_line *l = g_new0(mcp_in_line, 1);
        bool too_long = false;
        ssize_t n = c->read(c->in, line, &too_long);
        if (n < 0) {
            l->err = errno;
            l->failed = ferror(c->in) != 0;
            g_async_queue_push(c->q, l);
            break;
        }
        l->text = g_strndup(line->str, line->len);
        l->len = line->len;
        l->too_long = too_long;
        g_async_queue_push(c->q, l);
    }
    g_string_free(line, TRUE);
    return NULL;
}

mcp_in *mcp_in_start(FILE *in, mcp_read_fn read)
{
    mcp_in *c = g_new0(mcp_in, 1);
    c->q = g_async_queue_new();
    c->in = in;
    c->read = read;
    g_queue_init(&c->back);
    g_thread_unref(g_thread_new("mcp-stdin", reader, c));
    return c;
}

mcp_in_line *mcp_in_next(mcp_in *c, gint64 until_us)
{
    gint64 left;
    if (!g_queue_is_empty(&c->back))
        return g_queue_pop_head(&c->back);
    if (until_us < 0)
        return g_async_queue_pop(c->q);
    left = until_us - g_get_monotonic_time();
    return g_async_queue_timeout_pop(c->q, left > 0 ? (guint64)left : 0);
}

mcp_in_line *mcp_in_fresh(mcp_in *c)
{
    return g_async_queue_try_pop(c->q);
}

void mcp_in_putback(mcp_in *c, mcp_in_line *l)
{
    g_queue_push_tail(&c->back, l);
}

void mcp_in_line_free(mcp_in_line *l)
{
    if (!l)
        return;
    g_free(l->text);
    g_free(l);
}

static json_t *parse(const mcp_in_line *l)
{
    json_t *j;
    if (!l->text || l->too_long)
        return NULL;
    j = json_loadb(l->text, l->len, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

bool mcp_is_cancel_of(const mcp_in_line *l, const json_t *id)
{
    json_t *j = parse(l), *m, *p;
    bool yes = false;
    if (!j || !id)
        goto out;
    m = json_object_get(j, "method");
    p = json_object_get(j, "params");
    yes = json_is_string(m) && !strcmp(json_string_value(m), "notifications/cancelled") &&
          !json_object_get(j, "id") && json_is_object(p) &&
          json_equal(json_object_get(p, "requestId"), (json_t *)id);
out:
    json_decref(j);
    return yes;
}

json_t *mcp_call_id(const mcp_in_line *l)
{
    json_t *j = parse(l), *m, *id = NULL;
    if (!j)
        return NULL;
    m = json_object_get(j, "method");
    if (json_is_string(m) && !strcmp(json_string_value(m), "tools/call"))
        id = json_incref(json_object_get(j, "id"));
    json_decref(j);
    return id;
}

static int pipe_fds[2] = {-1, -1};
static gint fired;

int mcp_cancel_fd(void)
{
    static gsize once;
    if (g_once_init_enter(&once)) {
        if (os_pipe(pipe_fds, OS_NONBLOCK) < 0)
            pipe_fds[0] = pipe_fds[1] = -1;
        g_once_init_leave(&once, 1);
    }
    return pipe_fds[0];
}

void mcp_cancel_fire(void)
{
    char b = 1;
    if (mcp_cancel_fd() < 0 || g_atomic_int_get(&fired))
        return;
    g_atomic_int_set(&fired, 1);
    if (write(pipe_fds[1], &b, 1) < 0 && errno != EAGAIN)
        return;
}

void mcp_cancel_clear(void)
{
    char buf[64];
    if (mcp_cancel_fd() < 0)
        return;
    while (read(pipe_fds[0], buf, sizeof buf) > 0)
        ;
    g_atomic_int_set(&fired, 0);
}

bool mcp_cancel_fired(void)
{
    return g_atomic_int_get(&fired) != 0;
}
