/* SPDX-License-Identifier: Apache-2.0 */
/* main.c — fake herdr: the socket side.
 *
 *   fake-herdr --socket PATH --state STATEFILE --log PROMPTLOG
 *   fake-herdr --socket PATH --call METHOD [--params JSON] [--timeout MS]
 *
 * Serves herdr's framing exactly as HERDR-PROTOCOL.md states it: AF_UNIX
 * stream socket, mode 0600; one thread per connection so a hanging call
 * blocks nobody; each connection reads ONE line, answers ONE line and
 * closes, and whatever follows the first line is never answered. A line
 * over 1 MiB, a line that is not valid UTF-8, or no complete line within
 * 5 s is dropped silently (closed without reply). While a call is held
 * open (behaviour "hang" or "slow:<ms>") any byte from the client or a
 * half-close ends it silently, as herdr does for long-lived calls.
 * SIGTERM/SIGINT remove the socket and exit 0.
 *
 * The second form is a client for shell tests (see call.c). */
#include "tests/fake_herdr/fake_herdr.h"
#include "herdr/sanitize.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES (1024 * 1024)
#define LINE_WAIT_MS 5000

typedef struct {
    const fh_config *cfg;
    int fd;
} conn;

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads the first line (without '\n') within 5 s; NULL when the connection
 * is to be dropped. *extra says whether bytes followed the line. */
static char *read_line(int fd, size_t *len, int *extra)
{
    long long deadline = now_ms() + LINE_WAIT_MS;
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);

    while (buf) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        char *nl;
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        if (used == cap) {
            char *nb;

            if (cap > LINE_MAX_BYTES)
                break;
            cap = cap * 2 > LINE_MAX_BYTES + 1 ? LINE_MAX_BYTES + 1 : cap * 2;
            nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        n = read(fd, buf + used, cap - used);
        if (n <= 0)
            break;
        nl = memchr(buf + used, '\n', (size_t)n);
        used += (size_t)n;
        if (nl) {
            *len = (size_t)(nl - buf);
            *extra = (size_t)(nl - buf) + 1 < used;
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* Holds the call open for ms (-1: forever). 0 when the time ran out, -1
 * when the client sent a byte or closed its side first. */
static int hold(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;

    do
        n = poll(&p, 1, ms);
    while (n < 0 && errno == EINTR);
    return n == 0 ? 0 : -1;
}

static void write_line(int fd, const char *s)
{
    size_t len = strlen(s);
    char *buf = malloc(len + 1);

    if (!buf)
        return;
    memcpy(buf, s, len);
    buf[len] = '\n';
    for (size_t off = 0; off < len + 1;) {
        ssize_t n = send(fd, buf + off, len + 1 - off, MSG_NOSIGNAL);

        if (n <= 0 && errno != EINTR)
            break;
        if (n > 0)
            off += (size_t)n;
    }
    free(buf);
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    fh_outcome out = {0};
    size_t len;
    int extra;
    char *line = read_line(c->fd, &len, &extra);

    if (line && san_utf8_valid(line, len)) {
        fh_handle(c->cfg, line, len, &out);
        if (out.action == FH_HANG)
            hold(c->fd, -1);
        else if (out.action == FH_REPLY &&
                 (out.delay_ms <= 0 || (!extra && hold(c->fd, out.delay_ms) == 0)))
            write_line(c->fd, out.reply);
    }
    free(out.reply);
    free(line);
    close(c->fd);
    free(c);
    return NULL;
}

/* The socket is bound under a temporary name and renamed to path only once
 * it listens: whoever waits for path to appear (the tests) never connects
 * between bind and listen, which is refused (seen under load). */
static int listen_on(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char tmp[sizeof sa.sun_path];
    struct stat st;
    mode_t old;
    int fd, rc;

    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "fake-herdr: socket path too long\n");
        return -1;
    }
    memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    unlink(tmp);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    old = umask(0177); /* the socket is born 0600 */
    rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0 || chmod(tmp, 0600) < 0 || listen(fd, 64) < 0 || rename(tmp, path) < 0) {
        fprintf(stderr, "fake-herdr: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        close(fd);
        return -1;
    }
    return fd;
}

static void spawn(const fh_config *cfg, int fd)
{
    conn *c = malloc(sizeof(*c));
    pthread_attr_t at;
    pthread_t t;

    if (!c) {
        close(fd);
        return;
    }
    c->cfg = cfg;
    c->fd = fd;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, conn_main, c) != 0) {
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&at);
}

static int serve(const char *path, const fh_config *cfg)
{
    sigset_t set;
    int sfd, lfd;

    /* Block the signals before any thread exists so only signalfd sees
	 * them; the accept loop then ends cleanly and removes the socket. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    lfd = listen_on(path);
    if (sfd < 0 || lfd < 0)
        return 1;
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (p[0].revents) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

            if (fd >= 0)
                spawn(cfg, fd);
        }
    }
    close(lfd);
    unlink(path);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fake-herdr --socket PATH --state STATEFILE --log PROMPTLOG\n"
            "       fake-herdr --socket PATH --call METHOD [--params JSON] [--timeout MS]\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"state", required_argument, NULL, 'S'},
        {"log", required_argument, NULL, 'l'},
        {"call", required_argument, NULL, 'c'},
        {"params", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = NULL, *method = NULL, *params = NULL;
    fh_config cfg = {0};
    char *refused = NULL, *calls = NULL, *starts = NULL;
    int timeout = 2000, o, rc;

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            sock = optarg;
            break;
        case 'S':
            cfg.state_path = optarg;
            break;
        case 'l':
            cfg.log_path = optarg;
            break;
        case 'c':
            method = optarg;
            break;
        case 'p':
            params = optarg;
            break;
        case 't':
            timeout = atoi(optarg);
            break;
        default:
            usage();
            return 2;
        }
    }
    if (sock && method)
        return fh_call_main(sock, method, params, timeout);
    if (!sock || !cfg.state_path || !cfg.log_path || optind != argc) {
        usage();
        return 2;
    }
    if (asprintf(&refused, "%s.refused", cfg.log_path) < 0)
        return 1;
    cfg.refused_path = refused;
    if (asprintf(&calls, "%s.calls", cfg.log_path) < 0)
        return 1;
    cfg.calls_path = calls;
    if (asprintf(&starts, "%s.starts", cfg.log_path) < 0)
        return 1;
    cfg.starts_path = starts;
    rc = serve(sock, &cfg);
    free(refused);
    free(calls);
    free(starts);
    return rc;
}
