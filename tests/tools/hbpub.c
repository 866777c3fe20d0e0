/* SPDX-License-Identifier: Apache-2.0 */
/* hbpub — publishes heartbeats onto fleet.roster the way any holder of a
 * broker login could: good, forged, unsigned, stale or from the future
 * (tests), or many at once (the presence benchmark).
 *
 *   hbpub URI --from ID [--key KEYFILE] [--tamper] [--sent-offset SEC]
 *             [--interval MS] [--agent WORDS] [--leaving] [--routing-key RK]
 *             [--agents GID[:GID...]] [--tamper-agents] [--group-interval MS]
 *   hbpub URI --body STR --routing-key RK
 *   hbpub URI --flood N --key-dir DIR --trust DIR [--interval MS] [--seconds S]
 *             [--group-size G [--group-rate R] | --self-every K]
 *
 * One heartbeat: built like fleetfs builds its own, signed with --key
 * unless none is given (unsigned); --tamper changes the agent words after
 * signing; --sent-offset moves sentAt/expiresAt by SEC seconds (negative:
 * old; positive: from the future).  The routing key defaults to
 * roster.hbpub.<from>.  --agents adds the agents extension (SPEC section
 * 10): those gids, state "ready: idle", in group "hbpub" (gids of any host:
 * the tool lies as asked); --tamper-agents changes the first agent's state
 * after signing.  --group-interval announces that group interval
 * (groupInterval, signed with gsig: doc/protocol.md section 11).
 *
 * --flood: N leads named bench000.. bench<N-1>, each with its own key in
 * --key-dir (made on first use, the public half copied to --trust as
 * <name>.pub), each heartbeating every --interval (default 5000 ms) for
 * --seconds (default 60), spread evenly over the interval, all from this
 * one process and connection.  --group-size G: lead i is in group g<i/G>
 * (the agents extension with that lead group and no agent), published the
 * way fleet_view=groups publishes, roster.hbpub.g=g<i/G>.bench<i>
 * (doc/protocol.md section 11).  --group-rate R: as fleet_view=groups with
 * group_rate=R does (doc/presence.md, "Group heartbeats"), lead i announces
 * the group interval Ig = max(interval, G/R s, in whole seconds) and only
 * every Ig is its heartbeat published under the group key; the others go
 * under the plain key roster.hbpub.bench<i>.  Every lead's first heartbeat
 * goes to its group (a fleet starting at once); after that the members of
 * group g send theirs in the rounds r with (r + g) % (Ig/interval) == 0, as
 * fleetfs aligns a group's group heartbeats to the same slot of the clock
 * (groups spread over the slots by their phase), and a group's members are
 * spread over the round (hosts heartbeat at random moments of an interval).
 * --self-every K: as a host in no group publishes under fleet_view=auto
 * (doc/scaling.md, "Fourth pass"), lead i's first heartbeat and then one
 * in K go under roster.hbpub.s=bench<i>.bench<i> (the self word, which its
 * own narrowed queue binds), the others under the plain key; lead i's in
 * the rounds r with (r + i) % K == 0 (hosts that started at different
 * moments), so every round carries about N/K of them.
 * Prints "S heartbeats from N leads (K to their groups, J to themselves)".  Exit 0 ok, 2 on
 * usage or connection errors.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/sign.h"

typedef struct {
    const char *uri, *from, *key, *agent, *rk, *body, *key_dir, *trust, *agents;
    long sent_offset, interval, flood, seconds, group_size, group_rate, group_interval, self_every;
    bool tamper, leaving, tamper_agents;
} hb_args;

static void die(const char *what)
{
    fprintf(stderr, "hbpub: %s\n", what);
    exit(2);
}

static amqp_connection_state_t hb_connect(const char *uri)
{
    struct amqp_connection_info info;
    char *buf = g_strdup(uri);
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    struct timeval tv = {10, 0};

    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK)
        die("cannot parse the broker URI");
    if (!s || amqp_socket_open_noblock(s, info.host, info.port, &tv) != AMQP_STATUS_OK)
        die("cannot connect to the broker");
    if (amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
            .reply_type != AMQP_RESPONSE_NORMAL)
        die("login refused");
    if (!amqp_channel_open(c, 1))
        die("cannot open a channel");
    /* the same declaration fleetfs makes (idempotent); an exchange made
     * otherwise by the operator (durable, scripts/broker host add), or a
     * login that may not declare it, then checks it is there (passive) */
    if (!amqp_exchange_declare(c, 1, amqp_cstring_bytes("fleet.roster"),
                               amqp_cstring_bytes("topic"), 0, 0, 0, 0, amqp_empty_table)) {
        amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
        amqp_channel_close_ok_t ok = {0};
        if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
            r.reply.id != AMQP_CHANNEL_CLOSE_METHOD ||
            amqp_send_method(c, 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK ||
            !amqp_channel_open(c, 1) ||
            !amqp_exchange_declare(c, 1, amqp_cstring_bytes("fleet.roster"),
                                   amqp_cstring_bytes("topic"), 1, 0, 0, 0, amqp_empty_table))
            die("cannot declare fleet.roster");
    }
    g_free(buf);
    return c;
}

static void hb_publish(amqp_connection_state_t c, const char *rk, const char *body, size_t len,
                       long ttl_ms)
{
    amqp_basic_properties_t p;
    char exp[32];
    memset(&p, 0, sizeof p);
    snprintf(exp, sizeof exp, "%ld", ttl_ms);
    p._flags =
        AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_EXPIRATION_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 1;
    p.expiration = amqp_cstring_bytes(exp);
    if (amqp_basic_publish(c, 1, amqp_cstring_bytes("fleet.roster"), amqp_cstring_bytes(rk), 0, 0,
                           &p, (amqp_bytes_t){.len = len, .bytes = (void *)body}) != AMQP_STATUS_OK)
        die("publish failed");
}

/* the agents extension: gids, each "ready: idle" in group hbpub */
static void hb_agents(env_heartbeat *h, const char *list)
{
    char **gids = g_strsplit(list, ":", -1);
    size_t n = g_strv_length(gids);

    h->ext = true;
    h->groups = calloc(1, sizeof(char *));
    h->agents = calloc(n ? n : 1, sizeof(env_hb_agent));
    if (!h->groups || !h->agents)
        die("out of memory");
    h->n_agents = n;
    for (size_t i = 0; i < n; i++) {
        g_strlcpy(h->agents[i].gid, gids[i], sizeof h->agents[i].gid);
        g_strlcpy(h->agents[i].state, "ready: idle", sizeof h->agents[i].state);
        h->agents[i].groups = calloc(2, sizeof(char *));
        if (!h->agents[i].groups || !(h->agents[i].groups[0] = strdup("hbpub")))
            die("out of memory");
        h->agents[i].n_groups = 1;
    }
    g_strfreev(gids);
}

static char *hb_make(const char *from, const sig_key *k, const hb_args *a, int64_t started,
                     size_t *len, const char *group)
{
    env_heartbeat h;
    int64_t now = env_now_ms() + (int64_t)a->sent_offset * 1000;
    memset(&h, 0, sizeof h);
    h.v = 1;
    g_strlcpy(h.from, from, sizeof h.from);
    g_strlcpy(h.host, "hbpub", sizeof h.host);
    g_strlcpy(h.version, "hbpub", sizeof h.version);
    env_time_format(now, h.sentAt);
    env_time_format(now + 3 * a->interval, h.expiresAt);
    env_time_format(started, h.startedAt);
    h.interval_ms = a->interval;
    g_strlcpy(h.agent, a->agent ? a->agent : "ready: nothing to deliver (backend hbpub)",
              sizeof h.agent);
    h.leaving = a->leaving;
    if (a->agents)
        hb_agents(&h, a->agents);
    if (a->group_interval > 0) {
        h.has_group_iv = true;
        h.group_interval_ms = a->group_interval;
    }
    if (group && !a->agents) {
        h.ext = true;
        h.groups = calloc(2, sizeof(char *));
        h.agents = calloc(1, sizeof(env_hb_agent));
        if (!h.groups || !h.agents || !(h.groups[0] = strdup(group)))
            die("out of memory");
        h.n_groups = 1;
    }
    if (k && sig_sign_hb(k, &h) < 0)
        die("cannot sign");
    if (a->tamper)
        g_strlcpy(h.agent, "tampered after signing", sizeof h.agent);
    if (a->tamper_agents && h.n_agents > 0)
        g_strlcpy(h.agents[0].state, "tampered after signing", sizeof h.agents[0].state);
    {
        char *body = env_hb_encode(&h, len);
        env_hb_free(&h);
        return body;
    }
}

static sig_key *flood_key(const hb_args *a, const char *name)
{
    char *path = g_strdup_printf("%s/%s.key", a->key_dir, name);
    char *err = NULL;
    sig_key *k;
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        char *pub = g_strdup_printf("%s.pub", path), *dst, *data = NULL;
        gsize n;
        if (sig_keygen(path, &err) < 0 || !g_file_get_contents(pub, &data, &n, NULL))
            die(err ? err : "keygen failed");
        dst = g_strdup_printf("%s/%s.pub", a->trust, name);
        if (!g_file_set_contents(dst, data, (gssize)n, NULL))
            die("cannot write into the trust directory");
        g_free(dst);
        g_free(data);
        g_free(pub);
    }
    k = sig_load_secret(path, &err);
    if (!k)
        die(err);
    g_free(path);
    return k;
}

static int flood(const hb_args *a)
{
    amqp_connection_state_t c = hb_connect(a->uri);
    sig_key **keys = g_new0(sig_key *, a->flood);
    char(*names)[16] = g_malloc0(sizeof(*names) * (size_t)a->flood);
    int64_t started = env_now_ms(), end;
    long sent = 0, to_groups = 0, to_self = 0, round_no = 0, every = 1;
    hb_args fa = *a;

    if (a->group_size > 0 && a->group_rate > 0) {
        /* Ig = max(interval, G/R s), whole seconds, as presence/heartbeat.c */
        long gi = (a->group_size * 1000 / a->group_rate + 999) / 1000 * 1000;
        fa.group_interval = gi > a->interval ? gi : a->interval;
        every = (fa.group_interval + a->interval / 2) / a->interval;
        if (every < 1)
            every = 1;
    }
    a = &fa;

    for (long i = 0; i < a->flood; i++) {
        snprintf(names[i], sizeof names[i], "bench%03ld", i);
        keys[i] = flood_key(a, names[i]);
    }
    end = g_get_monotonic_time() + (int64_t)a->seconds * 1000000;
    while (g_get_monotonic_time() < end) {
        int64_t round = g_get_monotonic_time();
        for (long i = 0; i < a->flood; i++) {
            char rk[96], group[32];
            size_t len;
            char *body;
            snprintf(group, sizeof group, "g%ld", a->group_size > 0 ? i / a->group_size : 0);
            body = hb_make(names[i], keys[i], a, started, &len, a->group_size > 0 ? group : NULL);
            /* --group-rate: a group's members spread over the round (hosts
             * start at random moments), their group heartbeats in the same
             * round, as fleetfs aligns them (topo_roster_group_due) */
            long slot = every > 1 && a->flood % a->group_size == 0
                            ? (i % a->group_size) * (a->flood / a->group_size) + i / a->group_size
                            : i;
            int64_t due = round + (int64_t)a->interval * 1000 * slot / a->flood;
            int64_t wait = due - g_get_monotonic_time();
            if (wait > 0)
                g_usleep((gulong)wait);
            if (a->group_size > 0 &&
                (round_no == 0 || (round_no + i / a->group_size) % every == 0)) {
                snprintf(rk, sizeof rk, "roster.hbpub.g=%s.%s", group, names[i]);
                to_groups++;
            } else if (a->self_every > 0 &&
                       (round_no == 0 || (round_no + i) % a->self_every == 0)) {
                snprintf(rk, sizeof rk, "roster.hbpub.s=%s.%s", names[i], names[i]);
                to_self++;
            } else {
                snprintf(rk, sizeof rk, "roster.hbpub.%s", names[i]);
            }
            hb_publish(c, rk, body, len, 3 * a->interval);
            free(body);
            sent++;
        }
        round_no++;
        {
            int64_t wait = round + (int64_t)a->interval * 1000 - g_get_monotonic_time();
            if (wait > 0)
                g_usleep((gulong)wait);
        }
    }
    for (long i = 0; i < a->flood; i++)
        sig_key_free(keys[i]);
    g_free(keys);
    g_free(names);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    printf("%ld heartbeats from %ld leads (%ld to their groups, %ld to themselves)\n", sent,
           a->flood, to_groups, to_self);
    return 0;
}

int main(int argc, char **argv)
{
    hb_args a = {.interval = 5000, .seconds = 60};
    amqp_connection_state_t c;
    char rk[256], *body;
    size_t len;

    if (argc < 2)
        die("usage: hbpub URI (see the top of tests/tools/hbpub.c)");
    a.uri = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(o, "--from"))
            a.from = v;
        else if (!strcmp(o, "--key"))
            a.key = v;
        else if (!strcmp(o, "--agent"))
            a.agent = v;
        else if (!strcmp(o, "--routing-key"))
            a.rk = v;
        else if (!strcmp(o, "--body"))
            a.body = v;
        else if (!strcmp(o, "--key-dir"))
            a.key_dir = v;
        else if (!strcmp(o, "--trust"))
            a.trust = v;
        else if (!strcmp(o, "--sent-offset"))
            a.sent_offset = v ? atol(v) : 0;
        else if (!strcmp(o, "--interval"))
            a.interval = v ? atol(v) : 0;
        else if (!strcmp(o, "--flood"))
            a.flood = v ? atol(v) : 0;
        else if (!strcmp(o, "--group-size"))
            a.group_size = v ? atol(v) : 0;
        else if (!strcmp(o, "--group-rate"))
            a.group_rate = v ? atol(v) : 0;
        else if (!strcmp(o, "--self-every"))
            a.self_every = v ? atol(v) : 0;
        else if (!strcmp(o, "--group-interval"))
            a.group_interval = v ? atol(v) : 0;
        else if (!strcmp(o, "--seconds"))
            a.seconds = v ? atol(v) : 0;
        else if (!strcmp(o, "--agents"))
            a.agents = v;
        else {
            takes = false;
            if (!strcmp(o, "--tamper"))
                a.tamper = true;
            else if (!strcmp(o, "--leaving"))
                a.leaving = true;
            else if (!strcmp(o, "--tamper-agents"))
                a.tamper_agents = true;
            else
                die("unknown option (see the top of tests/tools/hbpub.c)");
        }
        if (takes && !v)
            die("an option needs a value");
        i += takes;
    }
    if (a.interval < 1)
        die("--interval must be > 0");
    if (a.flood > 0) {
        if (!a.key_dir || !a.trust)
            die("--flood needs --key-dir and --trust");
        if (a.self_every < 0 || (a.self_every > 0 && a.group_size > 0))
            die("--self-every is for leads in no group (no --group-size), K > 0");
        return flood(&a);
    }
    c = hb_connect(a.uri);
    if (a.body) {
        if (!a.rk)
            die("--body needs --routing-key");
        hb_publish(c, a.rk, a.body, strlen(a.body), 3 * a.interval);
    } else {
        sig_key *k = NULL;
        char *err = NULL;
        if (!a.from)
            die("--from is needed");
        if (a.key && !(k = sig_load_secret(a.key, &err)))
            die(err);
        body = hb_make(a.from, k, &a, env_now_ms(), &len, NULL);
        if (!body)
            die("cannot encode");
        snprintf(rk, sizeof rk, "roster.hbpub.%s", a.from);
        hb_publish(c, a.rk ? a.rk : rk, body, len, 3 * a.interval);
        free(body);
        sig_key_free(k);
    }
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    return 0;
}
