/* SPDX-License-Identifier: Apache-2.0 */
/* tests/bench/bench.h — helpers shared by the benchmark programs (header
 * only: each program is one .c file).
 *
 * Every program prints its result as one line of key=value pairs on
 * stdout, which scripts/bench parses; diagnostics go to stderr.  Times are
 * CLOCK_MONOTONIC.  The raw AMQP programs declare mailboxes with exactly
 * the arguments fleetfs uses (broker/topology.c), so the broker does the
 * same work for both.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

static inline double bn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The CPU time (user + system) this process used so far, all its threads,
 * in microseconds: what the ratio rows' rates cannot tell apart from other
 * load on the machine (row 1e). */
static inline double bn_cpu_us(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static inline void bn_die(const char *what)
{
    fprintf(stderr, "bench: %s\n", what);
    exit(1);
}

static int bn_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v; prints "p50_us=.. p90_us=.. p99_us=.. mean_us=.. max_us=.." for
 * samples in seconds. */
static inline void bn_print_percentiles(double *v, size_t n)
{
    double sum = 0;
    if (n == 0) {
        printf("samples=0");
        return;
    }
    qsort(v, n, sizeof *v, bn_cmp_double);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
#define BN_PCT(p) (v[(size_t)((double)(n - 1) * (p) + 0.5)] * 1e6)
    printf("samples=%zu p50_us=%.1f p90_us=%.1f p99_us=%.1f mean_us=%.1f max_us=%.1f", n,
           BN_PCT(0.50), BN_PCT(0.90), BN_PCT(0.99), sum / (double)n * 1e6, v[n - 1] * 1e6);
#undef BN_PCT
}

/* A body of len printable bytes (no newline), different per message. */
static inline void bn_fill_body(char *buf, size_t len, unsigned long seq)
{
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    int n = snprintf(buf, len + 1, "m%lu ", seq);
    for (size_t i = n > 0 ? (size_t)n : 0; i < len; i++)
        buf[i] = alpha[(i + seq) % (sizeof alpha - 1)];
}

/* ---- rabbitmq-c ---------------------------------------------------- */

static inline void bn_check_rpc(amqp_connection_state_t c, const char *what)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return;
    fprintf(stderr, "bench: %s failed (reply type %d", what, r.reply_type);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        fprintf(stderr, ": %s", amqp_error_string2(r.library_error));
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        fprintf(stderr, ": %d %.*s", m->reply_code, (int)m->reply_text.len,
                (char *)m->reply_text.bytes);
    }
    fprintf(stderr, ")\n");
    exit(1);
}

/* Connect and log in to the URI (amqp://user:pass@host:port/vhost); opens
 * channel 1. */
static inline amqp_connection_state_t bn_connect(const char *uri)
{
    struct amqp_connection_info info;
    char *buf = strdup(uri);
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    amqp_rpc_reply_t r;

    amqp_default_connection_info(&info);
    if (!buf || amqp_parse_url(buf, &info) != AMQP_STATUS_OK)
        bn_die("cannot parse the broker URI");
    if (!s || amqp_socket_open(s, info.host, info.port) != AMQP_STATUS_OK)
        bn_die("cannot connect to the broker");
    r = amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        bn_die("login refused");
    amqp_channel_open(c, 1);
    bn_check_rpc(c, "channel.open");
    free(buf);
    return c;
}

static inline void bn_close(amqp_connection_state_t c)
{
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
}

/* The mailbox arguments of broker/topology.c, same values and field types
 * (signed 64-bit integers, long strings). */
static inline void bn_declare_mailbox(amqp_connection_state_t c, const char *queue,
                                      int64_t max_length)
{
    amqp_table_entry_t e[5];
    amqp_table_t args = {5, e};
    e[0].key = amqp_cstring_bytes("x-max-length");
    e[0].value.kind = AMQP_FIELD_KIND_I64;
    e[0].value.value.i64 = max_length;
    e[1].key = amqp_cstring_bytes("x-overflow");
    e[1].value.kind = AMQP_FIELD_KIND_UTF8;
    e[1].value.value.bytes = amqp_cstring_bytes("reject-publish");
    e[2].key = amqp_cstring_bytes("x-message-ttl");
    e[2].value.kind = AMQP_FIELD_KIND_I64;
    e[2].value.value.i64 = 604800000;
    e[3].key = amqp_cstring_bytes("x-dead-letter-exchange");
    e[3].value.kind = AMQP_FIELD_KIND_UTF8;
    e[3].value.value.bytes = amqp_cstring_bytes("fleet.dlx");
    e[4].key = amqp_cstring_bytes("x-queue-type");
    e[4].value.kind = AMQP_FIELD_KIND_UTF8;
    e[4].value.value.bytes = amqp_cstring_bytes("classic");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(queue), 0, 1, 0, 0, args);
    bn_check_rpc(c, "queue.declare (mailbox arguments)");
}

/* A persistent, mandatory publish to the default exchange, as fleetfs
 * does it (content type, message id, type). */
static inline int bn_publish(amqp_connection_state_t c, const char *queue, const char *body,
                             size_t len, unsigned long seq)
{
    amqp_basic_properties_t p;
    char id[40];
    snprintf(id, sizeof id, "%032lx", seq);
    memset(&p, 0, sizeof p);
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 2;
    p.message_id = amqp_cstring_bytes(id);
    p.type = amqp_cstring_bytes("coord");
    return amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0, &p,
                              (amqp_bytes_t){len, (void *)body});
}

/* Reads frames until confirms (acks/nacks) have covered delivery tag
 * `upto`; returns the number of nacks and returns seen.  *acked is the
 * highest tag confirmed so far. */
static inline unsigned bn_wait_confirms(amqp_connection_state_t c, uint64_t upto, uint64_t *acked)
{
    unsigned bad = 0;
    while (*acked < upto) {
        amqp_frame_t f;
        int rc = amqp_simple_wait_frame(c, &f);
        if (rc != AMQP_STATUS_OK)
            bn_die("connection lost while waiting for confirms");
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            *acked = a->delivery_tag;
        } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            amqp_basic_nack_t *a = f.payload.method.decoded;
            *acked = a->delivery_tag;
            bad++;
        } else if (f.payload.method.id == AMQP_BASIC_RETURN_METHOD) {
            amqp_message_t m;
            bad++;
            amqp_read_message(c, f.channel, &m, 0);
            amqp_destroy_message(&m);
        } else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
            bn_die("the broker closed the channel");
        }
    }
    amqp_maybe_release_buffers(c);
    return bad;
}

#endif
