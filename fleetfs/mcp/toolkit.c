/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/toolkit.c — what every fleet_* tool shares (tools_int.h):
 * a mount file read or written whole (one write(2), one message), who the
 * server speaks for, an errno in words (SPEC section 5: what it means and
 * what to do), a tool's result and the check of its arguments.  Below
 * tools.c, home.c, ask.c and claim.c: it calls none of them.
 */
#include "fleetfs/mcp/tools.h"
#include "fleetfs/mcp/tools_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/os/os.h"
#include "fleetfs/wire/names.h"

/* ---- errnos in words --------------------------------------------------- */

char *mcp_fleet_errno_text(int err, const char *what, const char *mnt, const char *home,
                           const char *peer, const char *ref)
{
    const char *p = peer ? peer : "the peer";
    bool group = peer && g_str_has_prefix(peer, GROUP_PREFIX), agent = peer && strchr(peer, '@');
    switch (err) {
    case ENOENT:
        if (ref)
            return g_strdup_printf("%s: %s sent you no message %s that can be answered (ENOENT); "
                                   "take replyTo from fleet_inbox, or send without it",
                                   what, p, ref);
        if (group)
            return g_strdup_printf("%s: no such group '%s' (ENOENT); fleet_list shows the groups: "
                                   "check the name",
                                   what, peer + strlen(GROUP_PREFIX));
        if (agent)
            return g_strdup_printf("%s: no such agent '%s' known here (ENOENT); fleet_list shows "
                                   "the agents: check the gid (name@host)",
                                   what, peer);
        if (peer)
            return g_strdup_printf("%s: no such peer '%s' (ENOENT); fleet_list shows the leads "
                                   "you can message: check the name",
                                   what, peer);
        return g_strdup_printf("%s: %s/ has no fleet tree (ENOENT: no such file); is fleetfs "
                               "mounted there? give `fleetfs mcp` the right mount point",
                               what, mnt);
    case EINVAL:
        return g_strdup_printf("%s: the message is empty or not valid UTF-8 text (EINVAL); "
                               "nothing was sent: send some text",
                               what);
    case EMSGSIZE:
        return g_strdup_printf("%s: the message is larger than max_message (64 KiB by default; "
                               "see fleet_status) (EMSGSIZE); nothing was sent: shorten it, or "
                               "write it to a file %s can read and send the path",
                               what, p);
    case OS_ECOMM: /* the same words where it is ENETDOWN (macOS): fleetfs/os/os.h */
        return g_strdup_printf("%s: the broker is not connected, so nothing was sent (ECOMM); "
                               "safe to send again later: fleet_status shows the broker line",
                               what);
    case ETIMEDOUT:
        return g_strdup_printf(
            "%s: no confirmation within send_timeout (ETIMEDOUT): it may or may not be in %s's "
            "mailbox, and fleet_sent lists it as unconfirmed. Never send the text anew; once "
            "fleet_status shows the broker connected, resend it by msgId (write the msgId to "
            "%s%s/resend)",
            what, p, home ? home : mnt, home ? "" : "/self");
    case ENOSPC:
        return g_strdup_printf("%s: %s's mailbox is full: it is not reading (ENOSPC); nothing "
                               "was sent: tell your operator, and try later",
                               what, p);
    case ENXIO:
        if (group)
            return g_strdup_printf("%s: group '%s' has no member to receive it (ENXIO); nothing "
                                   "was sent: fleet_list shows the groups and their members",
                                   what, peer + strlen(GROUP_PREFIX));
        if (agent)
            return g_strdup_printf("%s: agent %s's mailbox does not exist: no such agent, or it "
                                   "was retired (ENXIO); nothing was sent: fleet_list shows the "
                                   "agents",
                                   what, peer);
        return g_strdup_printf("%s: %s's mailbox does not exist and may not be created here "
                               "(ENXIO); nothing was sent: tell your operator",
                               what, p);
    case EACCES:
    case EPERM:
        return g_strdup_printf("%s: permission denied (%s): this mount is not yours; run "
                               "`fleetfs mcp` as the user who mounted %s",
                               what, err == EACCES ? "EACCES" : "EPERM", mnt);
    case ENOTCONN:
        return g_strdup_printf("%s: the fleetfs daemon behind %s is gone (ENOTCONN: transport "
                               "endpoint is not connected); tell your operator: the mount must "
                               "be restarted (" OS_UNMOUNT_CMD " %s, then mount it again)",
                               what, mnt, mnt);
    case EIO:
        return g_strdup_printf("%s: the fleetfs daemon failed (EIO: %s); see its log "
                               "(journalctl or its stderr) for the reason",
                               what, g_strerror(err));
    default:
        return g_strdup_printf("%s: %s (errno %d)", what, g_strerror(err), err);
    }
}

/* ---- files ------------------------------------------------------------- */

/* 0 or an errno; *out gets the whole file */
int mt_read_all(const char *path, GString **out)
{
    char buf[65536];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    GString *s;
    if (fd < 0)
        return errno;
    s = g_string_new(NULL);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            g_string_free(s, TRUE);
            return e;
        }
        if (n == 0 || s->len >= READ_CAP)
            break;
        g_string_append_len(s, buf, n);
    }
    close(fd);
    *out = s;
    return 0;
}

/* one write(2) of the whole of data: one message, one ack list */
int mt_write_once(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;
    int e = 0;
    if (fd < 0)
        return errno;
    n = write(fd, data, len);
    if (n < 0)
        e = errno;
    else if ((size_t)n != len)
        e = EIO;
    if (close(fd) < 0 && !e)
        e = errno;
    return e;
}

/* JSON Lines -> array (lines that do not parse are kept as strings) */
json_t *mt_json_lines(const GString *s)
{
    json_t *arr = json_array();
    gchar **lines = g_strsplit(s->str, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        json_error_t jerr;
        json_t *v;
        if (!**l)
            continue;
        v = json_loads(*l, JSON_ALLOW_NUL, &jerr);
        json_array_append_new(arr, v ? v : json_string(*l));
    }
    g_strfreev(lines);
    return arr;
}

/* the local lead's coord_id (self -> leads/<me>), or an errno */
int mt_whoami(const char *mnt, char me[NAME_MAX_LEN + 1])
{
    char path[PATH_MAX], link[256];
    ssize_t n;
    const char *slash;
    snprintf(path, sizeof path, "%s/self", mnt);
    n = readlink(path, link, sizeof link - 1);
    if (n < 0)
        return errno;
    link[n] = '\0';
    slash = strrchr(link, '/');
    g_strlcpy(me, slash ? slash + 1 : link, NAME_MAX_LEN + 1);
    return name_valid(me) ? 0 : EIO;
}

/* fills w->me (the lead's coord_id, or the agent's gid); 0 or an errno */
int mt_who_me(who *w)
{
    char lead[NAME_MAX_LEN + 1];
    int rc;
    if (w->as) {
        g_strlcpy(w->me, w->as, sizeof w->me);
        return 0;
    }
    if ((rc = mt_whoami(w->mnt, lead)))
        return rc;
    g_strlcpy(w->me, lead, sizeof w->me);
    return 0;
}

json_t *mt_fail_errno(const who *w, int err, const char *what, const char *peer, const char *ref)
{
    char *t;
    /* an agent retired under its own server: every path of its home is
     * ENOENT, which must not read as "no such peer" */
    if (w->as && (err == ENOENT || err == ENXIO) && access(w->home, F_OK) < 0 && errno == ENOENT) {
        t = g_strdup_printf("%s: you, %s, are no longer a local agent of the mount at %s (%s/ is "
                            "gone: the agent was retired, or the mount restarted without it); "
                            "nothing was done: your operator registers it again (mkdir %s, or "
                            "agents= at mount) or starts this server for another agent",
                            what, w->as, w->mnt, w->home, w->home);
        json_t *r0 = mcp_result_text(t, true);
        g_free(t);
        return r0;
    }
    t = mcp_fleet_errno_text(err, what, w->mnt, w->home, peer, ref);
    json_t *r = mcp_result_text(t, true);
    g_free(t);
    return r;
}

json_t *mt_fail(const char *fmt, ...)
{
    va_list ap;
    char *t;
    json_t *r;
    va_start(ap, fmt);
    t = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    r = mcp_result_text(t, true);
    g_free(t);
    return r;
}

/* the result is v: its structuredContent, and its text as JSON (v stolen) */
json_t *mt_ok_json(json_t *v)
{
    return mcp_result_json(v);
}

/* ---- arguments --------------------------------------------------------- */

/* NULL when every key of args is in allowed; else the error result */
json_t *mt_only_keys(json_t *args, const char *tool, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v)
    {
        bool known = false;
        for (const char *const *a = allowed; *a; a++)
            known = known || !strcmp(*a, key);
        if (!known)
            return mt_fail("%s: unknown argument '%s' (see the tool's input schema)", tool, key);
    }
    return NULL;
}

bool mt_is_msgid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!g_ascii_isxdigit(s[n]) || g_ascii_isupper(s[n]))
            return false;
    return n == 32;
}
