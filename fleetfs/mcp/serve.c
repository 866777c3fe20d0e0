/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/serve.c — `fleetfs mcp [MOUNTPOINT] [--as GID]`: read
 * JSON-RPC lines on stdin, answer on stdout (rpc.c), run the tools on the
 * mount (tools.c), for the lead or, with --as, for one local agent.
 *
 * stdout carries protocol lines only; every log line goes to stderr, which
 * MCP clients keep as the server's log.  Requests are answered one at a
 * time, in order.
 *
 * Never a hang past send_timeout: a tool runs in a thread of its own, and
 * the loop waits for it at most send_timeout (read from the mount's root
 * status, 5 s until known) plus a margin.  A daemon that does not answer
 * in that time (hung, or stopped with SIGSTOP) gets the agent an error
 * result saying the outcome is unknown, and the thread is left to finish
 * (or stay blocked in the kernel) on its own: nothing it holds is shared.
 * After STUCK_MAX such threads, calls are refused at once, so a dead mount
 * cannot pile up threads.
 *
 * Which mount: the argument; else $FLEET; else this user's only
 * fuse.fleetfs mount in /proc/self/mountinfo; else /fleet.
 *
 * --as GID is checked once at start (agents/<gid>/inbox exists only for a
 * local agent of this mount), so a wrong gid is an error the operator
 * sees when registering the server, not a failure of every later call.
 * That check is the one touch of the mount before the first request, and
 * it too is bounded: a hung daemon gets a refusal, not a hung start.
 */
#include "fleetfs/mcp/serve.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <jansson.h>

#include "fleetfs/base/log.h"
#include "fleetfs/mcp/rpc.h"
#include "fleetfs/mcp/tools.h"

#define DEFAULT_SEND_TIMEOUT_S 5
#define MARGIN_S 3
#define STUCK_MAX 4

typedef struct {
    char *mnt;
    const char *as;      /* --as: the local agent's gid; NULL: the lead */
    gint send_timeout_s; /* 0 until read from the mount */
    gint stuck;          /* abandoned tool threads still running */
    mcp_fleet *fleet;    /* never freed: an abandoned thread may use it */
} server;

typedef struct {
    gint ref;
    GMutex m;
    GCond c;
    bool done;
    bool abandoned;
    gint64 timeout_known_at; /* when send_timeout was known; 0: not yet */
    server *srv;
    char *name;
    json_t *args; /* the worker's own copy */
    json_t *res;
} job;

static void job_unref(job *j)
{
    if (!g_atomic_int_dec_and_test(&j->ref))
        return;
    if (j->res)
        json_decref(j->res);
    if (j->args)
        json_decref(j->args);
    g_free(j->name);
    g_mutex_clear(&j->m);
    g_cond_clear(&j->c);
    g_free(j);
}

static gpointer job_run(gpointer p)
{
    job *j = p;
    json_t *res;
    if (g_atomic_int_get(&j->srv->send_timeout_s) == 0) {
        int t = mcp_fleet_send_timeout(j->srv->mnt);
        if (t > 0)
            g_atomic_int_set(&j->srv->send_timeout_s, t);
    }
    /* the caller's deadline counts from here, with what was read */
    g_mutex_lock(&j->m);
    j->timeout_known_at = g_get_monotonic_time();
    g_cond_signal(&j->c);
    g_mutex_unlock(&j->m);
    res = mcp_fleet_call(j->srv->fleet, j->name, j->args);
    g_mutex_lock(&j->m);
    j->res = res;
    j->done = true;
    if (j->abandoned) {
        g_atomic_int_add(&j->srv->stuck, -1);
        log_info("mcp: %s answered after its deadline; its result was dropped", j->name);
    }
    g_cond_signal(&j->c);
    g_mutex_unlock(&j->m);
    job_unref(j);
    return NULL;
}

/* the rpc layer's tool callback: run it, but never wait past the deadline */
static json_t *bounded_call(void *ud, const char *name, json_t *args)
{
    server *srv = ud;
    int t, wait_s = DEFAULT_SEND_TIMEOUT_S + MARGIN_S;
    gint64 start = g_get_monotonic_time(), deadline;
    json_t *res = NULL;
    GThread *th;
    GError *err = NULL;
    job *j;

    if (g_atomic_int_get(&srv->stuck) >= STUCK_MAX) {
        char *msg = g_strdup_printf(
            "%s: not tried: the fleetfs mount at %s has not answered %d earlier calls (its daemon "
            "seems hung); tell your operator (fleetfs's log; the mount may need a restart)",
            name, srv->mnt, STUCK_MAX);
        res = mcp_result_text(msg, true);
        g_free(msg);
        return res;
    }
    j = g_new0(job, 1);
    j->ref = 2;
    g_mutex_init(&j->m);
    g_cond_init(&j->c);
    j->srv = srv;
    j->name = g_strdup(name);
    j->args = json_deep_copy(args);
    th = g_thread_try_new("mcp-tool", job_run, j, &err);
    if (!th) {
        char *msg = g_strdup_printf("%s: could not start (%s); try again", name, err->message);
        g_error_free(err);
        j->ref = 1;
        job_unref(j);
        res = mcp_result_text(msg, true);
        g_free(msg);
        return res;
    }
    g_thread_unref(th);
    g_mutex_lock(&j->m);
    for (;;) {
        /* until send_timeout is known (the first call reads it), the
         * default bounds that read; then send_timeout does, from then */
        t = g_atomic_int_get(&srv->send_timeout_s);
        wait_s = (j->timeout_known_at && t > 0 ? t : DEFAULT_SEND_TIMEOUT_S) + MARGIN_S;
        deadline = (j->timeout_known_at ? j->timeout_known_at : start) +
                   (gint64)wait_s * G_TIME_SPAN_SECOND;
        if (j->done || g_get_monotonic_time() >= deadline)
            break;
        g_cond_wait_until(&j->c, &j->m, deadline);
    }
    if (j->done) {
        res = j->res;
        j->res = NULL;
    } else {
        j->abandoned = true;
        g_atomic_int_inc(&srv->stuck);
    }
    g_mutex_unlock(&j->m);
    job_unref(j);
    if (!res) {
        char *msg = g_strdup_printf(
            "%s: the fleetfs mount at %s did not answer within %d s (send_timeout + %d s): its "
            "daemon may be hung, and whether this call took effect is unknown. Check fleet_sent "
            "(for a send) before trying again, and tell your operator (fleetfs's log)",
            name, srv->mnt, wait_s, MARGIN_S);
        log_warn("mcp: %s: no answer from %s within %d s; reported to the client as unknown", name,
                 srv->mnt, wait_s);
        res = mcp_result_text(msg, true);
        g_free(msg);
    }
    return res;
}

/* ---- which mount ------------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static char *unescape(const char *s)
{
    GString *o = g_string_new(NULL);
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
            g_string_append_c(o, (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0')));
            s += 3;
        } else {
            g_string_append_c(o, *s);
        }
    }
    return g_string_free(o, FALSE);
}

/* this user's fuse.fleetfs mount points */
static GPtrArray *own_mounts(void)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    char *text = NULL, uid_opt[40];
    snprintf(uid_opt, sizeof uid_opt, "user_id=%u", (unsigned)getuid());
    if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
        return out;
    gchar **lines = g_strsplit(text, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        const char *sep = strstr(*l, " - ");
        gchar **f, **after;
        if (!sep)
            continue;
        f = g_strsplit(*l, " ", 6);
        after = g_strsplit(sep + 3, " ", 3);
        if (g_strv_length(f) >= 5 && g_strv_length(after) >= 3 &&
            !strcmp(after[0], "fuse.fleetfs")) {
            gchar **opts = g_strsplit(after[2], ",", -1);
            for (gchar **o = opts; *o; o++)
                if (!strcmp(*o, uid_opt))
                    g_ptr_array_add(out, unescape(f[4]));
            g_strfreev(opts);
        }
        g_strfreev(f);
        g_strfreev(after);
    }
    g_strfreev(lines);
    g_free(text);
    return out;
}

static char *pick_mount(const char *arg)
{
    const char *env = getenv("FLEET");
    GPtrArray *m;
    char *pick;
    if (arg)
        return g_strdup(arg);
    if (env && *env)
        return g_strdup(env);
    m = own_mounts();
    if (m->len > 1) {
        fprintf(stderr, "fleetfs mcp: %u fleetfs mounts of yours (", m->len);
        for (guint i = 0; i < m->len; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", (char *)m->pdata[i]);
        fprintf(stderr, "); name one: fleetfs mcp MOUNTPOINT\n");
        g_ptr_array_free(m, TRUE);
        return NULL;
    }
    pick = g_strdup(m->len == 1 ? m->pdata[0] : "/fleet");
    g_ptr_array_free(m, TRUE);
    return pick;
}

/* ---- --as --------------------------------------------------------------- */

typedef struct {
    gint ref;
    char *mnt, *gid;
    char *why; /* set once done: "" when gid is a local agent */
} as_check;

static void as_check_unref(as_check *c)
{
    if (!g_atomic_int_dec_and_test(&c->ref))
        return;
    g_free(c->mnt);
    g_free(c->gid);
    g_free(g_atomic_pointer_get(&c->why));
    g_free(c);
}

static gpointer as_check_run(gpointer p)
{
    as_check *c = p;
    char *why = mcp_fleet_check_as(c->mnt, c->gid);
    g_atomic_pointer_set(&c->why, why ? why : g_strdup(""));
    as_check_unref(c);
    return NULL;
}

/* NULL when gid is a local agent of mnt; else why not (g_free).  Waits
 * for the mount at most DEFAULT_SEND_TIMEOUT_S + MARGIN_S. */
static char *check_as(const char *mnt, const char *gid)
{
    as_check *c = g_new0(as_check, 1);
    gint64 deadline =
        g_get_monotonic_time() + (gint64)(DEFAULT_SEND_TIMEOUT_S + MARGIN_S) * G_TIME_SPAN_SECOND;
    GThread *th;
    char *why = NULL;
    c->ref = 2;
    c->mnt = g_strdup(mnt);
    c->gid = g_strdup(gid);
    th = g_thread_try_new("mcp-as", as_check_run, c, NULL);
    if (!th) {
        c->ref = 1;
        as_check_unref(c);
        return g_strdup("could not start a thread to check it");
    }
    g_thread_unref(th);
    while (!g_atomic_pointer_get(&c->why) && g_get_monotonic_time() < deadline)
        g_usleep(20 * 1000);
    if (!g_atomic_pointer_get(&c->why))
        why = g_strdup_printf("the fleetfs mount at %s did not answer within %d s (its daemon "
                              "may be hung); tell your operator",
                              mnt, DEFAULT_SEND_TIMEOUT_S + MARGIN_S);
    else if (*(char *)g_atomic_pointer_get(&c->why))
        why = g_strdup(g_atomic_pointer_get(&c->why));
    as_check_unref(c);
    return why;
}

/* ---- main -------------------------------------------------------------- */

/* One line of in, without its newline, into line; -1 at the end of input
 * (or a read error: ferror tells).  A line over MCP_LINE_MAX is read on to
 * its newline and dropped (*too_long), so memory stays bounded whatever
 * the client sends. */
static ssize_t read_line(FILE *in, GString *line, bool *too_long)
{
    int c;
    bool any = false;
    g_string_truncate(line, 0);
    *too_long = false;
    while ((c = getc_unlocked(in)) != EOF) {
        any = true;
        if (c == '\n')
            break;
        if (*too_long)
            continue;
        if (line->len >= MCP_LINE_MAX) {
            *too_long = true;
            g_string_truncate(line, 0);
            continue;
        }
        g_string_append_c(line, (char)c);
    }
    if (!any || (c == EOF && ferror(in)))
        return -1;
    return (ssize_t)line->len;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: fleetfs mcp [MOUNTPOINT] [--as GID]\n"
                "\n"
                "A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per\n"
                "line; MCP revisions " MCP_V_CURRENT ", " MCP_V_PREVIOUS " and " MCP_V_OLDER ")\n"
                "for the agent of this host's lead.  Its tools (fleet_send, fleet_list,\n"
                "fleet_inbox, fleet_ack, fleet_sent, fleet_status) work through the mounted\n"
                "files only: no broker login, no key.  MOUNTPOINT: the fleetfs mount; default\n"
                "$FLEET, else your only fleetfs mount, else /fleet.  Register it with e.g.\n"
                "  claude mcp add fleet -- fleetfs mcp /fleet\n"
                "--as GID: the server of the local agent GID (name@coord_id) instead: it\n"
                "sends as that agent (agents/GID/to/) and reads its home (agents/GID/).\n"
                "A GID that is not a local agent of the mount is refused at start.\n");
}

int mcp_main(int argc, char **argv)
{
    const char *arg = NULL, *as = NULL;
    server srv = {0};
    mcp_rpc *r;
    GString *line = g_string_new(NULL);
    char *instr;
    ssize_t n;
    int rc = 0;

    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--as") || g_str_has_prefix(argv[i], "--as=")) {
            if (as || (argv[i][4] == '\0' && i + 1 >= argc)) {
                fprintf(stderr, "fleetfs mcp: --as takes one gid (name@coord_id)\n");
                usage(stderr);
                return 2;
            }
            as = argv[i][4] == '=' ? argv[i] + 5 : argv[++i];
        } else if (argv[i][0] == '-' || arg) {
            fprintf(stderr, "fleetfs mcp: unexpected '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            arg = argv[i];
        }
    }
    srv.mnt = pick_mount(arg);
    if (!srv.mnt)
        return 2;
    if (as) {
        char *why = check_as(srv.mnt, as);
        if (why) {
            fprintf(stderr, "fleetfs mcp: --as %s refused: %s\n", as, why);
            g_free(why);
            g_free(srv.mnt);
            return 2;
        }
        srv.as = as;
    }
    /* a client gone (stdout closed) is an error to see, not a death */
    signal(SIGPIPE, SIG_IGN);
    /* nothing else here touches the mount: a hung daemon would hang us
     * before the first request (each tool call is bounded instead) */
    if (as) {
        log_info("mcp: serving the fleet mount %s on stdio for the local agent %s", srv.mnt, as);
        instr = g_strdup_printf(
            "You are the agent %s of this fleet. These tools message the leads, agents and "
            "groups of the fleet as you, through the fleetfs mount at %s: fleet_list shows who "
            "is there, fleet_send sends, fleet_inbox and fleet_ack read and consume what arrived "
            "for you, fleet_sent follows delivery. A failed call says why and what to do.",
            as, srv.mnt);
    } else {
        log_info("mcp: serving the fleet mount %s on stdio", srv.mnt);
        instr = g_strdup_printf(
            "These tools message the other leads, the agents and the groups of this agent fleet "
            "through the fleetfs mount at %s: fleet_list shows who is there, fleet_send sends, "
            "fleet_inbox and fleet_ack read and consume what arrived, fleet_sent follows "
            "delivery. A failed call says why and what to do.",
            srv.mnt);
    }
    srv.fleet = mcp_fleet_new(srv.mnt, srv.as);
    r = mcp_rpc_new(mcp_fleet_tools, mcp_fleet_ntools, bounded_call, &srv, FLEETFS_VERSION, instr);
    g_free(instr);
    for (;;) {
        char *out;
        bool too_long;
        n = read_line(stdin, line, &too_long);
        if (n < 0)
            break;
        if (too_long) {
            log_warn("mcp: an input line longer than " MCP_LINE_MAX_TEXT
                     "; answered -32600 and skipped");
            out = mcp_rpc_error_line(MCP_INVALID_REQUEST,
                                     "Invalid Request: the line is longer than " MCP_LINE_MAX_TEXT
                                     "; it was skipped unread (one JSON-RPC message a line)");
        } else {
            out = mcp_rpc_line(r, line->str, line->len);
        }
        if (!out)
            continue;
        if (fputs(out, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
            log_warn("mcp: cannot write to the client (%s); stopping", strerror(errno));
            free(out);
            rc = 1;
            break;
        }
        free(out);
    }
    if (ferror(stdin)) {
        log_err("mcp: cannot read stdin (%s); stopping: the client cannot reach this server",
                strerror(errno));
        rc = 1;
    } else if (rc == 0) {
        log_info("mcp: the client closed stdin; done");
    }
    g_string_free(line, TRUE);
    mcp_rpc_free(r);
    g_free(srv.mnt);
    /* a tool thread may still be blocked in the kernel: do not wait for it */
    fflush(stdout);
    _exit(rc);
}
