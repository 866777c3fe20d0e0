/* SPDX-License-Identifier: Apache-2.0 */
/* rawpub — the raw rabbitmq-c publisher the fleetfs send path is compared
 * with: same broker, same mailbox arguments, persistent, mandatory, channel
 * in confirm mode.
 *
 *   rawpub URI QUEUE MAX_LENGTH one N SIZE       publish, wait for its confirm, repeat
 *   rawpub URI QUEUE MAX_LENGTH window N SIZE W  keep up to W publishes unconfirmed
 *   rawpub URI QUEUE MAX_LENGTH purge            declare the mailbox and empty it
 *
 * Prints: msgs=N failed=F secs=S rate=R (messages per second) cpu_us=C (the
 * CPU this program used while it published, connecting not included).
 */
#include "tests/bench/bench.h"

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    const char *uri, *queue, *mode;
    unsigned long n, size, window = 1, failed = 0;
    uint64_t acked = 0;
    char *body;
    double t0, t1, cpu0;

    if (argc < 5) {
        fprintf(stderr, "usage: rawpub URI QUEUE MAX_LENGTH one|window|purge [N SIZE [W]]\n");
        return 2;
    }
    uri = argv[1];
    queue = argv[2];
    mode = argv[4];
    c = bn_connect(uri);
    bn_declare_mailbox(c, queue, strtoll(argv[3], NULL, 10));
    if (strcmp(mode, "purge") == 0) {
        amqp_queue_purge(c, 1, amqp_cstring_bytes(queue));
        bn_check_rpc(c, "queue.purge");
        bn_close(c);
        printf("purged=1\n");
        return 0;
    }
    if (argc < 7 || (strcmp(mode, "window") == 0 && argc < 8))
        bn_die("one and window need N and SIZE (window also W)");
    n = strtoul(argv[5], NULL, 10);
    size = strtoul(argv[6], NULL, 10);
    if (strcmp(mode, "window") == 0)
        window = strtoul(argv[7], NULL, 10);
    else if (strcmp(mode, "one") != 0)
        bn_die("mode is one, window or purge");
    if (window < 1)
        window = 1;
    amqp_confirm_select(c, 1);
    bn_check_rpc(c, "confirm.select");
    body = malloc(size + 1);
    if (!body)
        bn_die("out of memory");

    t0 = bn_now();
    cpu0 = bn_cpu_us();
    for (unsigned long i = 1; i <= n; i++) {
        bn_fill_body(body, size, i);
        if (bn_publish(c, queue, body, size, i) != AMQP_STATUS_OK)
            bn_die("publish failed");
        if (i - acked >= window)
            failed += bn_wait_confirms(c, i - window + 1, &acked);
    }
    failed += bn_wait_confirms(c, n, &acked);
    t1 = bn_now();

    printf("msgs=%lu failed=%lu secs=%.4f rate=%.1f cpu_us=%.0f\n", n, failed, t1 - t0,
           (double)n / (t1 - t0), bn_cpu_us() - cpu0);
    free(body);
    bn_close(c);
    return failed ? 1 : 0;
}
