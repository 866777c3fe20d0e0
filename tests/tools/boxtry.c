/* SPDX-License-Identifier: Apache-2.0 */
/* boxtry — drives broker/'s mailboxes ("boxes", broker/conn.h) against a
 * real broker, one command per line on stdin, so that an integration test
 * (t0375) proves the broker layer's behaviour before fleetfs uses it: which
 * box a routed publish or a broadcast reaches, what a reconnect, a removal
 * or a channel the broker closes does to each box.
 *
 *   boxtry COORD_ID DELIVERY_LOG [-k KEY,KEY...] [-m MAX_LENGTH] [-p PREFETCH] [-q QUEUE_TYPE]
 *
 * The broker URI is $FLEET_BROKER_URI (vhost $FLEET_VHOST when set).  Box 0
 * is lead.COORD_ID.inbox, bound to fleet.msg with -k's keys.  Every
 * delivery is appended to DELIVERY_LOG as "BOX EPOCH TAG REDELIVERED BODY"
 * before the box's mode decides: ack at once (the default), ack after a
 * millisecond's work (slow), or hold (acked later by "ackall").  Commands, each answered by exactly one line:
 *
 *   add BOX QUEUE EXCHANGE|- [KEY...] br_box_add      -> ok | error ERRNO-TEXT
 *   remove BOX delete|keep            br_box_remove   -> FE-NAME DETAIL
 *   pub EXCHANGE KEY PROBE|- ID BODY  br_publish_route -> FE-NAME unread=0|1 DETAIL
 *   flood EXCHANGE KEY N PREFIX       N routed publishes, bodies PREFIX-1..N -> ok N | FE-NAME at I
 *   mode BOX ack|slow|hold            -> ok (slow: ack after 1 ms of work)
 *   ackall BOX                        br_ack_box of the highest held tag, multiple -> FE-NAME
 *   wait BOX ok|none|exclusive|... S  until the box's consumer is in that state -> ok | timeout STATUS
 *   status BOX                        -> STATE epoch=N bound=0|1 REASON | BIND-REASON
 *   agentq GID                        br_agent_queue  -> agent.GID.inbox
 *   quit                              stop (the broker takes back what is held) -> bye
 *
 * Several commands on one line, separated by ';', run back to back (one
 * answer line each).  Exit 0 after quit or end of input, 2 on usage errors.
 */
#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/conn.h"

#define BT_BOXES 64

typedef struct {
    GMutex m;
    FILE *log;
    bool hold[BT_BOXES];
    bool slow[BT_BOXES];
    uint64_t held_epoch[BT_BOXES];
    uint64_t held_tag[BT_BOXES];
} bt_state;

static bt_state bt;

static br_action bt_deliver(void *ud, unsigned box, uint64_t epoch, uint64_t tag, bool redelivered,
                            const char *body, size_t len)
{
    br_action act = BR_ACK;
    (void)ud;
    g_mutex_lock(&bt.m);
    fprintf(bt.log, "%u %llu %llu %d %.*s\n", box, (unsigned long long)epoch,
            (unsigned long long)tag, redelivered ? 1 : 0, (int)len, body);
    fflush(bt.log);
    if (box < BT_BOXES && bt.slow[box])
        g_usleep(1000); /* a callback that works a little: deliveries queue up behind it */
    if (box < BT_BOXES && bt.hold[box]) {
        act = BR_KEEP;
        if (bt.held_epoch[box] != epoch || tag > bt.held_tag[box])
            bt.held_tag[box] = tag;
        bt.held_epoch[box] = epoch;
    }
    g_mutex_unlock(&bt.m);
    return act;
}

static const char *bt_cons(br_cons c)
{
    static const char *names[] = {"none", "ok", "waiting", "exclusive", "mismatch", "error"};
    return (unsigned)c < G_N_ELEMENTS(names) ? names[c] : "?";
}

static void bt_status(br_conn *c, unsigned box, char *out, size_t n)
{
    br_box_status st;
    if (!br_box_status_get(c, box, &st)) {
        snprintf(out, n, "absent");
        return;
    }
    snprintf(out, n, "%s epoch=%llu bound=%d %s | %s", bt_cons(st.consumer),
             (unsigned long long)st.epoch, st.bound ? 1 : 0, st.reason, st.bind_reason);
}

static void bt_wait(br_conn *c, char **a, int n)
{
    char out[1200];
    br_box_status st;
    gint64 until;
    if (n < 4) {
        puts("usage: wait BOX STATE SECONDS");
        return;
    }
    until = g_get_monotonic_time() + (gint64)(atof(a[3]) * G_USEC_PER_SEC);
    while (g_get_monotonic_time() < until) {
        if (br_box_status_get(c, (unsigned)atoi(a[1]), &st) &&
            strcmp(bt_cons(st.consumer), a[2]) == 0) {
            puts("ok");
            return;
        }
        g_usleep(10000);
    }
    bt_status(c, (unsigned)atoi(a[1]), out, sizeof out);
    printf("timeout %s\n", out);
}

static void bt_pub(br_conn *c, char **a, int n)
{
    char detail[600], *body;
    bool unread = false;
    fe_code r;
    if (n < 6) {
        puts("usage: pub EXCHANGE KEY PROBE|- ID BODY");
        return;
    }
    body = g_strjoinv(" ", a + 5);
    r = br_publish_route(c, a[1], a[2], strcmp(a[3], "-") ? a[3] : NULL, a[4], body, strlen(body),
                         0, 5000, &unread, detail, sizeof detail);
    printf("%s unread=%d %s\n", fe_name(r), unread ? 1 : 0, detail);
    g_free(body);
}

static void bt_flood(br_conn *c, char **a, int n)
{
    char detail[600], body[200], id[64];
    long count;
    if (n < 5) {
        puts("usage: flood EXCHANGE KEY N PREFIX");
        return;
    }
    count = atol(a[3]);
    for (long i = 1; i <= count; i++) {
        fe_code r;
        snprintf(body, sizeof body, "%s-%ld", a[4], i);
        snprintf(id, sizeof id, "%s-%ld", a[4], i);
        r = br_publish_route(c, a[1], a[2], NULL, id, body, strlen(body), 0, 5000, NULL, detail,
                             sizeof detail);
        if (r != FE_OK) {
            printf("%s at %ld %s\n", fe_name(r), i, detail);
            return;
        }
    }
    printf("ok %ld\n", count);
}

static void bt_command(br_conn *c, char **a, int n)
{
    char out[1200];
    unsigned box = n > 1 ? (unsigned)atoi(a[1]) : 0;

    if (strcmp(a[0], "add") == 0 && n >= 4) {
        if (br_box_add(c, box, a[2], strcmp(a[3], "-") ? a[3] : NULL,
                       (const char *const *)(a + 4)) == 0)
            puts("ok");
        else
            printf("error %s\n", strerror(errno));
    } else if (strcmp(a[0], "remove") == 0 && n >= 3) {
        fe_code r = br_box_remove(c, box, strcmp(a[2], "delete") == 0, 10000, out, sizeof out);
        printf("%s %s\n", fe_name(r), out);
    } else if (strcmp(a[0], "pub") == 0) {
        bt_pub(c, a, n);
    } else if (strcmp(a[0], "flood") == 0) {
        bt_flood(c, a, n);
    } else if (strcmp(a[0], "mode") == 0 && n >= 3 && box < BT_BOXES) {
        g_mutex_lock(&bt.m);
        bt.hold[box] = strcmp(a[2], "hold") == 0;
        bt.slow[box] = strcmp(a[2], "slow") == 0;
        g_mutex_unlock(&bt.m);
        puts("ok");
    } else if (strcmp(a[0], "ackall") == 0 && n >= 2 && box < BT_BOXES) {
        uint64_t epoch, tag;
        g_mutex_lock(&bt.m);
        epoch = bt.held_epoch[box];
        tag = bt.held_tag[box];
        bt.held_tag[box] = 0;
        g_mutex_unlock(&bt.m);
        puts(tag ? fe_name(br_ack_box(c, box, epoch, tag, true, 5000)) : "nothing");
    } else if (strcmp(a[0], "agentq") == 0 && n >= 2) {
        br_agent_queue(a[1], out, sizeof out);
        puts(out);
    } else if (strcmp(a[0], "wait") == 0) {
        bt_wait(c, a, n);
    } else if (strcmp(a[0], "status") == 0 && n >= 2) {
        bt_status(c, box, out, sizeof out);
        puts(out);
    } else {
        printf("unknown command: %s\n", a[0]);
    }
}

int main(int argc, char **argv)
{
    br_config cfg = {0};
    br_callbacks cb = {.deliver_box = bt_deliver};
    char *uris[2] = {getenv("FLEET_BROKER_URI"), NULL};
    char **lead_keys = NULL, line[4096];
    br_conn *c;
    bool quit = false;
    int opt;

    cfg.max_length = 10000;
    cfg.prefetch = 64;
    cfg.queue_type = "classic";
    while ((opt = getopt(argc, argv, "k:m:p:q:")) != -1) {
        if (opt == 'k')
            lead_keys = g_strsplit(optarg, ",", -1);
        else if (opt == 'm')
            cfg.max_length = atol(optarg);
        else if (opt == 'p')
            cfg.prefetch = atoi(optarg);
        else if (opt == 'q')
            cfg.queue_type = optarg;
        else
            return 2;
    }
    if (argc - optind != 2 || !uris[0]) {
        fprintf(stderr,
                "usage: boxtry COORD_ID DELIVERY_LOG [-k KEYS] [-m MAX] [-p PREFETCH] [-q TYPE] "
                "(URI in FLEET_BROKER_URI)\n");
        return 2;
    }
    bt.log = fopen(argv[optind + 1], "a");
    if (!bt.log) {
        perror(argv[optind + 1]);
        return 2;
    }
    g_mutex_init(&bt.m);
    cfg.uris = uris;
    cfg.vhost = getenv("FLEET_VHOST");
    cfg.coord_id = argv[optind];
    cfg.message_ttl_ms = 7LL * 24 * 3600 * 1000;
    cfg.host = "boxtry";
    cfg.lead_bind_keys = (const char *const *)lead_keys;
    c = br_start(&cfg, &cb);
    br_wait_first_attempt(c, 10000);
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (!quit && fgets(line, sizeof line, stdin)) {
        gchar **cmds = g_strsplit(line, ";", -1);
        for (gchar **cmd = cmds; *cmd && !quit; cmd++) {
            gchar **a;
            g_strstrip(*cmd);
            if (!(*cmd)[0])
                continue;
            if (strcmp(*cmd, "quit") == 0) {
                quit = true;
                break;
            }
            a = g_strsplit_set(*cmd, " ", -1);
            bt_command(c, a, (int)g_strv_length(a));
            g_strfreev(a);
        }
        g_strfreev(cmds);
    }
    br_free(c);
    if (quit)
        puts("bye");
    g_strfreev(lead_keys);
    fclose(bt.log);
    return 0;
}
