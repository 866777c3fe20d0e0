/* SPDX-License-Identifier: Apache-2.0 */
/* lastvalue — what a last-value roster would cost (issue 33, doc/scaling.md
 * "A last-value roster, measured"): a stream queue bound to fleet.roster
 * with roster.# keeps every heartbeat for a while, and a host that wants
 * the fleet's picture reads the last few intervals of it once, instead of
 * its roster queue hearing every heartbeat all the time.
 *
 *   lastvalue URI setup AGE     declare the stream fleet.roster.last
 *                               (x-queue-type stream, x-max-age AGE, e.g.
 *                               60s) and bind it to fleet.roster, roster.#
 *   lastvalue URI read SECONDS  read it from SECONDS ago up to now, once,
 *                               as a newly mounted host would for its
 *                               first picture; prints the messages read,
 *                               the distinct senders (the last word of the
 *                               routing key) and the time it took
 *   lastvalue URI delete        delete the stream
 *
 * The broker's CPU is measured from outside (/proc/PID/stat of beam.smp).
 * RabbitMQ 3.9 and later have streams; over AMQP 0-9-1 a stream consumer
 * needs basic.qos and acks.
 */
#include <glib.h>

#include "tests/bench/bench.h"

#define LV_QUEUE "fleet.roster.last"

static void lv_setup(amqp_connection_state_t c, const char *age)
{
    amqp_table_entry_t e[3];
    amqp_table_t args = {3, e};

    e[0].key = amqp_cstring_bytes("x-queue-type");
    e[0].value.kind = AMQP_FIELD_KIND_UTF8;
    e[0].value.value.bytes = amqp_cstring_bytes("stream");
    e[1].key = amqp_cstring_bytes("x-max-age");
    e[1].value.kind = AMQP_FIELD_KIND_UTF8;
    e[1].value.value.bytes = amqp_cstring_bytes(age);
    e[2].key = amqp_cstring_bytes("x-stream-max-segment-size-bytes");
    e[2].value.kind = AMQP_FIELD_KIND_I64;
    e[2].value.value.i64 = 4 * 1024 * 1024; /* small segments: the age applies soon */
    amqp_exchange_declare(c, 1, amqp_cstring_bytes("fleet.roster"), amqp_cstring_bytes("topic"), 0,
                          0, 0, 0, amqp_empty_table);
    bn_check_rpc(c, "exchange.declare fleet.roster");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(LV_QUEUE), 0, 1, 0, 0, args);
    bn_check_rpc(c, "queue.declare (stream)");
    amqp_queue_bind(c, 1, amqp_cstring_bytes(LV_QUEUE), amqp_cstring_bytes("fleet.roster"),
                    amqp_cstring_bytes("roster.#"), amqp_empty_table);
    bn_check_rpc(c, "queue.bind");
    printf("stream %s bound to fleet.roster with roster.#, max age %s\n", LV_QUEUE, age);
}

static void lv_read(amqp_connection_state_t c, double secs)
{
    amqp_table_entry_t e[1];
    amqp_table_t args = {1, e};
    GHashTable *senders = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    unsigned long n = 0;
    double t0 = bn_now(), last = t0, cpu0 = bn_cpu_us();

    e[0].key = amqp_cstring_bytes("x-stream-offset");
    e[0].value.kind = AMQP_FIELD_KIND_TIMESTAMP;
    e[0].value.value.u64 = (uint64_t)(g_get_real_time() / 1000000 - (gint64)secs);
    amqp_basic_qos(c, 1, 0, 2000, 0);
    bn_check_rpc(c, "basic.qos");
    amqp_basic_consume(c, 1, amqp_cstring_bytes(LV_QUEUE), amqp_empty_bytes, 0, 0, 0, args);
    bn_check_rpc(c, "basic.consume (stream)");
    for (;;) {
        amqp_envelope_t env;
        struct timeval tv = {0, 200000};
        amqp_rpc_reply_t r;
        amqp_maybe_release_buffers(c);
        r = amqp_consume_message(c, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT) {
            if (bn_now() - last > 1.0) /* caught up: nothing for a second */
                break;
            continue;
        }
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            bn_die("consume failed");
        {
            char rk[256];
            size_t len = env.routing_key.len < sizeof rk - 1 ? env.routing_key.len : sizeof rk - 1;
            const char *dot;
            memcpy(rk, env.routing_key.bytes, len);
            rk[len] = '\0';
            dot = strrchr(rk, '.');
            g_hash_table_add(senders, g_strdup(dot ? dot + 1 : rk));
        }
        n++;
        last = bn_now();
        if (n % 500 == 0)
            amqp_basic_ack(c, 1, env.delivery_tag, 1);
        amqp_destroy_envelope(&env);
    }
    printf("read=%lu senders=%u secs=%.2f (to the last message %.2f) client_cpu_ms=%.1f\n", n,
           g_hash_table_size(senders), bn_now() - t0, last - t0, (bn_cpu_us() - cpu0) / 1000.0);
    g_hash_table_destroy(senders);
}

int main(int argc, char **argv)
{
    amqp_connection_state_t c;

    if (argc < 3 || (strcmp(argv[2], "delete") != 0 && argc != 4)) {
        fprintf(stderr, "usage: lastvalue URI setup AGE | read SECONDS | delete\n");
        return 2;
    }
    c = bn_connect(argv[1]);
    if (strcmp(argv[2], "setup") == 0)
        lv_setup(c, argv[3]);
    else if (strcmp(argv[2], "read") == 0)
        lv_read(c, strtod(argv[3], NULL));
    else if (strcmp(argv[2], "delete") == 0) {
        amqp_queue_delete(c, 1, amqp_cstring_bytes(LV_QUEUE), 0, 0);
        bn_check_rpc(c, "queue.delete");
    } else
        bn_die("mode is setup, read or delete");
    bn_close(c);
    return 0;
}
