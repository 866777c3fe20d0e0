/* SPDX-License-Identifier: Apache-2.0 */
/* rawlat — raw end-to-end latency: publish (persistent, mandatory,
 * confirm mode) on one connection, receive the delivery on a second
 * connection consuming the queue; one message in flight at a time.  The
 * sample is publish start -> delivery read by the consumer.
 *
 *   rawlat URI QUEUE MAX_LENGTH N SIZE
 *
 * Prints the latency percentiles (bench.h).
 */
#include "tests/bench/bench.h"

int main(int argc, char **argv)
{
    amqp_connection_state_t pub, cons;
    const char *queue;
    unsigned long n, size;
    uint64_t acked = 0;
    double *lat;
    char *body;

    if (argc != 6) {
        fprintf(stderr, "usage: rawlat URI QUEUE MAX_LENGTH N SIZE\n");
        return 2;
    }
    queue = argv[2];
    n = strtoul(argv[4], NULL, 10);
    size = strtoul(argv[5], NULL, 10);
    lat = calloc(n ? n : 1, sizeof *lat);
    body = malloc(size + 1);
    if (!lat || !body)
        bn_die("out of memory");

    pub = bn_connect(argv[1]);
    cons = bn_connect(argv[1]);
    bn_declare_mailbox(pub, queue, strtoll(argv[3], NULL, 10));
    amqp_queue_purge(pub, 1, amqp_cstring_bytes(queue));
    bn_check_rpc(pub, "queue.purge");
    amqp_confirm_select(pub, 1);
    bn_check_rpc(pub, "confirm.select");
    amqp_basic_qos(cons, 1, 0, 64, 0);
    bn_check_rpc(cons, "basic.qos");
    amqp_basic_consume(cons, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 1,
                       amqp_empty_table);
    bn_check_rpc(cons, "basic.consume");

    for (unsigned long i = 1; i <= n; i++) {
        amqp_envelope_t env;
        amqp_rpc_reply_t r;
        double t0;
        bn_fill_body(body, size, i);
        t0 = bn_now();
        if (bn_publish(pub, queue, body, size, i) != AMQP_STATUS_OK)
            bn_die("publish failed");
        r = amqp_consume_message(cons, &env, NULL, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            bn_die("consume failed");
        lat[i - 1] = bn_now() - t0;
        amqp_basic_ack(cons, 1, env.delivery_tag, 0);
        amqp_destroy_envelope(&env);
        amqp_maybe_release_buffers(cons);
        bn_wait_confirms(pub, i, &acked);
    }
    bn_print_percentiles(lat, n);
    printf("\n");
    bn_close(cons);
    bn_close(pub);
    free(lat);
    free(body);
    return 0;
}
