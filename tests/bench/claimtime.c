/* SPDX-License-Identifier: Apache-2.0 */
/* claimtime — the time to take and release a free claim (doc/claims.md)
 * beside a plain send, in the same run: N rounds of mkdir MOUNT/claims/NAME,
 * rmdir of it, and one write(2) of SIZE bytes to SEND (a send, answered
 * after the broker's confirm).
 *
 *   claimtime MOUNT SEND N SIZE
 *
 * Prints one line: take_p50_us= take_p99_us= release_p50_us=
 * release_p99_us= send_p50_us= send_p99_us= failed=F.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/bench/bench.h"

static double pct(double *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1] * 1e6;
}

int main(int argc, char **argv)
{
    unsigned long n, size, failed = 0;
    double *take, *rel, *send;
    char dir[4096], *body;
    int fd;

    if (argc != 5 || (n = strtoul(argv[3], NULL, 10)) == 0 ||
        (size = strtoul(argv[4], NULL, 10)) == 0)
        bn_die("usage: claimtime MOUNT SEND N SIZE");
    take = calloc(n, sizeof *take);
    rel = calloc(n, sizeof *rel);
    send = calloc(n, sizeof *send);
    body = malloc(size);
    fd = open(argv[2], O_WRONLY);
    if (!take || !rel || !send || !body || fd < 0)
        bn_die("cannot open the send file");
    snprintf(dir, sizeof dir, "%s/claims/bench-claim", argv[1]);
    for (unsigned long i = 0; i < n; i++) {
        double t0 = bn_now(), t1, t2, t3;
        if (mkdir(dir, 0700) != 0 && failed++ == 0)
            fprintf(stderr, "claimtime: mkdir: %s\n", strerror(errno));
        t1 = bn_now();
        if (rmdir(dir) != 0 && failed++ == 0)
            fprintf(stderr, "claimtime: rmdir: %s\n", strerror(errno));
        t2 = bn_now();
        bn_fill_body(body, size, i);
        if (write(fd, body, size) != (ssize_t)size && failed++ == 0)
            fprintf(stderr, "claimtime: write: %s\n", strerror(errno));
        t3 = bn_now();
        take[i] = t1 - t0;
        rel[i] = t2 - t1;
        send[i] = t3 - t2;
    }
    close(fd);
    qsort(take, n, sizeof *take, bn_cmp_double);
    qsort(rel, n, sizeof *rel, bn_cmp_double);
    qsort(send, n, sizeof *send, bn_cmp_double);
    printf("take_p50_us=%.0f take_p99_us=%.0f release_p50_us=%.0f release_p99_us=%.0f "
           "send_p50_us=%.0f send_p99_us=%.0f failed=%lu\n",
           pct(take, n, 0.5), pct(take, n, 0.99), pct(rel, n, 0.5), pct(rel, n, 0.99),
           pct(send, n, 0.5), pct(send, n, 0.99), failed);
    free(take);
    free(rel);
    free(send);
    free(body);
    return failed ? 1 : 0;
}
