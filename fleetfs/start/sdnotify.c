/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/sdnotify.c — the sd_notify protocol, written out (API in
 * sdnotify.h).
 *
 * Why not libsystemd's sd_notify(3): fleetfs depends on exactly libfuse3,
 * rabbitmq-c, jansson, libsodium, glib-2.0 and cmocka (SPEC section 1), and
 * the protocol is small and documented as stable (sd_notify(3), "Notes"):
 * each message is one datagram of newline-separated VAR=VALUE lines sent
 * to the AF_UNIX SOCK_DGRAM socket named by $NOTIFY_SOCKET; a name starting
 * with '@' is in the abstract namespace (the '@' becomes a NUL byte and the
 * address has no terminating NUL).  The sender's credentials travel with
 * the datagram by themselves (the service manager sets SO_PASSCRED), which
 * is how systemd knows the message comes from the main process.  vsock:
 * addresses (virtual machines) are not supported and are logged.
 *
 * What is sent:
 *   STATUS=broker: ...   each time the broker state line changes (main.c)
 *   READY=1              once the tree is served: a probe process opened
 *                        MOUNTPOINT/README through the kernel, i.e. the
 *                        FUSE loop answered a real request
 *   WATCHDOG=1           when WATCHDOG_USEC is set (WatchdogSec=): every
 *                        WATCHDOG_USEC/2, each time after a fresh probe
 *                        came back, so a wedged FUSE loop stops the pings
 *                        and systemd restarts the service; a thread that
 *                        pinged on a timer alone would prove nothing
 *   STOPPING=1           when the FUSE loop ends (unmount or SIGTERM)
 *
 * The probe is a forked child, like the notifier's poker (notify.c) and
 * for the same reason: a daemon thread waiting in a request on its own
 * mount could not be finished if the daemon died, and the process would
 * hang in D state.  The child closes every descriptor but 0-2 first (above
 * all /dev/fuse), calls only open(2) and _exit(2), and is killed if still
 * waiting when the loop ends.
 *
 * The variables are unset at start so that processes fleetfs starts (the
 * poker, tmux) do not talk to the service manager in its name. */
#include "fleetfs/start/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

#define SDN_WAIT_STEP_US 5000     /* how often an outstanding probe is checked */
#define SDN_RETRY_US 100000       /* a failed probe before READY: try again after */
#define SDN_MIN_INTERVAL_US 10000 /* the fastest watchdog ping we make */

static struct {
    int fd; /* -1: no notify socket */
    struct sockaddr_un addr;
    socklen_t addrlen;
    int64_t watchdog_us; /* 0: no watchdog */
    GMutex lock;
    GCond cond;
    GMutex order; /* READY/WATCHDOG are never sent after STOPPING */
    bool stopping;
    char *last_status;
    bool stop;
    bool send_failed; /* logged once */
    GThread *thread;
    char *probe_path; /* MOUNTPOINT/README */
    pid_t probe;      /* outstanding probe child, or 0 */
} sdn = {.fd = -1};

bool sdn_enabled(void)
{
    return sdn.fd >= 0;
}

static void sdn_unset_env(void)
{
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

static void sdn_read_watchdog(void)
{
    const char *us = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    char *end = NULL;
    unsigned long long v;

    if (us == NULL || *us == '\0')
        return;
    /* WATCHDOG_PID names the process meant to ping; another one ignores it */
    if (pid != NULL && *pid != '\0' && strtoll(pid, NULL, 10) != (long long)getpid())
        return;
    errno = 0;
    v = strtoull(us, &end, 10);
    if (errno != 0 || end == us || *end != '\0' || v == 0 || v > (unsigned long long)INT64_MAX) {
        log_warn("sd_notify: WATCHDOG_USEC='%s' is not a positive number of microseconds; "
                 "no watchdog pings (check WatchdogSec= in the unit)",
                 us);
        return;
    }
    sdn.watchdog_us = (int64_t)v;
}

bool sdn_init(void)
{
    const char *name = getenv("NOTIFY_SOCKET");
    size_t len;

    g_mutex_init(&sdn.lock);
    g_cond_init(&sdn.cond);
    g_mutex_init(&sdn.order);
    /* launchd (macOS) has no readiness protocol: nothing is sent there */
    if (!OS_SD_NOTIFY || name == NULL || *name == '\0') {
        sdn_unset_env();
        return false;
    }
    len = strlen(name);
    memset(&sdn.addr, 0, sizeof sdn.addr);
    sdn.addr.sun_family = AF_UNIX;
    if ((name[0] != '/' && name[0] != '@') || len < 2 || len >= sizeof sdn.addr.sun_path) {
        log_warn("sd_notify: NOTIFY_SOCKET='%s' is neither an absolute path nor an abstract "
                 "name (@...) that fits a unix socket address; not notifying the service "
                 "manager (vsock: is not supported)",
                 name);
        sdn_unset_env();
        return false;
    }
    memcpy(sdn.addr.sun_path, name, len);
    if (name[0] == '@') {
        sdn.addr.sun_path[0] = '\0';
        sdn.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    } else {
        sdn.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    }
    sdn.fd = os_socket(AF_UNIX, SOCK_DGRAM, 0, 0);
    if (sdn.fd < 0) {
        log_warn("sd_notify: cannot make a datagram socket: %s; not notifying the service manager",
                 strerror(errno));
        sdn_unset_env();
        return false;
    }
    sdn_read_watchdog();
    sdn_unset_env();
    return true;
}

void sdn_send(const char *text)
{
    ssize_t n;

    if (sdn.fd < 0)
        return;
    n = sendto(sdn.fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT,
               (const struct sockaddr *)&sdn.addr, sdn.addrlen);
    if (n < 0) {
        g_mutex_lock(&sdn.lock);
        if (!sdn.send_failed)
            log_warn("sd_notify: cannot send to NOTIFY_SOCKET: %s (later failures are not "
                     "logged); the service manager may not see readiness or status",
                     strerror(errno));
        sdn.send_failed = true;
        g_mutex_unlock(&sdn.lock);
    }
}

void sdn_status(const char *text)
{
    char *msg = NULL;

    if (sdn.fd < 0)
        return;
    g_mutex_lock(&sdn.lock);
    if (g_strcmp0(sdn.last_status, text) != 0) {
        g_free(sdn.last_status);
        sdn.last_status = g_strdup(text);
        msg = g_strdup_printf("STATUS=%s", text);
    }
    g_mutex_unlock(&sdn.lock);
    if (msg != NULL)
        sdn_send(msg);
    g_free(msg);
}

/* READY=1 and WATCHDOG=1 only while not stopping: a ping racing the
 * STOPPING=1 of the main thread is dropped, not sent after it. */
static void sdn_send_alive(const char *text)
{
    g_mutex_lock(&sdn.order);
    if (!sdn.stopping)
        sdn_send(text);
    g_mutex_unlock(&sdn.order);
}

/* ---- the probe ----------------------------------------------------------- */

static pid_t probe_start(const char *path)
{
    pid_t pid = fork();

    if (pid == 0) {
        int fd;

        os_close_from(3);
        fd = open(path, O_RDONLY);
        _exit(fd >= 0 ? 0 : 1);
    }
    return pid;
}

/* Wait until the time `until` (monotonic µs) or a stop; false on stop. */
static bool sdn_sleep_until(int64_t until)
{
    bool stop;

    g_mutex_lock(&sdn.lock);
    while (!sdn.stop && g_get_monotonic_time() < until)
        g_cond_wait_until(&sdn.cond, &sdn.lock, until);
    stop = sdn.stop;
    g_mutex_unlock(&sdn.lock);
    return !stop;
}

/* One probe: 1 it came back, 0 it failed, -1 stopped while waiting.  Once
 * it has waited longer than `slow_us` (0: never), says so once. */
static int probe_once(int64_t slow_us, bool *slow_logged)
{
    int64_t t0 = g_get_monotonic_time();
    int status;
    pid_t r;

    g_mutex_lock(&sdn.lock);
    if (sdn.stop) {
        g_mutex_unlock(&sdn.lock);
        return -1;
    }
    sdn.probe = probe_start(sdn.probe_path);
    g_mutex_unlock(&sdn.lock);
    if (sdn.probe < 0) {
        log_warn("sd_notify: cannot fork the probe process: %s", strerror(errno));
        sdn.probe = 0;
        return 0;
    }
    for (;;) {
        r = waitpid(sdn.probe, &status, WNOHANG);
        if (r == sdn.probe || (r < 0 && errno != EINTR))
            break;
        if (slow_us > 0 && !*slow_logged && g_get_monotonic_time() - t0 > slow_us) {
            log_warn("watchdog: the FUSE loop has not answered a request for %.1f s; not "
                     "pinging the service manager, which restarts fleetfs after WatchdogSec",
                     (double)(g_get_monotonic_time() - t0) / 1e6);
            *slow_logged = true;
        }
        if (!sdn_sleep_until(g_get_monotonic_time() + SDN_WAIT_STEP_US)) {
            /* the loop ended: the probe may wait in the mount forever */
            kill(sdn.probe, SIGKILL);
            while (waitpid(sdn.probe, NULL, 0) < 0 && errno == EINTR)
                ;
            sdn.probe = 0;
            return -1;
        }
    }
    sdn.probe = 0;
    return r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 1 : 0;
}

static gpointer sdn_thread(gpointer unused)
{
    bool slow = false, failed_logged = false;
    int64_t interval = sdn.watchdog_us / 2;
    int r;

    (void)unused;
    /* READY=1 once the kernel got an answer from the FUSE loop */
    while ((r = probe_once(0, &slow)) == 0) {
        if (!failed_logged)
            log_warn("sd_notify: %s cannot be opened yet; READY=1 waits for it", sdn.probe_path);
        failed_logged = true;
        if (!sdn_sleep_until(g_get_monotonic_time() + SDN_RETRY_US))
            return NULL;
    }
    if (r < 0)
        return NULL;
    sdn_send_alive("READY=1");
    if (sdn.watchdog_us == 0)
        return NULL;
    if (interval < SDN_MIN_INTERVAL_US)
        interval = SDN_MIN_INTERVAL_US;
    log_info("watchdog: pinging the service manager every %.3f s while the FUSE loop answers",
             (double)interval / 1e6);
    for (;;) {
        int64_t t0 = g_get_monotonic_time();

        r = probe_once(interval, &slow);
        if (r < 0)
            break;
        if (r == 1) {
            sdn_send_alive("WATCHDOG=1");
            if (slow)
                log_info("watchdog: the FUSE loop answers again; pinging resumed");
            slow = false;
        } else if (!slow) {
            log_warn("watchdog: a probe could not open %s; not pinging the service manager",
                     sdn.probe_path);
            slow = true;
        }
        if (!sdn_sleep_until(t0 + interval))
            break;
    }
    return NULL;
}

void sdn_start(const char *mountpoint)
{
    if (sdn.fd < 0 || sdn.thread != NULL)
        return;
    sdn.probe_path = g_build_filename(mountpoint, "README", NULL);
    sdn.thread = g_thread_new("sdnotify", sdn_thread, NULL);
}

void sdn_stopping(void)
{
    if (sdn.fd < 0)
        return;
    g_mutex_lock(&sdn.order);
    sdn.stopping = true;
    sdn_send("STOPPING=1");
    g_mutex_unlock(&sdn.order);
    g_mutex_lock(&sdn.lock);
    sdn.stop = true;
    g_cond_broadcast(&sdn.cond);
    g_mutex_unlock(&sdn.lock);
    if (sdn.thread != NULL)
        g_thread_join(sdn.thread);
    sdn.thread = NULL;
    g_free(sdn.probe_path);
    sdn.probe_path = NULL;
    g_free(sdn.last_status);
    sdn.last_status = NULL;
}
