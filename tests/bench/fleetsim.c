/* SPDX-License-Identifier: Apache-2.0 */
/* fleetsim — the broker-side load of a fleet without its daemons, for the
 * presence scaling measurements (doc/scaling.md).
 *
 *   fleetsim URI roster N SECONDS   N connections, each with a roster queue
 *                                   like a daemon's (exclusive, auto-delete,
 *                                   x-max-length, bound to fleet.roster with
 *                                   roster.#) and a no-ack consumer on it
 *   fleetsim URI groups N SECONDS G like roster, but each queue bound the way
 *                                   fleet_view=groups binds (doc/protocol.md
 *                                   section 11): queue i to its group
 *                                   roster.#.g=g<i/G>.#, its own heartbeats
 *                                   roster.#.bench<i> and ask.bench<i>, the
 *                                   names hbpub --flood --group-size G uses
 *   fleetsim URI groups N SECONDS G noself
 *                                   the same without roster.#.bench<i>, as
 *                                   fleet_view=groups binds since group
 *                                   heartbeats (its own come back through
 *                                   the group's binding)
 *   fleetsim URI auto N SECONDS P   like roster, but each queue bound the way
 *                                   fleet_view=auto binds once it has
 *                                   narrowed, in no group (doc/scaling.md,
 *                                   "Fourth pass"): queue i to ask.bench<i>
 *                                   and its self binding roster.#.s=bench<i>.#,
 *                                   plus P configured peers, the next P ids
 *                                   roster.#.bench<(i+1..i+P) mod N>, the
 *                                   names hbpub --flood --self-every uses
 *   fleetsim URI canary N SECONDS   N idle publishing connections, each
 *                                   publishing the empty unroutable keep-alive
 *                                   message every 1.5 s (broker/conn.c's
 *                                   canary), spread over the interval
 *
 * Heartbeats themselves come from hbpub --flood (tests/tools).  One thread
 * serves every connection through poll(2).  Prints: conns=N secs=S
 * deliveries=D rate=R (deliveries per second; roster) or publishes=P
 * rate=R (canary).  The broker's CPU is measured from outside
 * (/proc/PID/stat of beam.smp), not here.
 */
#include <poll.h>
#include <stdbool.h>
#include <unistd.h>

#include "tests/bench/bench.h"

#define SIM_MAX 4096
#define CANARY_MS 1500

static amqp_connection_state_t sim_connect(const char *uri)
{
    struct amqp_connection_info info;
    char *buf = strdup(uri);
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);

    amqp_default_connection_info(&info);
    if (!buf || amqp_parse_url(buf, &info) != AMQP_STATUS_OK)
        bn_die("cannot parse the broker URI");
    if (!s || amqp_socket_open(s, info.host, info.port) != AMQP_STATUS_OK)
        bn_die("cannot connect to the broker");
    if (amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
            .reply_type != AMQP_RESPONSE_NORMAL)
        bn_die("login refused");
    amqp_channel_open(c, 1);
    bn_check_rpc(c, "channel.open");
    free(buf);
    return c;
}

static void sim_bind(amqp_connection_state_t c, const char *queue, const char *key)
{
    amqp_queue_bind(c, 1, amqp_cstring_bytes(queue), amqp_cstring_bytes("fleet.roster"),
                    amqp_cstring_bytes(key), amqp_empty_table);
    bn_check_rpc(c, "queue.bind");
}

/* fleet_view=auto narrowed, in no group: heartbeat requests, the self
 * binding (its own heartbeat back every 6th beat), and P peers by name */
static void sim_auto_binds(amqp_connection_state_t c, const char *queue, unsigned long i,
                           unsigned long n, unsigned long peers)
{
    char key[96];
    snprintf(key, sizeof key, "ask.bench%03lu", i);
    sim_bind(c, queue, key);
    snprintf(key, sizeof key, "roster.#.s=bench%03lu.#", i);
    sim_bind(c, queue, key);
    for (unsigned long p = 1; p <= peers; p++) {
        snprintf(key, sizeof key, "roster.#.bench%03lu", (i + p) % n);
        sim_bind(c, queue, key);
    }
}

static void sim_roster_queue(amqp_connection_state_t c, unsigned long i, unsigned long group,
                             bool self, long peers, unsigned long n)
{
    amqp_table_entry_t e[1];
    amqp_table_t args = {1, e};
    char name[64];
    snprintf(name, sizeof name, "roster.sim%04lu.%08lx", i, (unsigned long)random());
    e[0].key = amqp_cstring_bytes("x-max-length");
    e[0].value.kind = AMQP_FIELD_KIND_I64;
    e[0].value.value.i64 = 10000;
    amqp_exchange_declare(c, 1, amqp_cstring_bytes("fleet.roster"), amqp_cstring_bytes("topic"), 0,
                          0, 0, 0, amqp_empty_table);
    bn_check_rpc(c, "exchange.declare fleet.roster");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 1, args);
    bn_check_rpc(c, "queue.declare (roster)");
    if (peers >= 0) {
        sim_auto_binds(c, name, i, n, (unsigned long)peers);
    } else if (group == 0) {
        sim_bind(c, name, "roster.#");
    } else {
        char keys[3][96];
        snprintf(keys[1], sizeof keys[1], "roster.#.g=g%lu.#", i / group);
        snprintf(keys[0], sizeof keys[0], "roster.#.bench%03lu", i);
        snprintf(keys[2], sizeof keys[2], "ask.bench%03lu", i);
        for (int k = self ? 0 : 1; k < 3; k++)
            sim_bind(c, name, keys[k]);
    }
    amqp_basic_consume(c, 1, amqp_cstring_bytes(name), amqp_empty_bytes, 0, 1, 1, amqp_empty_table);
    bn_check_rpc(c, "basic.consume");
}

/* Reads every frame already readable on c; returns basic.deliver count. */
static unsigned long sim_drain(amqp_connection_state_t c)
{
    unsigned long n = 0;
    for (;;) {
        amqp_frame_t f;
        struct timeval tv = {0, 0};
        int rc = amqp_simple_wait_frame_noblock(c, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK)
            bn_die("connection lost");
        if (f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_BASIC_DELIVER_METHOD)
            n++;
        if (f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD)
            bn_die("the broker closed a channel");
    }
    amqp_maybe_release_buffers(c);
    return n;
}

int main(int argc, char **argv)
{
    static amqp_connection_state_t c[SIM_MAX];
    static struct pollfd pfd[SIM_MAX];
    static double next[SIM_MAX];
    unsigned long n, deliveries = 0, publishes = 0, group = 0;
    long peers = -1; /* auto's P; -1: not auto */
    double secs, t0, end;
    bool roster, self = argc != 7, isauto = argc > 2 && strcmp(argv[2], "auto") == 0;

    if (argc != 5 && !(argc == 6 && isauto) &&
        !((argc == 6 || (argc == 7 && strcmp(argv[6], "noself") == 0)) &&
          strcmp(argv[2], "groups") == 0)) {
        fprintf(stderr, "usage: fleetsim URI roster|canary N SECONDS, URI groups N SECONDS G "
                        "[noself], or URI auto N SECONDS P\n");
        return 2;
    }
    roster = strcmp(argv[2], "roster") == 0 || strcmp(argv[2], "groups") == 0 || isauto;
    if (!roster && strcmp(argv[2], "canary") != 0)
        bn_die("mode is roster, groups, auto or canary");
    if (isauto) {
        char *end_p;
        peers = strtol(argv[5], &end_p, 10);
        if (*end_p || peers < 0 || peers > 64)
            bn_die("P is 0..64");
    } else if (argc >= 6 && (group = strtoul(argv[5], NULL, 10)) < 1) {
        bn_die("G is at least 1");
    }
    n = strtoul(argv[3], NULL, 10);
    secs = strtod(argv[4], NULL);
    if (n < 1 || n > SIM_MAX)
        bn_die("N is 1..4096");
    if (peers >= (long)n)
        bn_die("P is less than N (each queue names P other hosts)");
    srandom((unsigned)getpid());
    for (unsigned long i = 0; i < n; i++) {
        c[i] = sim_connect(argv[1]);
        if (roster)
            sim_roster_queue(c[i], i, group, self, peers, n);
        pfd[i] = (struct pollfd){.fd = amqp_get_sockfd(c[i]), .events = POLLIN};
    }
    t0 = bn_now();
    for (unsigned long i = 0; i < n; i++)
        next[i] = t0 + (double)CANARY_MS / 1000.0 * (double)i / (double)n;
    /* say when the fleet is up, for whoever starts the measurement */
    fprintf(stderr, "fleetsim: %lu %s connections up\n", n, argv[2]);
    end = t0 + secs;
    for (double now = t0; now < end; now = bn_now()) {
        int wait = 100;
        if (!roster) {
            for (unsigned long i = 0; i < n; i++) {
                if (next[i] > now)
                    continue;
                if (amqp_basic_publish(c[i], 1, amqp_empty_bytes, amqp_empty_bytes, 0, 0, NULL,
                                       amqp_empty_bytes) != AMQP_STATUS_OK)
                    bn_die("publish failed");
                publishes++;
                next[i] += CANARY_MS / 1000.0;
            }
            wait = 5;
        }
        if (poll(pfd, n, wait) < 0)
            bn_die("poll");
        for (unsigned long i = 0; i < n; i++)
            if (pfd[i].revents)
                deliveries += sim_drain(c[i]);
    }
    secs = bn_now() - t0;
    if (roster)
        printf("conns=%lu secs=%.2f deliveries=%lu rate=%.1f\n", n, secs, deliveries,
               (double)deliveries / secs);
    else
        printf("conns=%lu secs=%.2f publishes=%lu rate=%.1f\n", n, secs, publishes,
               (double)publishes / secs);
    for (unsigned long i = 0; i < n; i++)
        bn_close(c[i]);
    return 0;
}
