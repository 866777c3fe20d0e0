/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/serve.c — `fleetfs mcp [MOUNTPOINT] [--as GID]`: read
 * JSON-RPC lines on stdin, answer on stdout (rpc.c), run the tools on the
 * mount (tools.c), for the lead or, with --as, for one local agent.
 *
 * stdout carries protocol lines only; every log line goes to stderr, which
 * MCP clients keep as the server's log.  Requests are answered one at a
 * time, in order; while one runs, a notifications/cancelled for it is
 * honoured (cancel.c): it gets no response and the next is read at once.
 *
 * Never a hang past send_timeout: every touch of the mount is a call with
 * a deadline (dcall_run: a thread of its own, waited for until the
 * deadline), the --as check and each tool alike.  A tool call waits at most
 * send_timeout (read from the mount's root status by the call's own
 * thread, the clock starting once it is read; 5 s until known) plus a
 * margin.  A daemon that does not answer
 * in that time (hung, or stopped with SIGSTOP) gets the agent an error
 * result saying the outcome is unknown, and the thread is left to finish
 * (or stay blocked in the kernel) on its own: nothing it holds is shared.
 * After STUCK_MAX such threads, calls are refused at once, so a dead mount
 * cannot pile up threads.
 *
 * Which mount: mount.c (the argument; else $FLEET; else this user's only
 * fuse.fleetfs mount; else /fleet).
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
#include "fleetfs/mcp/mount.h"
#include "fleetfs/mcp/cancel.h"
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
    mcp_in *in;          /* the client's lines (cancel.c) */
    json_t *call_id;     /* the running tools/call's id; NULL: none */
    bool cancelled;      /* the client cancelled it: no response */
} server;

/* While a call runs: a notifications/cancelled for it fires its
 * cancellation; any other line is kept for after the call. */
static void watch_input(server *srv)
{
    mcp_in_line *l;
    while ((l = mcp_in_fresh(srv->in))) {
        if (srv->call_id && mcp_is_cancel_of(l, srv->call_id)) {
            char *id = json_dumps(srv->call_id, JSON_ENCODE_ANY);
            log_info("mcp: the client cancelled request %s; it gets no response (a fleet_ask's "
                     "answer, when it comes, goes to the inbox)",
                     id ? id : "?");
            free(id);
            srv->cancelled = true;
            mcp_cancel_fire();
            mcp_in_line_free(l);
            continue;
        }
        mcp_in_putback(srv->in, l); /* read in order after the call */
    }
}

/* ---- a call with a deadline --------------------------------------------
 *
 * The one way this server waits for the mount: fn runs in a thread of its
 * own, the caller waits for it until a deadline and no longer.  The
 * worker may move the deadline once it knows more (dcall_restart: a tool
 * call's clock starts when send_timeout has been read).  A call not done
 * by its deadline is abandoned: the caller goes on, and the worker frees
 * its own result when it finishes (or stays blocked in the kernel; the
 * counter `stuck` says how many do). */

typedef struct dcall dcall;
typedef void *(*dcall_fn)(dcall *dc, void *arg);

struct dcall {
    gint ref;
    GMutex m;
    GCond c;
    bool done, abandoned;
    gint64 deadline; /* monotonic, microseconds */
    dcall_fn fn;
    void *arg;
    void (*free_arg)(void *);
    void (*free_res)(void *);
    void *res;
    gint *stuck; /* NULL: not counted */
    const char *what;
};

static void dcall_unref(dcall *dc)
{
    if (!g_atomic_int_dec_and_test(&dc->ref))
        return;
    if (dc->res && dc->free_res)
        dc->free_res(dc->res);
    if (dc->arg && dc->free_arg)
        dc->free_arg(dc->arg);
    g_mutex_clear(&dc->m);
    g_cond_clear(&dc->c);
    g_free(dc);
}

/* from the worker: the deadline is now + budget_us */
static void dcall_restart(dcall *dc, gint64 budget_us)
{
    g_mutex_lock(&dc->m);
    dc->deadline = g_get_monotonic_time() + budget_us;
    g_cond_signal(&dc->c);
    g_mutex_unlock(&dc->m);
}

static gpointer dcall_thread(gpointer p)
{
    dcall *dc = p;
    void *res = dc->fn(dc, dc->arg);
    g_mutex_lock(&dc->m);
    dc->res = res;
    dc->done = true;
    if (dc->abandoned) {
        if (dc->stuck)
            g_atomic_int_add(dc->stuck, -1);
        log_info("mcp: %s answered after its deadline; its result was dropped", dc->what);
    }
    g_cond_signal(&dc->c);
    g_mutex_unlock(&dc->m);
    dcall_unref(dc);
    return NULL;
}

/* Runs fn(arg) and waits at most budget_us (or what the worker restarts
 * it to).  The result, or NULL when the deadline passed first (*late set)
 * or no thread could start (*late clear, *why set: g_free).  arg is the
 * call's: free_arg frees it whenever the last user is done. */
static void *dcall_run(const char *what, dcall_fn fn, void *arg, void (*free_arg)(void *),
                       void (*free_res)(void *), gint64 budget_us, gint *stuck, bool *late,
                       char **why, server *watch)
{
    dcall *dc = g_new0(dcall, 1);
    GError *err = NULL;
    GThread *th;
    void *res = NULL;

    *late = false;
    *why = NULL;
    dc->ref = 2;
    g_mutex_init(&dc->m);
    g_cond_init(&dc->c);
    dc->fn = fn;
    dc->arg = arg;
    dc->free_arg = free_arg;
    dc->free_res = free_res;
    dc->stuck = stuck;
    dc->what = what; /* a string that outlives the call (a tool's name) */
    dc->deadline = g_get_monotonic_time() + budget_us;
    th = g_thread_try_new("mcp-call", dcall_thread, dc, &err);
    if (!th) {
        *why = g_strdup(err->message);
        g_error_free(err);
        dc->ref = 1;
        dcall_unref(dc);
        return NULL;
    }
    g_thread_unref(th);
    g_mutex_lock(&dc->m);
    while (!dc->done && g_get_monotonic_time() < dc->deadline) {
        gint64 slice = g_get_monotonic_time() + G_TIME_SPAN_SECOND / 10;
        g_cond_wait_until(&dc->c, &dc->m, watch ? MIN(slice, dc->deadline) : dc->deadline);
        if (watch && !dc->done) {
            /* the client's lines meanwhile: a cancellation of this call */
            g_mutex_unlock(&dc->m);
            watch_input(watch);
            g_mutex_lock(&dc->m);
        }
    }
    if (dc->done) {
        res = dc->res;
        dc->res = NULL;
    } else {
        dc->abandoned = true;
        *late = true;
        if (stuck)
            g_atomic_int_inc(stuck);
    }
    g_mutex_unlock(&dc->m);
    dcall_unref(dc);
    return res;
}

/* ---- tool calls ---------------------------------------------------------- */

typedef struct {
    server *srv;
    const mcp_tool *tool;
    json_t *args; /* the worker's own copy */
} tool_job;

static void tool_job_free(void *p)
{
    tool_job *j = p;
    json_decref(j->args);
    g_free(j);
}

static void free_json(void *p)
{
    json_decref(p);
}

static void *tool_run(dcall *dc, void *p)
{
    tool_job *j = p;
    int t = g_atomic_int_get(&j->srv->send_timeout_s);
    if (t == 0) {
        t = mcp_fleet_send_timeout(j->srv->mnt);
        if (t > 0)
            g_atomic_int_set(&j->srv->send_timeout_s, t);
    }
    /* the deadline counts from here, with what was read */
    dcall_restart(dc, (gint64)((t > 0 ? t : DEFAULT_SEND_TIMEOUT_S) + MARGIN_S +
                               mcp_fleet_wait_s(j->tool, j->args)) *
                          G_TIME_SPAN_SECOND);
    return mcp_fleet_call(j->srv->fleet, j->tool, j->args);
}

/* the rpc layer's tool callback: run it, but never wait past the deadline
 * (the default bound until send_timeout is read, then send_timeout + the
 * margin from that moment) */
static json_t *bounded_call(void *ud, const mcp_tool *tool, json_t *args)
{
    server *srv = ud;
    tool_job *j;
    json_t *res;
    bool late;
    char *why, *msg;
    int t;

    if (g_atomic_int_get(&srv->stuck) >= STUCK_MAX) {
        msg = g_strdup_printf(
            "%s: not tried: the fleetfs mount at %s has not answered %d earlier calls (its daemon "
            "seems hung); tell your operator (fleetfs's log; the mount may need a restart)",
            tool->name, srv->mnt, STUCK_MAX);
        res = mcp_result_text(msg, true);
        g_free(msg);
        return res;
    }
    j = g_new0(tool_job, 1);
    j->srv = srv;
    j->tool = tool;
    j->args = json_deep_copy(args);
    res = dcall_run(tool->name, tool_run, j, tool_job_free, free_json,
                    (gint64)(DEFAULT_SEND_TIMEOUT_S + MARGIN_S) * G_TIME_SPAN_SECOND, &srv->stuck,
                    &late, &why, srv);
    if (res)
        return res;
    if (!late) {
        msg = g_strdup_printf("%s: could not start (%s); try again", tool->name, why);
        g_free(why);
        res = mcp_result_text(msg, true);
        g_free(msg);
        return res;
    }
    t = g_atomic_int_get(&srv->send_timeout_s);
    t = (t > 0 ? t : DEFAULT_SEND_TIMEOUT_S) + MARGIN_S + mcp_fleet_wait_s(tool, args);
    msg = g_strdup_printf(
        "%s: the fleetfs mount at %s did not answer within %d s (send_timeout + %d s, and "
        "fleet_ask's timeout): its "
        "daemon may be hung, and whether this call took effect is unknown. Check fleet_sent "
        "(for a send) before trying again, and tell your operator (fleetfs's log)",
        tool->name, srv->mnt, t, MARGIN_S);
    log_warn("mcp: %s: no answer from %s within %d s; reported to the client as unknown",
             tool->name, srv->mnt, t);
    res = mcp_result_text(msg, true);
    g_free(msg);
    return res;
}

/* ---- --as --------------------------------------------------------------- */

typedef struct {
    char *mnt, *gid;
} as_job;

static void as_job_free(void *p)
{
    as_job *a = p;
    g_free(a->mnt);
    g_free(a->gid);
    g_free(a);
}

/* "" when gid is a local agent, else why not */
static void *as_run(dcall *dc, void *p)
{
    as_job *a = p;
    char *why = mcp_fleet_check_as(a->mnt, a->gid);
    (void)dc;
    return why ? why : g_strdup("");
}

/* NULL when gid is a local agent of mnt; else why not (g_free).  Waits
 * for the mount at most DEFAULT_SEND_TIMEOUT_S + MARGIN_S. */
static char *check_as(const char *mnt, const char *gid)
{
    as_job *a = g_new0(as_job, 1);
    char *res, *why;
    bool late;
    a->mnt = g_strdup(mnt);
    a->gid = g_strdup(gid);
    res = dcall_run("the --as check", as_run, a, as_job_free, g_free,
                    (gint64)(DEFAULT_SEND_TIMEOUT_S + MARGIN_S) * G_TIME_SPAN_SECOND, NULL, &late,
                    &why, NULL);
    if (late)
        return g_strdup_printf("the fleetfs mount at %s did not answer within %d s (its daemon "
                               "may be hung); tell your operator",
                               mnt, DEFAULT_SEND_TIMEOUT_S + MARGIN_S);
    if (!res) {
        char *m = g_strdup_printf("could not start a thread to check it (%s)", why);
        g_free(why);
        return m;
    }
    if (!*res) {
        g_free(res);
        return NULL;
    }
    return res;
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
    fprintf(to,
            "usage: fleetfs mcp [MOUNTPOINT] [--as GID]\n"
            "\n"
            "A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per\n"
            "line; MCP revisions " MCP_V_CURRENT ", " MCP_V_PREVIOUS " and " MCP_V_OLDER ")\n"
            "for the agent of this host's lead.  Its tools (fleet_send, fleet_ask, fleet_list,\n"
            "fleet_inbox, fleet_ack, fleet_sent, fleet_resend, fleet_status) work through the\n"
            "mounted files only: no broker login, no key.  MOUNTPOINT: the fleetfs mount; default\n"
            "$FLEET, else your only fleetfs mount, else /fleet.  Register it with e.g.\n"
            "  claude mcp add fleet -- fleetfs mcp /fleet\n"
            "--as GID: the server of the local agent GID (name@coord_id) instead: it\n"
            "writes that agent's send files (agents/GID/to/) and reads its home\n"
            "(agents/GID/). A GID that is not a local agent of the mount is refused at\n"
            "start. --as is a label, not an identity check: any process of the user who\n"
            "mounted it may start this server as any local agent (or write those files\n"
            "itself); a receiver knows only which host signed (doc/agents.md).\n");
}

int mcp_main(int argc, char **argv)
{
    const char *arg = NULL, *as = NULL;
    server srv = {0};
    mcp_rpc *r;
    char *instr;
    bool failed = false;
    int rc = 0, in_err = 0;

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
    srv.mnt = mcp_pick_mount(arg, "mcp");
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
            "is there, fleet_send sends, fleet_inbox reads what arrived for you (a page at a "
            "time) and fleet_ack consumes what fleet_inbox showed you, fleet_sent follows "
            "delivery and fleet_resend republishes an unconfirmed message. A failed call says why "
            "and what to do.",
            as, srv.mnt);
    } else {
        log_info("mcp: serving the fleet mount %s on stdio", srv.mnt);
        instr = g_strdup_printf(
            "These tools message the other leads, the agents and the groups of this agent fleet "
            "through the fleetfs mount at %s: fleet_list shows who is there, fleet_send sends, "
            "fleet_ask asks one question and waits for its answer, fleet_inbox reads what arrived "
            "(a page at a time) and fleet_ack consumes what "
            "fleet_inbox showed you, fleet_sent follows delivery and fleet_resend republishes an "
            "unconfirmed message. A failed call says why and what to do.",
            srv.mnt);
    }
    srv.fleet = mcp_fleet_new(srv.mnt, srv.as);
    r = mcp_rpc_new(mcp_fleet_tools, mcp_fleet_ntools, bounded_call, &srv, FLEETFS_VERSION, instr);
    g_free(instr);
    srv.in = mcp_in_start(stdin, read_line);
    for (;;) {
        char *out;
        mcp_in_line *l = mcp_in_next(srv.in, -1);
        if (!l->text) {
            failed = l->failed;
            in_err = l->err;
            mcp_in_line_free(l);
            break;
        }
        if (l->too_long) {
            log_warn("mcp: an input line longer than " MCP_LINE_MAX_TEXT
                     "; answered -32600 and skipped");
            out = mcp_rpc_error_line(MCP_INVALID_REQUEST,
                                     "Invalid Request: the line is longer than " MCP_LINE_MAX_TEXT
                                     "; it was skipped unread (one JSON-RPC message a line)");
        } else {
            srv.call_id = mcp_call_id(l);
            srv.cancelled = false;
            mcp_cancel_clear();
            out = mcp_rpc_line(r, l->text, l->len);
            json_decref(srv.call_id);
            srv.call_id = NULL;
            if (srv.cancelled) {
                free(out); /* a cancelled request gets no response */
                out = NULL;
            }
        }
        mcp_in_line_free(l);
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
    if (failed) {
        log_err("mcp: cannot read stdin (%s); stopping: the client cannot reach this server",
                strerror(in_err));
        rc = 1;
    } else if (rc == 0) {
        log_info("mcp: the client closed stdin; done");
    }
    mcp_rpc_free(r);
    g_free(srv.mnt);
    /* a tool thread may still be blocked in the kernel: do not wait for it */
    fflush(stdout);
    _exit(rc);
}
