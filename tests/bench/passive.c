/* SPDX-License-Identifier: Apache-2.0 */
/* passive — the raw cost of what `cat peers/<id>/status` reports: a
 * passive queue.declare (message and consumer counts) on an open
 * connection, N times.
 *
 *   passive URI QUEUE N
 *
 * Prints the per-declare latency percentiles (bench.h).
 */
#include "tests/bench/bench.h"

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    unsigned long n;
    double *lat;

    if (argc != 4) {
        fprintf(stderr, "usage: passive URI QUEUE N\n");
        return 2;
    }
    n = strtoul(argv[3], NULL, 10);
    lat = calloc(n ? n : 1, sizeof *lat);
    if (!lat)
        bn_die("out of memory");
    c = bn_connect(argv[1]);
    for (unsigned long i = 0; i < n; i++) {
        double t0 = bn_now();
        amqp_queue_declare_ok_t *ok =
            amqp_queue_declare(c, 1, amqp_cstring_bytes(argv[2]), 1, 0, 0, 0, amqp_empty_table);
        if (!ok)
            bn_check_rpc(c, "passive queue.declare");
        lat[i] = bn_now() - t0;
        amqp_maybe_release_buffers(c);
    }
    bn_print_percentiles(lat, n);
    printf("\n");
    bn_close(c);
    free(lat);
    return 0;
}
