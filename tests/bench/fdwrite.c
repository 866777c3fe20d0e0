/* SPDX-License-Identifier: Apache-2.0 */
/* fdwrite — send throughput through the file interface: each writer opens
 * FILE once and writes N/W messages of SIZE bytes, one write(2) per
 * message (a write to peers/<id>/send returns after the broker's confirm).
 *
 *   fdwrite FILE N SIZE [W]      W concurrent writers (threads), default 1
 *
 * Prints: msgs=N failed=F writers=W secs=S rate=R (messages per second)
 * cpu_us=C (the CPU the writers used meanwhile, system calls included); the first
 * failure's errno goes to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "tests/bench/bench.h"

typedef struct {
    const char *file;
    unsigned long first, count, size, failed;
} writer;

static void *run_writer(void *arg)
{
    writer *w = arg;
    char *body = malloc(w->size + 1);
    int fd = open(w->file, O_WRONLY);
    if (!body || fd < 0) {
        fprintf(stderr, "fdwrite: open %s: %s\n", w->file, strerror(errno));
        w->failed = w->count;
        free(body);
        return NULL;
    }
    for (unsigned long i = 0; i < w->count; i++) {
        bn_fill_body(body, w->size, w->first + i);
        ssize_t n = write(fd, body, w->size);
        if (n != (ssize_t)w->size) {
            if (w->failed++ == 0)
                fprintf(stderr, "fdwrite: write: %s\n", n < 0 ? strerror(errno) : "short");
        }
    }
    close(fd);
    free(body);
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned long n, size, nw = 1, failed = 0;
    pthread_t th[64];
    writer w[64];
    double t0, t1, cpu0;

    if (argc < 4) {
        fprintf(stderr, "usage: fdwrite FILE N SIZE [WRITERS]\n");
        return 2;
    }
    n = strtoul(argv[2], NULL, 10);
    size = strtoul(argv[3], NULL, 10);
    if (argc > 4)
        nw = strtoul(argv[4], NULL, 10);
    if (nw < 1 || nw > 64)
        bn_die("1..64 writers");
    t0 = bn_now();
    cpu0 = bn_cpu_us();
    for (unsigned long i = 0; i < nw; i++) {
        w[i] = (writer){argv[1], i * (n / nw), n / nw + (i == nw - 1 ? n % nw : 0), size, 0};
        if (pthread_create(&th[i], NULL, run_writer, &w[i]) != 0)
            bn_die("pthread_create");
    }
    for (unsigned long i = 0; i < nw; i++) {
        pthread_join(th[i], NULL);
        failed += w[i].failed;
    }
    t1 = bn_now();
    printf("msgs=%lu failed=%lu writers=%lu secs=%.4f rate=%.1f cpu_us=%.0f\n", n, failed, nw,
           t1 - t0, (double)(n - failed) / (t1 - t0), bn_cpu_us() - cpu0);
    return failed ? 1 : 0;
}
