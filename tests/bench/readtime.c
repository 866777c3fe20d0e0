/* SPDX-License-Identifier: Apache-2.0 */
/* readtime — what reading a fleetfs file costs a program (no process
 * start): open, read to the end, close, N times.
 *
 *   readtime FILE N
 *
 * Prints the per-read latency percentiles (bench.h) and bytes=B of the
 * last read.
 */
#include <fcntl.h>
#include <unistd.h>

#include "tests/bench/bench.h"

int main(int argc, char **argv)
{
    static char buf[1 << 16];
    unsigned long n;
    size_t bytes = 0;
    double *lat;

    if (argc != 3) {
        fprintf(stderr, "usage: readtime FILE N\n");
        return 2;
    }
    n = strtoul(argv[2], NULL, 10);
    lat = calloc(n ? n : 1, sizeof *lat);
    if (!lat)
        bn_die("out of memory");
    for (unsigned long i = 0; i < n; i++) {
        double t0 = bn_now();
        ssize_t r;
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0)
            bn_die("open failed");
        bytes = 0;
        while ((r = read(fd, buf, sizeof buf)) > 0)
            bytes += (size_t)r;
        close(fd);
        lat[i] = bn_now() - t0;
    }
    bn_print_percentiles(lat, n);
    printf(" bytes=%zu\n", bytes);
    free(lat);
    return 0;
}
