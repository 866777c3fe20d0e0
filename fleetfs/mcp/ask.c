/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/ask.c — `fleetfs ask` and the ask behind fleet_ask: one
 * question through the mount's ask file, its answer printed.
 *
 * Only files, as the MCP server: the ask file is opened read-write, the
 * question is its one write, and a read returns the answer or fails
 * ETIMEDOUT when the question's lifetime ends (the daemon's clock, see
 * model/ask.c).  A caller that must not wait on the mount beyond a bound
 * (the MCP server) polls first: the daemon says ETIMEDOUT by itself, so
 * a poll that ends without a word means the mount is not answering.
 *
 * The fate is the exit status of `fleetfs ask` (doc/fleetfs.1): 0
 * answered, 3 no such peer, 4 no answer within the lifetime, 5 refused
 * (the question was not sent, or its receiver refused it: a `rejected`
 * receipt or its dead letter home, at once; the sent entry's detail says
 * why), 6 unknown (the send timed out: the question may be out), 1
 * anything else, 2 usage.
 */
#include "fleetfs/mcp/ask.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <jansson.h>

#include "fleetfs/base/duration.h"
#include "fleetfs/base/errors.h"
#include "fleetfs/os/os.h"
#include "fleetfs/mcp/cancel.h"
#include "fleetfs/mcp/mount.h"
#include "fleetfs/mcp/tools_int.h"
#include "fleetfs/wire/names.h"

char *mcp_ask_path(const char *mnt, const char *to, bool json)
{
    addr a;
    if (!addr_parse(to, &a) || a.kind == ADDR_GROUP)
        return NULL;
    return g_strdup_printf("%s/%s/%s/%s", mnt, a.kind == ADDR_LEAD ? "peers" : "agents", to,
                           json ? "ask.json" : "ask");
}

mcp_ask_fate mcp_ask_run(const char *path, const char *data, size_t len, int wait_ms, char **answer,
                         size_t *alen, int *err)
{
    GString *got = g_string_new(NULL);
    char buf[65536];
    ssize_t n;
    int fd;
    mcp_ask_fate fate = MA_ANSWERED;

    *answer = NULL;
    *alen = 0;
    *err = 0;
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        g_string_free(got, TRUE);
        return *err == ENOENT ? MA_NO_PEER : MA_FAILED;
    }
    n = write(fd, data, len);
    if (n < 0 || (size_t)n != len) {
        *err = n < 0 ? errno : EIO;
        fate = *err == ETIMEDOUT ? MA_UNKNOWN : MA_NOT_ASKED;
    }
    if (fate == MA_ANSWERED && wait_ms >= 0) {
        /* and the MCP client's cancellation (cancel.c): then the file is
         * closed unread, and an answer goes to the inbox */
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = mcp_cancel_fd(), .events = POLLIN}};
        int rc;
        do
            rc = poll(p, p[1].fd >= 0 ? 2 : 1, wait_ms);
        while (rc < 0 && errno == EINTR);
        if (rc == 0)
            fate = MA_NO_WORD;
        else if (rc > 0 && !(p[0].revents & POLLIN) && (p[1].revents & POLLIN))
            fate = MA_CANCELLED;
    }
    while (fate == MA_ANSWERED && (n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            *err = errno;
            fate = *err == ETIMEDOUT ? MA_TIMED_OUT : *err == ECONNREFUSED ? MA_REFUSED : MA_FAILED;
            break;
        }
        g_string_append_len(got, buf, n);
    }
    close(fd);
    if (fate == MA_ANSWERED) {
        *alen = got->len;
        *answer = g_string_free(got, FALSE);
    } else {
        g_string_free(got, TRUE);
    }
    return fate;
}

void mcp_ask_refusal_words(const char *sent_path, const char *to, char *out, size_t n)
{
    GString *s = NULL;
    json_t *arr;
    size_t i;
    json_t *e;
    out[0] = '\0';
    if (mt_read_all(sent_path, &s) != 0)
        return;
    arr = mt_json_lines(s);
    g_string_free(s, TRUE);
    json_array_foreach(arr, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "to"));
        const char *st = json_string_value(json_object_get(e, "state"));
        const char *d = json_string_value(json_object_get(e, "detail"));
        if (t && st && d && !strcmp(t, to) &&
            (!strcmp(st, "dead-lettered") || !strcmp(st, "rejected")))
            g_strlcpy(out, d, n);
    }
    json_decref(arr);
}

/* ---- fleet_ask ---------------------------------------------------------- */

/* the timeout argument, or -1 when it is not one */
static int ask_timeout_arg(json_t *args)
{
    json_t *t = json_object_get(args, "timeout");
    if (!t || json_is_null(t))
        return MCP_ASK_DEFAULT;
    if (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > MCP_ASK_MAX)
        return -1;
    return (int)json_integer_value(t);
}

int mcp_fleet_wait_s(const mcp_tool *tool, json_t *args)
{
    int t;
    json_t *cw = json_object_get(args, "wait");
    if (!strcmp(tool->name, "fleet_claim")) /* its wait for a release, then the take */
        return json_is_integer(cw) ? (int)CLAMP(json_integer_value(cw), 0, 600) + 12 : 12;
    if (strcmp(tool->name, "fleet_ask") != 0)
        return 0;
    t = ask_timeout_arg(args);
    /* the daemon ends a question at its expiresAt, on its once-a-second round */
    return t > 0 ? t + 2 : 0;
}

json_t *mt_ask(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"to", "body", "timeout", NULL};
    json_t *err = mt_only_keys(args, "fleet_ask", keys);
    json_t *jto = json_object_get(args, "to"), *jbody = json_object_get(args, "body"), *j;
    const char *to;
    char what[160], *path, *payload, *answer = NULL;
    size_t alen;
    int timeout = ask_timeout_arg(args), e;
    mcp_ask_fate fate;

    if (err)
        return err;
    if (!json_is_string(jto) || !json_is_string(jbody))
        return mt_fail("fleet_ask: needs `to` (a coord_id or gid) and `body` (the question), both "
                       "strings");
    if (timeout < 0)
        return mt_fail("fleet_ask: timeout must be a whole number of seconds from 1 to %d",
                       MCP_ASK_MAX);
    to = json_string_value(jto);
    if (w->as && !strcmp(to, w->as))
        return mt_fail("fleet_ask: '%s' is yourself; nothing was sent", to);
    snprintf(what, sizeof what, "fleet_ask to %s", to);
    if (json_string_length(jbody) == 0)
        return mt_fail("%s: the question is empty, so nothing was sent", what);
    if ((e = mt_who_me(w)))
        return mt_fail_errno(w, e, "fleet_ask", NULL, NULL);
    /* the lead asks through peers/ or agents/<gid>/ask; an agent through
     * its own to/<to>.ask.json, so that it asks (and is answered) as itself */
    path = !id_valid(to) ? NULL
           : w->as       ? g_strdup_printf("%s/agents/%s/to/%s.ask.json", w->mnt, w->as, to)
                         : mcp_ask_path(w->mnt, to, true);
    if (!path)
        return mt_fail(
            "fleet_ask: '%s' is not a lead's coord_id or an agent's gid (name@coord_id); "
            "a group has many answers: use fleet_send for it; nothing was sent",
            to);
    j = json_pack("{s:O,s:i}", "body", jbody, "expiresIn", timeout);
    payload = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    fate = mcp_ask_run(path, payload, strlen(payload), (timeout + 2) * 1000, &answer, &alen, &e);
    free(payload);
    g_free(path);
    switch (fate) {
    case MA_ANSWERED:
        j = json_pack("{s:b,s:s,s:s%}", "answered", 1, "from", to, "answer", answer, alen);
        g_free(answer);
        return mt_ok_json(j);
    case MA_TIMED_OUT:
        return mt_fail("%s: no answer within %d s: the question expired (fleet_sent says so); an "
                       "answer that comes later arrives in fleet_inbox",
                       what, timeout);
    case MA_REFUSED: {
        char sp[PATH_MAX + 8], words[400];
        snprintf(sp, sizeof sp, "%s/sent", w->home);
        mcp_ask_refusal_words(sp, to, words, sizeof words);
        return mt_fail("%s: %s refused the question (%s); nobody will answer it, nothing to wait "
                       "for, and asking again will not help until that is fixed",
                       what, to, words[0] ? words : "fleet_sent says why");
    }
    case MA_CANCELLED:
        return mt_fail("%s: cancelled by the client before an answer came; the question stays "
                       "asked until its expiresAt, and an answer that comes arrives in "
                       "fleet_inbox as an ordinary reply (fleet_sent follows the question)",
                       what);
    case MA_NO_WORD:
        return mt_fail("%s: the mount said nothing within %d s, not even that the question "
                       "expired: its daemon may be hung; tell your operator",
                       what, timeout + 2);
    case MA_NO_PEER:
        return mt_fail_errno(w, ENOENT, what, to, NULL);
    default:
        return mt_fail_errno(w, e ? e : EIO, what, to, NULL);
    }
}

/* ---- fleetfs ask ---------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to, "usage: fleetfs ask [MOUNTPOINT] [--timeout DURATION] PEER TEXT\n"
                "\n"
                "Asks PEER (a lead's coord_id, or an agent's gid name@coord_id) the question\n"
                "TEXT through MOUNTPOINT's ask file and prints the answer: the reply whose\n"
                "replyTo is the question.  It waits until the answer comes or the question's\n"
                "lifetime ends: --timeout (1s to message_ttl, e.g. 90s, 5m), else the mount's\n"
                "ask_timeout (2m).  Without MOUNTPOINT: $FLEET, else your only fleetfs mount.\n"
                "Exit status: 0 answered, 3 no such peer, 4 no answer in time (the question\n"
                "expired), 5 refused (not sent: see the message; or its receiver refused it),\n"
                "6 unknown (the send timed out: the question may be out, its answer would\n"
                "arrive as an ordinary reply), 1 any other failure, 2 usage.\n");
}

/* the message for a fate that is not an answer */
static void say(mcp_ask_fate fate, int err, const char *to, const char *mnt)
{
    switch (fate) {
    case MA_NO_PEER:
        fprintf(stderr, "fleetfs ask: no such peer or agent: %s (ls %s/peers %s/agents)\n", to, mnt,
                mnt);
        break;
    case MA_NOT_ASKED:
        fprintf(stderr, "fleetfs ask: the question was not sent: %s%s\n", fe_errno_text(err),
                err == OS_ECOMM ? " (the broker is not connected; try again later)"
                : err == EINVAL ? " (empty, not UTF-8, or a bad --timeout)"
                                : "");
        break;
    case MA_UNKNOWN:
        fprintf(stderr,
                "fleetfs ask: no confirm from the broker in time: the question may or may not "
                "have been sent (its sent entry is unconfirmed); an answer would arrive as an "
                "ordinary reply\n");
        break;
    case MA_TIMED_OUT:
        fprintf(stderr,
                "fleetfs ask: no answer from %s within the question's lifetime; the question "
                "is expired (an answer that comes later arrives as an ordinary reply)\n",
                to);
        break;
    case MA_REFUSED: {
        char *sp = g_strdup_printf("%s/self/sent", mnt), words[400];
        mcp_ask_refusal_words(sp, to, words, sizeof words);
        fprintf(stderr,
                "fleetfs ask: %s refused the question (%s); nobody will answer it, and asking "
                "again will not help until that is fixed (e.g. %s does not trust this host's "
                "key)\n",
                to, words[0] ? words : "its sent entry says why", to);
        g_free(sp);
        break;
    }
    default:
        fprintf(stderr, "fleetfs ask: %s\n", fe_errno_text(err));
        break;
    }
}

int mcp_ask_main(int argc, char **argv)
{
    const char *pos[3], *timeout = NULL;
    int npos = 0, err, code;
    char *mnt, *path, *data, *answer = NULL;
    size_t len, alen;
    int64_t ms;
    mcp_ask_fate fate;

    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc && !timeout) {
            timeout = argv[++i];
        } else if (g_str_has_prefix(argv[i], "--timeout=") && !timeout) {
            timeout = argv[i] + strlen("--timeout=");
        } else if ((argv[i][0] == '-' && argv[i][1]) || npos == 3) {
            fprintf(stderr, "fleetfs ask: unexpected '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos < 2) {
        usage(stderr);
        return 2;
    }
    if (timeout && (parse_duration(timeout, &ms) < 0 || ms < 1000)) {
        fprintf(stderr, "fleetfs ask: --timeout %s: give a duration of at least 1s, e.g. 90s\n",
                timeout);
        return 2;
    }
    if (!*pos[npos - 1]) {
        fprintf(stderr, "fleetfs ask: the question is empty: nothing was sent\n");
        return 5;
    }
    mnt = mcp_pick_mount(npos == 3 ? pos[0] : NULL, "ask");
    if (!mnt)
        return 2;
    path = mcp_ask_path(mnt, pos[npos - 2], timeout != NULL);
    if (!path) {
        fprintf(stderr,
                "fleetfs ask: '%s' is not a lead's coord_id or an agent's gid (name@coord_id); "
                "a group has many answers: send to it instead\n",
                pos[npos - 2]);
        g_free(mnt);
        return 2;
    }
    if (timeout) {
        json_t *j = json_pack("{s:s,s:s}", "body", pos[npos - 1], "expiresIn", timeout);
        data = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!data) {
            fprintf(stderr, "fleetfs ask: TEXT is not UTF-8 text\n");
            g_free(path);
            g_free(mnt);
            return 5;
        }
    } else {
        data = strdup(pos[npos - 1]);
    }
    len = strlen(data);
    fate = mcp_ask_run(path, data, len, -1, &answer, &alen, &err);
    if (fate == MA_ANSWERED) {
        fwrite(answer, 1, alen, stdout);
        if (alen == 0 || answer[alen - 1] != '\n')
            putchar('\n');
    } else {
        say(fate, err, pos[npos - 2], mnt);
    }
    code = fate == MA_ANSWERED                          ? 0
           : fate == MA_NO_PEER                         ? 3
           : fate == MA_TIMED_OUT                       ? 4
           : fate == MA_NOT_ASKED || fate == MA_REFUSED ? 5
           : fate == MA_UNKNOWN                         ? 6
                                                        : 1;
    free(data);
    g_free(answer);
    g_free(path);
    g_free(mnt);
    return code;
}
