/* SPDX-License-Identifier: Apache-2.0 */
/* e2elat — fleetfs end-to-end latency as a script on the receiving host
 * sees it: write one message to SEND (alpha's peers/beta/send), wait for
 * inotify IN_MODIFY on INBOX (beta's leads/beta/inbox), read the new line.
 * One message in flight at a time; the sample is write start -> the whole
 * line read.  The write runs in its own thread, as it would on the sending
 * host: the receiver does not wait for the sender's write to return (the
 * raw baseline, rawlat, likewise does not wait for the publish's confirm).
 * The inbox stays open (like tail -f): an open inbox grows by every
 * arrival, so the new line is read at the old end of the file.
 *
 * With more INBOXes (a broadcast: SEND is groups/<g>/send, one inbox per
 * member, on any mounts), the sample ends when the line is complete in
 * every one of them: write start -> the last copy read.  Each inbox is
 * read only when inotify says it changed.
 *
 *   e2elat SEND INBOX N SIZE [INBOX...]
 *
 * Prints the latency percentiles (bench.h), inboxes=K and timeouts=T.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "tests/bench/bench.h"

#define WAIT_MS 5000

typedef struct {
    int fd;
    unsigned long n, size;
    sem_t go, done;
    double t0; /* written by the sender before its write */
    int failed;
} sender;

static void *run_sender(void *arg)
{
    sender *s = arg;
    char *body = malloc(s->size + 1);
    if (!body)
        bn_die("out of memory");
    for (unsigned long i = 1; i <= s->n; i++) {
        char marker[32];
        sem_wait(&s->go);
        /* the marker makes each body unique; it survives JSON escaping */
        snprintf(marker, sizeof marker, "e2e-%lu-x", i);
        bn_fill_body(body, s->size, i);
        memcpy(body + 1, marker, strlen(marker));
        s->t0 = bn_now();
        if (write(s->fd, body, s->size) != (ssize_t)s->size)
            s->failed++;
        sem_post(&s->done);
    }
    free(body);
    return NULL;
}

/* One open inbox: what was read of it since the sample began. */
typedef struct {
    int fd, wd;
    char *buf;
    size_t len, cap;
    int done; /* this sample's line is complete here */
} inbox;

/* Reads what the inbox has beyond what was read; true once a line
 * containing marker is complete. */
static int read_new(inbox *b, const char *marker)
{
    for (;;) {
        if (b->cap - b->len < 65536) {
            b->cap = b->cap * 2 + 65536;
            b->buf = realloc(b->buf, b->cap);
            if (!b->buf)
                bn_die("out of memory");
        }
        ssize_t n = read(b->fd, b->buf + b->len, b->cap - b->len - 1);
        if (n < 0)
            bn_die("read of the inbox failed");
        if (n == 0)
            break;
        b->len += (size_t)n;
    }
    b->buf[b->len] = '\0';
    char *m = strstr(b->buf, marker);
    return m && strchr(m, '\n');
}

/* The inbox events in ev name: read those, mark the ones now complete;
 * how many became complete. */
static unsigned read_changed(inbox *in, unsigned k, const char *ev, ssize_t n, const char *marker)
{
    unsigned done = 0;
    for (const char *p = ev; p < ev + n;) {
        const struct inotify_event *e = (const void *)p;
        for (unsigned j = 0; j < k; j++)
            if (in[j].wd == e->wd && !in[j].done && read_new(&in[j], marker)) {
                in[j].done = 1;
                done++;
            }
        p += sizeof *e + e->len;
    }
    return done;
}

static void drain_events(int ifd)
{
    char ev[4096];
    while (poll(&(struct pollfd){ifd, POLLIN, 0}, 1, 0) > 0)
        if (read(ifd, ev, sizeof ev) < 0)
            break;
}

int main(int argc, char **argv)
{
    unsigned long n, timeouts = 0;
    unsigned k;
    int ifd;
    double *lat;
    inbox *in;
    sender s;
    pthread_t th;

    if (argc < 5) {
        fprintf(stderr, "usage: e2elat SEND INBOX N SIZE [INBOX...]\n");
        return 2;
    }
    memset(&s, 0, sizeof s);
    n = s.n = strtoul(argv[3], NULL, 10);
    s.size = strtoul(argv[4], NULL, 10);
    lat = calloc(n ? n : 1, sizeof *lat);
    if (!lat || s.size < 24)
        bn_die("out of memory, or SIZE < 24");
    k = (unsigned)argc - 4;
    in = calloc(k, sizeof *in);
    ifd = inotify_init1(IN_CLOEXEC);
    if (!in || ifd < 0)
        bn_die("out of memory, or no inotify");
    for (unsigned j = 0; j < k; j++) {
        const char *path = argv[j == 0 ? 2 : 4 + j];
        in[j].wd = inotify_add_watch(ifd, path, IN_MODIFY);
        in[j].fd = open(path, O_RDONLY);
        if (in[j].wd < 0 || in[j].fd < 0) {
            fprintf(stderr, "e2elat: %s: %s\n", path, strerror(errno));
            bn_die("cannot watch or open an INBOX");
        }
        read_new(&in[j], "\001");
    }
    s.fd = open(argv[1], O_WRONLY);
    if (s.fd < 0)
        bn_die("cannot open SEND");
    sem_init(&s.go, 0, 0);
    sem_init(&s.done, 0, 0);
    if (pthread_create(&th, NULL, run_sender, &s) != 0)
        bn_die("pthread_create");

    for (unsigned long i = 1; i <= n; i++) {
        char marker[32];
        snprintf(marker, sizeof marker, "e2e-%lu-x", i);
        unsigned left = k;
        drain_events(ifd); /* a previous sample's extra wake-ups */
        for (unsigned j = 0; j < k; j++) {
            in[j].len = 0;
            in[j].buf[0] = '\0';
            in[j].done = 0;
        }
        sem_post(&s.go);
        while (left > 0) {
            char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
            ssize_t got;
            if (poll(&(struct pollfd){ifd, POLLIN, 0}, 1, WAIT_MS) <= 0) {
                timeouts++;
                break;
            }
            if ((got = read(ifd, ev, sizeof ev)) < 0)
                bn_die("inotify read failed");
            left -= read_changed(in, k, ev, got, marker);
        }
        double t1 = bn_now();
        sem_wait(&s.done); /* one message in flight: the write has returned */
        lat[i - 1] = t1 - s.t0;
    }
    pthread_join(th, NULL);
    bn_print_percentiles(lat, n);
    printf(" inboxes=%u timeouts=%lu failed=%d\n", k, timeouts, s.failed);
    for (unsigned j = 0; j < k; j++) {
        close(in[j].fd);
        free(in[j].buf);
    }
    free(in);
    close(s.fd);
    close(ifd);
    free(lat);
    return timeouts || s.failed ? 1 : 0;
}
