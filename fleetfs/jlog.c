/* fleetfs/jlog.c — see jlog.h. */
#include "fleetfs/jlog.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/log.h"

struct jlog {
    char *path;
    int fd;      /* kept open for appending; -1 until the first line */
    guint lines; /* lines in the file now */
    bool warned;
};

jlog *jlog_open(const char *path, GPtrArray **lines)
{
    jlog *j = g_new0(jlog, 1);
    gchar *text = NULL;
    j->path = g_strdup(path);
    j->fd = -1;
    *lines = g_ptr_array_new_with_free_func(g_free);
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return j;
    gchar **all = g_strsplit(text, "\n", -1);
    for (gchar **l = all; *l; l++) {
        json_t *o;
        if (!**l)
            continue;
        j->lines++;
        o = json_loads(*l, 0, NULL);
        if (json_is_object(o))
            g_ptr_array_add(*lines, g_strdup(*l));
        json_decref(o);
    }
    g_strfreev(all);
    g_free(text);
    return j;
}

void jlog_append(jlog *j, const char *line)
{
    size_t len = strlen(line);
    char *buf = g_malloc(len + 1);
    ssize_t n = -1;
    memcpy(buf, line, len);
    buf[len] = '\n';
    if (j->fd < 0)
        j->fd = open(j->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd >= 0)
        n = write(j->fd, buf, len + 1); /* one write: a line is never torn by us */
    g_free(buf);
    if (n != (ssize_t)(len + 1)) {
        if (!j->warned)
            log_warn("cannot append to %s: %s; it will not survive a restart", j->path,
                     strerror(errno));
        j->warned = true;
        return;
    }
    j->lines++;
}

void jlog_maybe_compact(jlog *j, guint live, GString *(*render)(void *ud), void *ud)
{
    GString *all;
    char *tmp;
    if (j->lines < 64 || j->lines < 2 * live)
        return;
    all = render(ud);
    tmp = g_strconcat(j->path, ".tmp", NULL);
    if (g_file_set_contents(tmp, all->str, (gssize)all->len, NULL) && rename(tmp, j->path) == 0) {
        j->lines = live;
        if (j->fd >= 0)
            close(j->fd); /* the next append opens the new file */
        j->fd = -1;
    }
    g_free(tmp);
    g_string_free(all, TRUE);
}

void jlog_close(jlog *j)
{
    if (!j)
        return;
    if (j->fd >= 0)
        close(j->fd);
    g_free(j->path);
    g_free(j);
}
