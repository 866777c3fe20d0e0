/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/main.c — start-up order and shutdown (the command line and the
 * options are cmdline.c's).
 *
 * Start-up: options (config file, then -o), then in daemon mode a fork
 * whose parent waits for the child's verdict, so `fleetfs MNT` exits
 * non-zero when the mount did not come up.  The broker thread gets one
 * connect attempt before we mount: a broker that refuses our consumer
 * (another fleetfs has this coord_id) or our mailbox arguments is fatal
 * now, loudly; an unreachable broker is not — the tree is served and the
 * broker thread keeps trying.
 *
 * Wiring before threads: the broker connection is created without its
 * thread (br_new), the mailbox gets it through its seam, and only then do
 * the broker thread (br_run) and the receipts outbox (mb_start) start.
 *
 * Shutdown (SIGINT/SIGTERM via libfuse's handlers, or fusermount3 -u):
 * leave the FUSE loop, then stop_all: producers before consumers, nothing
 * freed while a thread that could reach it still runs (see stop_all).
 *
 * Presence (the roster thread, its own broker connection) starts once the
 * mailbox consumer was not refused, so a second fleetfs with our coord_id
 * never heartbeats as us, and stops first, after a leaving heartbeat.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "broker/conn.h"
#include "fleetfs/agents/agents.h"
#include "fleetfs/start/cmdline.h"
#include "fleetfs/face/fleet.h"
#include "fleetfs/base/log.h"
#include "fleetfs/mcp/ask.h"
#include "fleetfs/mcp/claim.h"
#include "fleetfs/mcp/serve.h"
#include "fleetfs/model/mailbox.h"
#include "fleetfs/start/hook.h"
#include "fleetfs/start/hostcmd.h"
#include "fleetfs/face/claims.h"
#include "fleetfs/face/hosts.h"
#include "fleetfs/face/notify.h"
#include "fleetfs/config/options.h"
#include "fleetfs/start/gone.h"
#include "fleetfs/start/sdnotify.h"
#include "fleetfs/spawn/spawnd.h"
#include "fleetfs/start/startup.h"
#include "fleetfs/store/statelock.h"
#include "fleetfs/wire/sign.h"
#include "fleetfs/face/tree.h"

#define FIRST_CONNECT_WAIT_MS 8000

static char **broker_uris(const fs_opts *o)
{
    return su_broker_uris(o, NULL);
}

/* ------------------------------------------------------------------ */
/* wiring                                                              */

static void hook_changed(void *ud, const char *relpath)
{
    fleet *f = ud;
    nt_changed(g_atomic_pointer_get(&f->nt), relpath);
}

static void hook_poll(void *ud, struct fuse_pollhandle *ph)
{
    fleet *f = ud;
    nt_poll_wake(g_atomic_pointer_get(&f->nt), ph);
}

static void hook_arrived(void *ud)
{
    fleet *f = ud;
    inj_kick(g_atomic_pointer_get(&f->inj));
}

static br_action cb_receipt(void *ud, uint64_t epoch, bool redelivered, const char *body,
                            size_t len)
{
    fleet *f = ud;
    return mb_receipt(f->mb, epoch, redelivered, body, len);
}

/* lead.<me>.dead: dead letters of this host's messages (model/dead.c). */
static br_action cb_dead(void *ud, const struct br_death *d, const char *body, size_t len)
{
    fleet *f = ud;
    return mb_dead_letter(f->mb, d, body, len);
}

/* control.<me>: handed to the control service's thread (spawnd.c). */
static br_action cb_control(void *ud, uint64_t epoch, uint64_t tag, bool redelivered,
                            const char *body, size_t len)
{
    fleet *f = ud;
    return spd_delivery(g_atomic_pointer_get(&f->spd), epoch, tag, redelivered, body, len);
}

/* Every mailbox's deliveries, the lead's (box 0) and each agent's. */
static br_action cb_deliver(void *ud, unsigned box, uint64_t epoch, uint64_t tag, bool redelivered,
                            const char *body, size_t len)
{
    fleet *f = ud;
    mailbox *mb = mb_find_box(f->mb, box);
    br_action a;
    if (!mb) /* a retired agent's last delivery: the broker takes it back */
        return BR_KEEP;
    a = mb_deliver(mb, epoch, tag, redelivered, body, len);
    mb_unref(mb);
    return a;
}

/* ---- service manager status (sdnotify.c) --------------------------------
 * STATUS= follows the broker line of the status file, URI redacted (the
 * broker thread keeps it so).  sd_br is set before br_run starts the
 * broker thread and cleared before br_stop. */
static br_conn *sd_br;

static void sd_broker_status(void)
{
    br_conn *b = g_atomic_pointer_get(&sd_br);
    br_status st;
    char text[1200];

    if (!sdn_enabled() || b == NULL)
        return;
    br_get_status(b, &st);
    if (st.link == BR_CONNECTED)
        st.reason[0] = '\0';
    if (st.link == BR_CONNECTED && st.blocked) { /* a resource alarm: sends fail ENOBUFS */
        snprintf(text, sizeof text, "broker: blocked: %s", st.blocked_reason);
        sdn_status(text);
        return;
    }
    if (st.uri[0] && strstr(st.reason, st.uri)) /* the reason names it already */
        st.uri[0] = '\0';
    snprintf(text, sizeof text, "broker: %s%s%s%s%s%s%s%s", br_link_name(st.link),
             st.reason[0] ? ": " : "", st.reason, st.uri[0] ? " (" : "", st.uri,
             st.uri[0] ? ")" : "",
             /* a start waiting out takeover_grace says so (systemctl status) */
             st.consumer == BR_CONS_WAITING ? "; consumer: " : "",
             st.consumer == BR_CONS_WAITING ? st.consumer_reason : "");
    sdn_status(text);
}
/* ---- end service manager status ------------------------------------------ */

static void cb_changed(void *ud)
{
    fleet *f = ud;
    char path[128];
    sd_broker_status();
    hook_changed(ud, "status");
    snprintf(path, sizeof path, "leads/%s/status", f->opts->coord_id);
    hook_changed(ud, path);
}

/* ---- presence wiring (doc/presence.md) ---- */

static void hook_entry(void *ud, const char *dir, const char *name, bool added)
{
    fleet *f = ud;
    nt_entry(g_atomic_pointer_get(&f->nt), dir, name, added);
}

static int hook_peer_live(void *ud, const char *peer, char *why, size_t n)
{
    fleet *f = ud;
    if (!f->pr)
        return -1;
    pr_address(f->pr, peer); /* fleet_view=groups: we send to it, so we hear it */
    return pr_liveness(f->pr, peer, why, n);
}

static void hook_heard_from(void *ud, const char *from)
{
    fleet *f = ud;
    if (f->pr)
        pr_address(f->pr, from); /* fleet_view=groups: it writes to us, so we hear it */
}

/* fleet_view=groups: tell the roster thread whom to hear (it binds and
 * unbinds only what changed), and ask a newly addressed lead for its
 * heartbeat. */
static void push_hear(fleet *f, const char *ask)
{
    char **groups, **leads;
    ro_conn *ro = g_atomic_pointer_get(&f->ro);
    if (!f->pr || !ro || !pr_scoped(f->pr))
        return;
    pr_hear_lists(f->pr, &groups, &leads);
    ro_wide(ro, pr_wide(f->pr)); /* fleet_view=auto not narrowed, or a census */
    ro_hear(ro, (const char *const *)groups, (const char *const *)leads);
    g_strfreev(groups);
    g_strfreev(leads);
    if (ask)
        ro_ask(ro, ask);
}

static void hook_hear(void *ud, const char *ask)
{
    push_hear(ud, ask);
}

static char **hook_group_members(void *ud, const char *g)
{
    fleet *f = ud;
    /* the agents' part comes right after presence, before any message */
    return f->ag ? ag_members(f->ag, g) : g_new0(char *, 1);
}

static char *ro_heartbeat(void *ud, bool leaving, size_t *len, int64_t *interval_ms,
                          int64_t *group_iv_ms)
{
    fleet *f = ud;
    char *w = mb_injector_words(f->mb);
    char *body = pr_heartbeat(f->pr, w, leaving, len);
    g_free(w);
    *interval_ms = pr_interval_ms(f->pr);
    *group_iv_ms = pr_group_interval_ms(f->pr);
    return body;
}

static void ro_received(void *ud, const char *rk, const char *body, size_t len)
{
    fleet *f = ud;
    pr_received(f->pr, rk, body, len);
}

static void ro_changed(void *ud, bool up)
{
    fleet *f = ud;
    ro_conn *ro = g_atomic_pointer_get(&f->ro);
    ro_status rs;
    pr_link(f->pr, up);
    /* a login that refuses the scoped bindings hears roster.# for good:
     * fleet_view=auto then lists the whole fleet too, never narrowed */
    if (ro) {
        ro_get_status(ro, &rs);
        if (rs.fallback)
            pr_whole_fleet(f->pr);
    }
}

/* The presence table and the roster thread, without its thread yet. */
static int presence_new(fleet *f, char **err)
{
    pr_hooks ph = {.changed = hook_changed, .entry = hook_entry, .hear = hook_hear, .ud = f};
    ro_callbacks rc = {
        .heartbeat = ro_heartbeat, .received = ro_received, .changed = ro_changed, .ud = f};
    ro_config cfg;
    char **uris = broker_uris(f->opts);

    f->pr = pr_new(f->opts, f->host, &ph, err);
    if (!f->pr) {
        g_strfreev(uris);
        return -1;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.uris = uris;
    cfg.vhost = f->opts->vhost;
    cfg.ca = f->opts->ca;
    cfg.coord_id = f->opts->coord_id;
    cfg.host = f->host;
    cfg.interval_ms = f->opts->heartbeat_ms;
    cfg.ttl_ms = 3 * f->opts->heartbeat_ms;
    cfg.uri_env = f->opts->broker_uri_env;
    cfg.scoped = pr_scoped(f->pr);
    cfg.self_every = ENV_HB_SELF_EVERY;
    g_atomic_pointer_set(&f->ro, ro_new(&cfg, &rc));
    f->cl = cl_new(f, uris);
    g_strfreev(uris);
    push_hear(f, NULL);
    return 0;
}

static void cb_late(void *ud, const char *peer, const char *msg_id, fe_code res, bool unread)
{
    fleet *f = ud;
    (void)peer;
    mb_late_confirm(f->mb, msg_id, res, unread);
}

/* The broker connection, set up without its thread: everything its
 * callbacks reach is wired before br_run starts it. */
static br_conn *broker_new(fleet *f)
{
    br_config bc;
    br_callbacks cb = {.deliver_box = cb_deliver,
                       .receipt = cb_receipt,
                       .control = cb_control,
                       .dead = cb_dead,
                       .changed = cb_changed,
                       .late_confirm = cb_late,
                       .ud = f};
    char **uris = broker_uris(f->opts);
    char **keys = ag_lead_keys(f->opts);
    br_conn *c;

    memset(&bc, 0, sizeof bc);
    bc.lead_bind_keys = (const char *const *)keys;
    bc.uris = uris;
    bc.vhost = f->opts->vhost;
    bc.coord_id = f->opts->coord_id;
    bc.queue_type = f->opts->queue_type;
    bc.max_length = f->opts->max_length;
    bc.message_ttl_ms = f->opts->message_ttl_ms;
    bc.agent_expires_ms = f->opts->agent_expires_ms;
    bc.prefetch = f->opts->prefetch;
    bc.ca = f->opts->ca;
    bc.host = f->host;
    bc.takeover_grace_ms = f->opts->takeover_grace_ms;
    bc.uri_env = f->opts->broker_uri_env;
    c = br_new(&bc, &cb);
    if (c && br_dead_consume(c) < 0) /* cannot fail with the callback set: said if it does */
        log_err("broker: cannot consume lead.%s.dead: dead letters of this host's messages do "
                "not come home",
                f->opts->coord_id);
    g_strfreev(uris);
    g_strfreev(keys);
    return c;
}

/* Daemon mode: the parent exits with the child's verdict. */
static int ready_fd = -1;

static void report(int ok, const char *msg)
{
    if (ready_fd < 0)
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%c%s", ok ? 'y' : 'n', msg ? msg : "");
    /* one write: the parent reads once */
    if (write(ready_fd, buf, (size_t)MIN(n, (int)sizeof buf - 1)) < 0)
        log_err("cannot report start-up to the parent process");
    close(ready_fd);
    ready_fd = -1;
}

static int daemonize(void)
{
    int p[2];
    pid_t pid;
    char buf[1024];
    ssize_t n;

    if (pipe(p) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        close(p[1]);
        n = read(p[0], buf, sizeof buf - 1);
        if (n > 0 && buf[0] == 'y')
            _exit(0);
        /* the child said why on stderr already (same terminal or log) */
        if (n <= 0)
            fprintf(stderr, "fleetfs: the daemon exited before mounting\n");
        _exit(1);
    }
    close(p[0]);
    ready_fd = p[1];
    if (setsid() < 0)
        return -1;
    /* do not keep the caller's directory (and its file system) busy */
    if (chdir("/") < 0)
        return -1;
    return 0;
}

static void quiet_stdio(void)
{
    FILE *n = freopen("/dev/null", "r", stdin);
    (void)n;
    /* stderr stays: it is the daemon's log (redirect it where you want it) */
}

static int fatal_consumer(fleet *f)
{
    br_status st;
    br_get_status(f->br, &st);
    if (st.consumer != BR_CONS_EXCLUSIVE && st.consumer != BR_CONS_MISMATCH)
        return 0;
    fprintf(stderr, "fleetfs: not mounting: %s\n", st.consumer_reason);
    report(0, st.consumer_reason);
    {
        char *text = g_strdup_printf("not mounting: %s", st.consumer_reason);
        sdn_status(text);
        g_free(text);
    }
    return -1;
}

/* An unmount that hangs is loud: stop_all names each of its steps, and a
 * watcher says which one it still waits for every STOP_WARN_MS (a test
 * once saw a daemon not exit for 15 s after fusermount3 -u with nothing
 * in its log). */
#define STOP_WARN_MS 3000
static struct {
    GMutex m;
    GCond cv;
    const char *step;
    int64_t since_us;
    bool done;
} stopw;

static gpointer stop_watch(gpointer unused)
{
    (void)unused;
    g_mutex_lock(&stopw.m);
    while (!stopw.done) {
        gint64 until = g_get_monotonic_time() + STOP_WARN_MS * 1000;
        if (!g_cond_wait_until(&stopw.cv, &stopw.m, until) && !stopw.done)
            log_warn("unmount: still waiting, after %lld s, for %s",
                     (long long)(g_get_monotonic_time() - stopw.since_us) / 1000000, stopw.step);
    }
    g_mutex_unlock(&stopw.m);
    return NULL;
}

static void stop_step(const char *step)
{
    g_mutex_lock(&stopw.m);
    stopw.step = step;
    stopw.since_us = g_get_monotonic_time();
    g_mutex_unlock(&stopw.m);
}

/* Once a second, on the notifier's thread (nt_start), before it compares
 * the status files: the model's timers, what our heartbeat says of the
 * agents, the control requests nobody answered, presence's staleness. */
static void each_second(void *ud)
{
    fleet *f = ud;
    mb_tick(f->mb);
    ag_announce(f->ag); /* the agents' states, for the heartbeat */
    hs_tick(f);         /* control requests nobody answered */
    if (f->pr) {
        char *w = mb_injector_words(f->mb);
        /* our agent's state changed: tell the fleet now, not next interval */
        if (pr_tick(f->pr, w))
            ro_kick(f->ro);
        g_free(w);
        push_hear(f, NULL); /* our groups may have changed (agents); cheap when not */
    }
    mg_check(); /* unmounted here, the connection kept by a copy elsewhere? */
}

/* Shutdown, producers before consumers: the injector (it consumes and
 * acks), the receipts outbox, the broker thread (it delivers into the
 * mailbox and, through it, kicks the injector and the notifier; stopping
 * it also closes the connection, so a remount is not refused as a second
 * consumer), then the mount and the notifier.  Nothing is freed until
 * every thread that could reach it has ended. */
static void stop_all(fleet *f, struct fuse_session *se)
{
    GThread *watch;
    stopw.done = false;
    stop_step("the leaving heartbeat");
    watch = g_thread_new("stop-watch", stop_watch, NULL);
    /* first, while everything still runs: the leaving heartbeat, so peers
     * show `left` rather than waiting three intervals for `stale` */
    ro_stop_begin(f->ro, se != NULL);
    /* the control service types and registers through the injector */
    stop_step("the control service (spawn)");
    spd_stop(g_atomic_pointer_get(&f->spd));
    stop_step("the injector (typing into a pane?)");
    inj_stop(g_atomic_pointer_get(&f->inj));
    /* the outbox starts no more receipts; one in flight waits for its
     * confirm until send_timeout (60 s if so configured), and br_stop ends
     * it at once (owed still, sent again after the restart) */
    stop_step("the receipt outbox");
    mb_stop_begin(f->mb);
    g_atomic_pointer_set(&sd_br, NULL);
    /* told with the broker threads and waited for after them: one bound
     * for every connection, not one after the other */
    cl_stop_begin(f->cl);
    stop_step("the broker threads");
    br_stop(f->br);
    stop_step("the mailbox's threads");
    mb_stop(f->mb);
    /* waited for after the broker threads, which stopped meanwhile: a
     * broker that does not answer holds the unmount once, not four times */
    stop_step("the roster thread");
    ro_stop(f->ro, se != NULL);
    stop_step("the claims thread");
    cl_stop(f->cl);
    stop_step("the kernel to let go of the mount");
    /* Linux: fusermount3 -u for an unprivileged mount; macFUSE has no
     * fusermount3, libfuse unmounts as umount(8) or `diskutil unmount` does */
    if (se)
        mg_unmount(se);
    stop_step("the notifier");
    nt_stop(g_atomic_pointer_get(&f->nt));
    g_atomic_pointer_set(&f->nt, NULL);
    stop_step("the injector's last slots");
    inj_free(g_atomic_pointer_get(&f->inj));
    g_atomic_pointer_set(&f->inj, NULL);
    /* after br_stop: the broker thread hands it deliveries until then */
    stop_step("the control service's last requests");
    spd_free(g_atomic_pointer_get(&f->spd));
    g_atomic_pointer_set(&f->spd, NULL);
    g_mutex_lock(&stopw.m);
    stopw.done = true;
    g_cond_signal(&stopw.cv);
    g_mutex_unlock(&stopw.m);
    g_thread_join(watch);
}

/* mounted allow_other: other users reach the tree (tree.c, outsider) */
static bool shared_mount(const cmdline *cl)
{
    for (guint i = 0; i < cl->fuse_opts->len; i++)
        if (strcmp(cl->fuse_opts->pdata[i], "allow_other") == 0)
            return true;
    return false;
}

static struct fuse_session *mount_tree(cmdline *cl, fleet *f, tree *t)
{
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    struct fuse_session *se;

    fuse_opt_add_arg(&args, "fleetfs");
    fuse_opt_add_arg(&args, "-o");
    /* subtype makes Linux's type fuse.fleetfs; macFUSE shows its own type
     * (macfuse) with fsname as the source, which os_mounts reads as
     * fuse.fleetfs (fleetfs/os/os_mounts.c; not yet run on a Mac) */
    fuse_opt_add_arg(&args, "fsname=fleetfs,subtype=fleetfs");
    if (cl->debug)
        fuse_opt_add_arg(&args, "-d");
    for (guint i = 0; i < cl->fuse_opts->len; i++)
        fuse_opt_add_arg(&args, cl->fuse_opts->pdata[i]);
    se = fuse_session_new(&args, &tree_ops, sizeof tree_ops, t);
    fuse_opt_free_args(&args);
    if (!se) {
        report(0, "cannot set up FUSE (see the messages above)");
        return NULL;
    }
    if (fuse_session_mount(se, f->mountpoint) != 0) {
        report(0, "cannot mount (is the mount point an empty directory, not already mounted?)");
        fuse_session_destroy(se);
        return NULL;
    }
    if (fuse_set_signal_handlers(se) != 0) {
        fuse_session_unmount(se);
        fuse_session_destroy(se);
        return NULL;
    }
    return se;
}

/* The control queue's consumer is set up by the broker thread after the
 * tree is mounted; its first attempt is waited for (briefly) before the
 * mount is reported ready, so the status read right after a mount says
 * what became of it (`control: ok`), not `starting`, as it does for the
 * mailbox's consumer. */
static void control_first_attempt(fleet *f)
{
    br_box_status b;
    br_status st;
    int64_t until = g_get_monotonic_time() + 3000 * 1000; /* at most 3 s */

    while (g_get_monotonic_time() < until) {
        br_get_status(f->br, &st);
        if (st.link != BR_CONNECTED || (br_control_status(f->br, &b) && b.consumer != BR_CONS_NONE))
            return;
        g_usleep(2000);
    }
}

static int serve(cmdline *cl, fleet *f)
{
    struct fuse_session *se;
    tree *t;
    struct fuse_loop_config lc = {
        .clone_fd = 0, .max_idle_threads = cl->max_idle_threads ? cl->max_idle_threads : 16};
    br_status st;
    int rc;

    g_atomic_pointer_set(&sd_br, f->br); /* STATUS= from here on */
    br_run(f->br);
    sd_broker_status();
    mb_start(f->mb);
    /* the first attempt includes waiting out a previous consumer (takeover_grace) */
    br_wait_first_attempt(f->br, FIRST_CONNECT_WAIT_MS + f->opts->takeover_grace_ms);
    if (fatal_consumer(f) < 0) {
        stop_all(f, NULL);
        return 1;
    }
    if (f->opts->insecure)
        log_warn("security: INSECURE (-o insecure): messages are neither signed nor checked; "
                 "anyone with broker access can type into this lead's pane");
    br_get_status(f->br, &st);
    if (st.link != BR_CONNECTED)
        log_warn("broker not connected yet (%s); serving the tree anyway, sends fail with ECOMM "
                 "until it is",
                 st.reason[0] ? st.reason : "still trying");
    t = tree_new(f, shared_mount(cl));
    se = mount_tree(cl, f, t);
    if (!se) {
        stop_all(f, NULL);
        tree_free(t);
        return 1;
    }
    mg_arm(se, f->mountpoint);
    g_atomic_pointer_set(&f->nt, nt_start(f, each_second, f));
    g_atomic_pointer_set(&f->inj, inj_start(f->opts, f->mb, f->mountpoint));
    ag_serve(f->ag);
    {
        char *err = NULL;
        spd_ctx sc = {.opts = f->opts,
                      .mountpoint = f->mountpoint,
                      .mb = f->mb,
                      .br = f->br,
                      .ag = f->ag,
                      .inj = &f->inj};
        spawnd *spd = spd_start(&sc, &err);
        if (!spd) {
            log_err("spawn: the control service is off: %s; requests to start agents here wait "
                    "in control.%s",
                    err, f->opts->coord_id);
            g_free(err);
        }
        g_atomic_pointer_set(&f->spd, spd);
        if (spd) {
            spd_consume(spd);
            control_first_attempt(f);
        }
    }
    ro_run(f->ro);
    cl_run(f->cl);
    log_info("mounted %s as lead %s (peers: %s)", f->mountpoint, f->opts->coord_id,
             f->opts->peers && *f->opts->peers ? "configured" : "none configured");
    report(1, NULL);
    sdn_start(f->mountpoint); /* READY=1 once the loop answers, then WATCHDOG=1 */
    rc = cl->single ? fuse_session_loop(se) : fuse_session_loop_mt(se, &lc);
    rc = rc == 0 || rc == SIGINT || rc == SIGTERM ? 0 : 1;
    /* a daemon that says nothing after an unmount was asked for is stuck
     * in the FUSE loop (a request that does not end); after this line,
     * stop_all's watcher names the step */
    log_info("unmount: the FUSE loop has ended; stopping");
    mg_disarm();    /* before the signal handlers go */
    sdn_stopping(); /* STOPPING=1, probes ended */
    fuse_remove_signal_handlers(se);
    stop_all(f, se);
    fuse_session_destroy(se);
    tree_free(t);
    log_info("unmounted %s", f->mountpoint);
    return rc;
}

/* The state directory must be ours and writable by nobody else (like
 * ssh's StrictModes: whoever can write there can forge the journal, the
 * seen set and the receipts we owe); then it is locked for our life
 * (store/statelock.h), before any state is loaded.  0, or the exit code. */
static int state_dir_take(const fs_opts *o, state_lock **lock)
{
    struct stat st;
    char why[160], *err = NULL;
    if (stat(o->state_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "fleetfs: state_dir %s: not a directory\n", o->state_dir);
        return 2;
    }
    if (sig_lax_owner_or_mode(&st, why, sizeof why)) {
        fprintf(stderr,
                "fleetfs: not mounting: state_dir %s: %s (whoever can write there can forge "
                "what fleetfs remembers)\n",
                o->state_dir, why);
        return 2;
    }
    *lock = sl_acquire(o->state_dir, o->takeover_grace_ms, &err);
    if (!*lock) {
        fprintf(stderr, "fleetfs: not mounting: %s\n", err);
        g_free(err);
        return 1;
    }
    return 0;
}

/* fleetfs keygen PATH: an ed25519 key pair for this host. */
static int keygen(int argc, char **argv)
{
    char *err = NULL;
    if (argc != 3) {
        fprintf(stderr, "usage: fleetfs keygen PATH\n");
        return 2;
    }
    if (sig_keygen(argv[2], &err) < 0) {
        fprintf(stderr, "fleetfs keygen: %s\n", err);
        g_free(err);
        return 1;
    }
    printf("wrote the secret key to %s (mode 0600) and the public key to %s.pub\n"
           "give %s.pub to every peer: it goes into their trusted_keys directory as "
           "<this host's coord_id>.pub\n",
           argv[2], argv[2], argv[2]);
    return 0;
}

int main(int argc, char **argv)
{
    cmdline cl = {0};
    fs_opts o;
    fleet f;
    state_lock *lock = NULL;
    char real[PATH_MAX];
    int rc;

    if (argc >= 2 && !strcmp(argv[1], "keygen"))
        return keygen(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "mcp"))
        return mcp_main(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "ask"))
        return mcp_ask_main(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "claim"))
        return mcp_claim_main(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "declare"))
        return hc_declare_main(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "dlq"))
        return hc_dlq_main(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "hook"))
        return hook_main(argc, argv);
    /* a closed pipe (the notifier's poker gone) is an error, not a death */
    signal(SIGPIPE, SIG_IGN);
    /* past a file size limit (ulimit -f, LimitFSIZE=) a write fails EFBIG
     * and the state files run degraded (status says so), not a death */
    signal(SIGXFSZ, SIG_IGN);
    /* NOTIFY_SOCKET & co. are read and unset before any thread or child */
    sdn_init();
    cl.ours = g_ptr_array_new_with_free_func(g_free);
    cl.fuse_opts = g_ptr_array_new_with_free_func(g_free);
    opts_init(&o);
    rc = cl_parse(argc, argv, &cl);
    if (rc != 0 || cl_load_options(&cl, &o) < 0) {
        rc = rc == 1 ? 0 : 2;
        goto done;
    }
    /* what cannot heal is refused before the broker is touched */
    if (su_check_uris(&o) < 0 || su_check_max_message(&o) < 0) {
        rc = 2;
        goto done;
    }
    if (!realpath(cl.mountpoint, real)) {
        if (errno == ENOTCONN) {
            su_say_dead_mount(cl.mountpoint);
            rc = 1;
        } else {
            fprintf(stderr, "fleetfs: mount point %s: %s\n", cl.mountpoint, strerror(errno));
            rc = 2;
        }
        goto done;
    }
    if (su_check_mountpoint(real) < 0 || su_check_dev_fuse() < 0) {
        rc = 1;
        goto done;
    }
    if (g_mkdir_with_parents(o.state_dir, 0700) < 0) {
        fprintf(stderr, "fleetfs: state_dir %s: %s\n", o.state_dir, strerror(errno));
        rc = 2;
        goto done;
    }
    if ((rc = state_dir_take(&o, &lock)) != 0)
        goto done;
    memset(&f, 0, sizeof f);
    f.opts = &o;
    f.mountpoint = real;
    f.uid = getuid();
    f.gid = getgid();
    f.started_ms = g_get_monotonic_time() / 1000;
    g_strfreev(su_broker_uris(&o, &f.uri_defaulted));
    if (gethostname(f.host, sizeof f.host - 1) < 0)
        g_strlcpy(f.host, "unknown", sizeof f.host);
    {
        mb_hooks hooks = {.changed = hook_changed,
                          .poll_wake = hook_poll,
                          .arrived = hook_arrived,
                          .peer_live = hook_peer_live,
                          .group_members = hook_group_members,
                          .heard_from = hook_heard_from,
                          .ud = &f};
        char *err = NULL;
        mb_broker seam;
        f.br = broker_new(&f);
        seam = mb_broker_of(f.br);
        f.mb = mb_new(&o, &hooks, &seam);
        mb_set_groups(f.mb, opts_agent_groups(&o, NULL));
        if (mb_set_security(f.mb, &err) < 0 || presence_new(&f, &err) < 0 ||
            !(f.ag = ag_new(&o, f.mb, f.pr, &f.inj)) || ag_start(f.ag, &err) < 0 ||
            hs_start(&f, &err) < 0) {
            fprintf(stderr, "fleetfs: %s\n", err);
            g_free(err);
            hs_free(&f);
            mb_free(f.mb);
            br_free(f.br);
            ag_free(f.ag);
            rc = 2;
            goto done;
        }
    }
    if (!cl.foreground && sdn_enabled())
        log_warn("sd_notify: NOTIFY_SOCKET is set but fleetfs detaches (no -f); a service manager "
                 "that listens to the main process only (NotifyAccess=main) ignores the "
                 "detached daemon: run it with -f");
    if (!cl.foreground) {
        if (daemonize() < 0) {
            fprintf(stderr, "fleetfs: cannot daemonize: %s\n", strerror(errno));
            rc = 1;
            goto done;
        }
        quiet_stdio();
        sl_note_pid(lock); /* the lock came along; the holder is the daemon now */
    }
    rc = serve(&cl, &f);
    hs_free(&f); /* the broker thread, which answers reach it on, has stopped */
    ro_free(f.ro);
    cl_free(f.cl);
    pr_free(f.pr);
    mb_free(f.mb);
    br_free(f.br);
    ag_free(f.ag);
done:
    sl_release(lock); /* after every state file is closed */
    opts_free(&o);
    g_free(cl.mountpoint);
    g_free(cl.source);
    g_ptr_array_free(cl.ours, TRUE);
    g_ptr_array_free(cl.fuse_opts, TRUE);
    return rc;
}
