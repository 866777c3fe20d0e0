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
 *   e2elat SEND INBOX N SIZE
 *
 * Prints the latency percentiles (bench.h) and timeouts=T.
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

/* Reads what INBOX has beyond what was read; true once a line containing
 * marker is complete. */
static int read_new(int fd, char **buf, size_t *len, size_t *cap, const char *marker)
{
    for (;;) {
        if (*cap - *len < 65536) {
            *cap = *cap * 2 + 65536;
            *buf = realloc(*buf, *cap);
            if (!*buf)
                bn_die("out of memory");
        }
        ssize_t n = read(fd, *buf + *len, *cap - *len - 1);
        if (n < 0)
            bn_die("read of the inbox failed");
        if (n == 0)
            break;
        *len += (size_t)n;
    }
    (*buf)[*len] = '\0';
    char *m = strstr(*buf, marker);
    return m && strchr(m, '\n');
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
    int in, ifd;
    double *lat;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    sender s;
    pthread_t th;

    if (argc != 5) {
        fprintf(stderr, "usage: e2elat SEND INBOX N SIZE\n");
        return 2;
    }
    memset(&s, 0, sizeof s);
    n = s.n = strtoul(argv[3], NULL, 10);
    s.size = strtoul(argv[4], NULL, 10);
    lat = calloc(n ? n : 1, sizeof *lat);
    if (!lat || s.size < 24)
        bn_die("out of memory, or SIZE < 24");
    ifd = inotify_init1(IN_CLOEXEC);
    if (ifd < 0 || inotify_add_watch(ifd, argv[2], IN_MODIFY) < 0)
        bn_die("inotify on the inbox failed");
    in = open(argv[2], O_RDONLY);
    s.fd = open(argv[1], O_WRONLY);
    if (in < 0 || s.fd < 0)
        bn_die("cannot open SEND or INBOX");
    read_new(in, &buf, &len, &cap, "\001");
    sem_init(&s.go, 0, 0);
    sem_init(&s.done, 0, 0);
    if (pthread_create(&th, NULL, run_sender, &s) != 0)
        bn_die("pthread_create");

    for (unsigned long i = 1; i <= n; i++) {
        char marker[32];
        snprintf(marker, sizeof marker, "e2e-%lu-x", i);
        drain_events(ifd); /* a previous sample's extra wake-ups */
        len = 0;
        buf[0] = '\0';
        sem_post(&s.go);
        for (;;) {
            char ev[4096];
            if (poll(&(struct pollfd){ifd, POLLIN, 0}, 1, WAIT_MS) <= 0) {
                timeouts++;
                break;
            }
            if (read(ifd, ev, sizeof ev) < 0)
                bn_die("inotify read failed");
            if (read_new(in, &buf, &len, &cap, marker))
                break;
        }
        double t1 = bn_now();
        sem_wait(&s.done); /* one message in flight: the write has returned */
        lat[i - 1] = t1 - s.t0;
    }
    pthread_join(th, NULL);
    bn_print_percentiles(lat, n);
    printf(" timeouts=%lu failed=%d\n", timeouts, s.failed);
    close(in);
    close(s.fd);
    close(ifd);
    free(lat);
    free(buf);
    return timeouts || s.failed ? 1 : 0;
}
