/* SPDX-License-Identifier: Apache-2.0 */
/* broker/session.c — the life of one broker connection.
 *
 * Connecting goes through the configured URIs in turn with capped
 * exponential backoff: parse the URI, open the socket (TLS with the
 * configured CA), log in, open one channel per concern (conn_int.h), then
 * declare the dead letters and become the exclusive consumer of the own
 * mailbox and receipt queue.  Each step says, when it fails, what to do.
 *
 * Channel errors: a channel.close from the broker (404 on a passive
 * declare, 406 on an argument mismatch, 403 on an exclusive consumer) is
 * answered with channel.close-ok before the channel number is reused;
 * reusing it without that kills the whole connection (BROKER-FACTS.md).
 * A channel-level problem stays channel-level: only that channel is
 * reopened and only its consumer restarted.  Every (re)opening of the
 * consumer channel starts a new epoch: delivery tags belong to a channel.
 * The channel helpers (open, reopen, a refused call classified) are
 * chan.c's; the login's properties are sideconn.c's sc_login.
 */
#include "broker/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "broker/boxes.h"
#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/death.h"
#include "broker/explain.h"
#include "broker/probes.h"
#include "broker/pubchan.h"
#include "broker/quirks.h"
#include "broker/sideconn.h"
#include "broker/slots.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "broker/uri.h"
#include "broker/watchdog.h"
#include "fleetfs/base/log.h"

/* ------------------------------------------------------------------ */
/* connection set-up                                                   */

/* A login without configure rights on fleet.* (a per-host login, made by
 * scripts/broker host add) may not declare the dead letters (403): they are
 * the operator's, and what matters is that they are there.  Passive
 * declares need no permission.  Returns -1 when the connection died. */
static int dead_letters_present(br_conn *c, bool *present)
{
    int code;
    char text[256];

    *present = amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLX),
                                     amqp_cstring_bytes("fanout"), 1, 1, 0, 0, amqp_empty_table) &&
               amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLQ), 1, 1, 0, 0,
                                  amqp_empty_table);
    if (!*present && br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
        br_drop_connection(c, text);
        return -1;
    }
    return 0;
}

/* fleet.dead (headers, durable), bound to fleet.dlx, which routes every
 * dead letter by its sender's BR_HEADER_HOST to that host's
 * lead.<host>.dead (broker/death.h).  A login that may configure makes
 * both, and binds its own lead.<me>.dead (boxes.c); a per-host login may
 * not: `fleetfs declare` made them.  Returns -1 when the connection died. */
static int setup_dead_home(br_conn *c)
{
    int code;
    char text[256];

    if (amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(BR_EXCHANGE_DEAD),
                              amqp_cstring_bytes("headers"), 0, 1, 0, 0, amqp_empty_table) &&
        amqp_exchange_bind(c->amqp, CH_PROBE, amqp_cstring_bytes(BR_EXCHANGE_DEAD),
                           amqp_cstring_bytes(TOPO_DLX), amqp_cstring_bytes(""),
                           amqp_empty_table)) {
        c->dead_bindable = true;
        c->dead_unbound_said = false;
        c->consumer_retry_ms = br_now_ms(); /* bind lead.<me>.dead in the next round */
        return 0;
    }
    if (br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
        br_drop_connection(c, text);
        return -1;
    }
    if (code != 403 && code != 404) {
        log_warn("broker: cannot declare %s or bind it to %s (%d %s): dead letters of this "
                 "host's messages do not come home until it can (they stay in %s)",
                 BR_EXCHANGE_DEAD, TOPO_DLX, code, text, TOPO_DLQ);
        return 0;
    }
    br_dead_not_bindable(c, text);
    return 0;
}

static void setup_dead_letters(br_conn *c)
{
    amqp_table_entry_t e[TOPO_DLQ_ARGS];
    amqp_table_t args = topo_dlq_args(&c->cfg, e);
    int code;
    char text[256];
    bool present;

    if (!amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLX),
                               amqp_cstring_bytes("fanout"), 0, 1, 0, 0, amqp_empty_table) ||
        !amqp_queue_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLQ), 0, 1, 0, 0, args) ||
        !amqp_queue_bind(c->amqp, CH_PROBE, amqp_cstring_bytes(TOPO_DLQ),
                         amqp_cstring_bytes(TOPO_DLX), amqp_cstring_bytes(""), amqp_empty_table)) {
        c->dead_bindable = false;
        if (br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
            br_drop_connection(c, text);
            return;
        }
        if (code == 403) {
            if (dead_letters_present(c, &present) < 0)
                return;
            if (present) {
                br_dead_not_bindable(c, "403 ACCESS_REFUSED");
                return;
            }
        }
        /* optional: the connection and the consumers carry on */
        log_warn("broker: cannot declare %s/%s (%d %s); poison messages may be dropped, not "
                 "dead-lettered, until it can; %s",
                 TOPO_DLX, TOPO_DLQ, code, text,
                 code == 406   ? "fleet.dlq exists with other arguments (a classic one from before "
                                 "queue_type=quorum?): delete it once (rabbitmqctl delete_queue "
                                 "fleet.dlq) and fleetfs declares it anew"
                 : code == 404 ? "its node is down (a classic queue lives on one node; use "
                                 "queue_type=quorum on a cluster)"
                 : code == 403 ? "they are missing and this login may not make them: an operator "
                                 "runs fleetfs-broker host add, which makes them"
                               : "give this user configure rights on them");
    } else {
        setup_dead_home(c);
    }
}

/* Declare exchange x (durable) of type; 1 when made or already there as
 * declared, 0 when this login may not make it (403; then passively: *there
 * says whether it exists), -1 when the connection died.  Any other refusal
 * is logged with what to do, and is 0 with *there false. */
static int declare_exchange(br_conn *c, const char *x, const char *type, bool *there,
                            const char *without)
{
    int code;
    char text[256];
    *there = false;
    if (amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(x), amqp_cstring_bytes(type), 0,
                              1, 0, 0, amqp_empty_table)) {
        *there = true;
        return 1;
    }
    if (br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
        br_drop_connection(c, text);
        return -1;
    }
    if (code == 403) {
        if (amqp_exchange_declare(c->amqp, CH_PROBE, amqp_cstring_bytes(x),
                                  amqp_cstring_bytes(type), 1, 0, 0, 0, amqp_empty_table)) {
            *there = true;
            return 0;
        }
        if (br_rpc_failure(c, CH_PROBE, &code, text, sizeof text) < 0) {
            br_drop_connection(c, text);
            return -1;
        }
    }
    log_warn("broker: cannot declare %s (%d %s): %s until it exists; %s", x, code, text, without,
             code == 406   ? "it exists with another type or durability: delete it once "
                             "(rabbitmqctl delete_exchange) and fleetfs declares it anew"
             : code == 404 ? "this login may not make it: an operator runs `fleetfs declare "
                             "<host>` (fleetfs-broker host add), which makes it"
                           : "give this user configure rights on it");
    return 0;
}

/* The fleet's exchanges: fleet.msg (topic, durable), which boxes bind
 * to, and fleet.control (direct, durable), which the control queue is
 * bound to.  A login that may configure makes them, and binds its own
 * control queue (boxes.c), as it makes its own mailbox; a per-host login
 * may not (403): then they must be there already, made with the binding
 * by `fleetfs declare` (fleetfs-broker host add); said once. */
void br_setup_exchanges(br_conn *c)
{
    bool there;
    int rc;
    if (c->publisher)
        return;
    c->dead_bindable = false; /* until setup_dead_letters made fleet.dead here */
    if (declare_exchange(c, BR_EXCHANGE_MSG, "topic", &there,
                         "agent mailboxes and broadcasts cannot be bound") < 0)
        return;
    rc = declare_exchange(c, BR_EXCHANGE_CONTROL, "direct", &there,
                          "requests to start and stop agents cannot reach this host");
    if (rc < 0)
        return;
    c->control_bindable = rc == 1;
    if (rc == 0 && there)
        br_control_not_bindable(c);
}

/* One connection attempt to one URI.  Owned by br_connect; `buf` holds the
 * parsed URI's strings (info points into it). */
typedef struct {
    const char *uri;
    char *shown; /* the URI, password redacted */
    char *buf;
    struct amqp_connection_info info;
    const char *vhost;
    br_where w; /* the above, for the messages */
    int64_t started_ms;
    char reason[640]; /* why it failed */
} attempt;

static void attempt_free(attempt *a)
{
    g_free(a->shown);
    g_free(a->buf);
}

/* Pick the next URI in turn and parse it. */
static int attempt_parse(br_conn *c, attempt *a)
{
    unsigned n = g_strv_length(c->cfg.uris);
    a->uri = c->cfg.uris[c->uri_index % n];
    a->shown = br_uri_redact(a->uri);
    g_mutex_lock(&c->lock);
    g_strlcpy(c->st.uri, a->shown, sizeof c->st.uri);
    c->st.attempts++;
    g_mutex_unlock(&c->lock);

    a->buf = g_strdup(a->uri);
    amqp_default_connection_info(&a->info);
    if (amqp_parse_url(a->buf, &a->info) != AMQP_STATUS_OK) {
        snprintf(a->reason, sizeof a->reason, "cannot parse broker URI %s", a->shown);
        return -1;
    }
    a->vhost = c->cfg.vhost && *c->cfg.vhost ? c->cfg.vhost : a->info.vhost;
    g_mutex_lock(&c->lock);
    g_strlcpy(c->st.vhost, a->vhost, sizeof c->st.vhost);
    c->st.tls = a->info.ssl;
    g_mutex_unlock(&c->lock);
    a->w = (br_where){.shown = a->shown,
                      .host = a->info.host,
                      .port = a->info.port,
                      .user = a->info.user,
                      .vhost = a->vhost,
                      .ca = c->cfg.ca,
                      .uri_env = c->cfg.uri_env};
    return 0;
}

/* A TLS socket verifying the broker against the configured CA. */
static amqp_socket_t *tls_socket(br_conn *c, attempt *a)
{
    amqp_socket_t *sock;
    if (!c->cfg.ca) {
        /* rabbitmq-c has no system CA store: without a CA nothing verifies */
        snprintf(a->reason, sizeof a->reason,
                 "%s: amqps:// needs -o ca=FILE, the CA that signed the broker's certificate",
                 a->shown);
        return NULL;
    }
    sock = amqp_ssl_socket_new(c->amqp);
    if (!sock)
        return NULL;
    if (amqp_ssl_socket_set_cacert(sock, c->cfg.ca) != AMQP_STATUS_OK) {
        snprintf(a->reason, sizeof a->reason,
                 "cannot load CA file %s (-o ca=): not a readable PEM certificate file", c->cfg.ca);
        return NULL;
    }
    amqp_ssl_socket_set_verify_peer(sock, 1);
    amqp_ssl_socket_set_verify_hostname(sock, 1);
    return sock;
}

/* Tests only: FLEETFS_TEST_SNDBUF=BYTES fixes the socket's send buffer,
 * so that a test can fill it (and block a send) with a message or two;
 * loopback's autotuned buffers take megabytes. */
static void test_sndbuf(int fd)
{
    const char *env = getenv("FLEETFS_TEST_SNDBUF");
    int n = env ? atoi(env) : 0;
    if (n > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n) < 0)
        log_warn("broker: FLEETFS_TEST_SNDBUF: %s", strerror(errno));
}

static int attempt_open(br_conn *c, attempt *a)
{
    struct timeval tv = {3, 0};
    amqp_socket_t *sock;
    int rc;

    c->amqp = amqp_new_connection();
    sock = a->info.ssl ? tls_socket(c, a) : amqp_tcp_socket_new(c->amqp);
    if (!sock) {
        if (!a->reason[0])
            snprintf(a->reason, sizeof a->reason, "cannot create a socket");
        return -1;
    }
    rc = amqp_socket_open_noblock(sock, a->info.host, a->info.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        br_explain_open(&a->w, rc, a->reason, sizeof a->reason);
        return -1;
    }
    test_sndbuf(amqp_socket_get_sockfd(sock));
    return 0;
}

static void login_failure(attempt *a, amqp_rpc_reply_t rep)
{
    br_explain_login_reply(&a->w, rep, a->reason, sizeof a->reason);
}

/* Log in with a connection name the broker shows (fleetfs <coord_id>@<host>)
 * and the capabilities fleetfs relies on. */
static int attempt_login(br_conn *c, attempt *a)
{
    struct timeval rpc = {RPC_TIMEOUT_MS / 1000, 0};
    amqp_rpc_reply_t rep;
    char name[256];

    amqp_set_handshake_timeout(c->amqp, &rpc);
    amqp_set_rpc_timeout(c->amqp, &rpc);
    snprintf(name, sizeof name, "fleetfs %s@%s%s", c->cfg.coord_id, c->cfg.host ? c->cfg.host : "?",
             c->publisher ? " (publishing)" : "");
    /* cancel notify: without it the broker drops a consumer silently
     * (queue deleted, quorum leader moved) instead of sending basic.cancel;
     * blocked: a resource alarm is told (connection.blocked), not met as a
     * hang */
    rep = sc_login(c->amqp, a->vhost, HEARTBEAT_S, name, SC_CAP_CANCEL_NOTIFY | SC_CAP_BLOCKED,
                   a->info.user, a->info.password);
    if (rep.reply_type != AMQP_RESPONSE_NORMAL) {
        login_failure(a, rep);
        return -1;
    }
    return 0;
}

static int attempt_channels(br_conn *c, attempt *a)
{
    /* the consumer channels are the slots' to open (boxes.c) */
    static const amqp_channel_t cons[] = {CH_PUB, CH_PROBE};
    static const amqp_channel_t pub[] = {CH_PUB, CH_PROBE, CH_CANARY};
    const amqp_channel_t *all = c->publisher ? pub : cons;
    size_t n = c->publisher ? G_N_ELEMENTS(pub) : G_N_ELEMENTS(cons);
    for (size_t i = 0; i < n; i++) {
        if (br_open_channel(c, all[i]) < 0) {
            snprintf(a->reason, sizeof a->reason, "%s: cannot open channel %u", a->shown, all[i]);
            return -1;
        }
    }
    if (br_probes_open(c) < 0) {
        snprintf(a->reason, sizeof a->reason, "%s: cannot open the probe channels", a->shown);
        return -1;
    }
    br_pubchan_opened(c);
    return 0;
}

static void server_prop(amqp_table_t *t, const char *key, char *out, size_t n)
{
    out[0] = '\0';
    for (int i = 0; t && i < t->num_entries; i++) {
        amqp_table_entry_t *e = &t->entries[i];
        if (e->key.len == strlen(key) && !memcmp(e->key.bytes, key, e->key.len) &&
            (e->value.kind == AMQP_FIELD_KIND_UTF8 || e->value.kind == AMQP_FIELD_KIND_BYTES))
            sc_bytes_str(e->value.value.bytes, out, n);
    }
}

/* Which node we are on, for status: the URI's host:port (the broker does
 * not tell its node name) and what the server says it is. */
static void server_info(br_conn *c, attempt *a)
{
    amqp_table_t *t = amqp_get_server_properties(c->amqp);
    char product[64], version[32], cluster[128];
    server_prop(t, "product", product, sizeof product);
    server_prop(t, "version", version, sizeof version);
    server_prop(t, "cluster_name", cluster, sizeof cluster);
    g_mutex_lock(&c->lock);
    snprintf(c->st.node, sizeof c->st.node, "%s:%d", a->info.host, a->info.port);
    snprintf(c->st.server, sizeof c->st.server, "%s %s%s%s", product[0] ? product : "AMQP broker",
             version, cluster[0] ? ", cluster " : "", cluster);
    c->st.heartbeat_s = amqp_get_heartbeat(c->amqp);
    br_queue_type_made(product, c->cfg.queue_type, c->st.queue_type, sizeof c->st.queue_type);
    g_mutex_unlock(&c->lock);
}

void br_check_silence(br_conn *c)
{
    int hb = amqp_get_heartbeat(c->amqp);
    int64_t quiet = br_now_ms() - c->last_recv_ms;
    char why[320];
    if (hb <= 0 || quiet < 2 * (int64_t)hb * 1000)
        return;
    snprintf(why, sizeof why,
             "nothing from the broker at %s for %lld s (two heartbeat intervals of %d s): the link "
             "went silent (a network partition, or a frozen broker)",
             c->st.node, (long long)quiet / 1000, hb);
    br_drop_connection(c, why);
    br_set_link(c, BR_UNREACHABLE, why);
}

/* Connected: reset the backoff, then set up what lives on the connection. */
static void attempt_succeeded(br_conn *c, attempt *a)
{
    c->connected = true;
    br_set_sock(c, amqp_get_sockfd(c->amqp), NULL, 0);
    c->pub_seq = 0;
    c->backoff_ms = BACKOFF_MIN_MS;
    g_hash_table_remove_all(c->declared);
    g_hash_table_remove_all(c->unrouted);
    g_mutex_lock(&c->lock);
    c->st.attempts = 0;
    g_mutex_unlock(&c->lock);
    /* the publishing connection's first connect is not news: the
     * consuming one's line says it (and the two would interleave) */
    if (!c->publisher || c->was_connected)
        log_info("%s: connected to %s vhost %s", br_who(c), a->shown, a->vhost);
    c->was_connected = true;
    br_heard(c);
    server_info(c, a);
    br_set_link(c, BR_CONNECTED, "");
    if (c->publisher) {
        br_first_attempt_done(c);
        return;
    }
    /* the consumers first: the dead letters are optional, and must not
     * hold up (nor, failing, take down) what is not; fleet.msg before
     * them, as the boxes' bindings need it */
    br_setup_exchanges(c);
    if (c->connected)
        br_setup_consumer(c);
    if (c->connected)
        setup_dead_letters(c);
    /* a takeover in progress ends the first attempt when it is decided,
     * and so does a mailbox waiting at its gate (boxes.c): its consume is
     * tried once the queue answers, or it is said not to answer */
    if (c->st.consumer != BR_CONS_WAITING && !br_lead_gated(c))
        br_first_attempt_done(c);
}

/* Failed: say why (once per distinct reason), try the next URI after the
 * backoff, which doubles up to BACKOFF_MAX_MS. */
static void attempt_failed(br_conn *c, attempt *a)
{
    if (c->amqp) {
        amqp_destroy_connection(c->amqp);
        c->amqp = NULL;
    }
    if (c->st.link != BR_UNREACHABLE || strcmp(c->st.reason, a->reason) != 0)
        log_warn("%s: unreachable: %s; retrying every %lld ms at most (sends fail with "
                 "ECOMM meanwhile)",
                 br_who(c), a->reason, (long long)BACKOFF_MAX_MS);
    br_set_link(c, BR_UNREACHABLE, a->reason);
    c->uri_index++;
    /* counted from the attempt's start: an attempt that waited out a
     * connect timeout is not followed by a full backoff on top (a link that
     * comes back is used within a few seconds) */
    c->next_attempt_ms = MAX(a->started_ms + c->backoff_ms, br_now_ms() + BACKOFF_MIN_MS);
    c->backoff_ms = MIN(c->backoff_ms * 2, BACKOFF_MAX_MS);
    br_first_attempt_done(c);
}

void br_connect(br_conn *c)
{
    attempt a = {.started_ms = br_now_ms()};
    if (attempt_parse(c, &a) < 0 || attempt_open(c, &a) < 0 || attempt_login(c, &a) < 0 ||
        attempt_channels(c, &a) < 0)
        attempt_failed(c, &a);
    else
        attempt_succeeded(c, &a);
    attempt_free(&a);
}

/* The connection is gone: fail what waits on it, schedule a reconnect. */
void br_session_drop(br_conn *c, const char *why)
{
    br_req *r;
    char kicked[320];
    if (!c->connected)
        return;
    c->connected = false;
    br_set_sock(c, -1, kicked, sizeof kicked);
    if (kicked[0]) /* the watchdog's reason, not the failed call's */
        why = kicked;
    /* the consuming connection reads all the time and finds a dead link
     * first; the publishing one to the same node would hold the next send
     * for send_timeout before finding out (before the node name is cleared) */
    br_kick_sibling(c, why ? why : "unknown reason");
    /* these left for the broker: their state is unknown (SPEC section 5) */
    while ((r = g_queue_pop_head(&c->inflight)))
        br_req_complete(c, r, FE_TIMEOUT,
                        "the connection was lost after the message left and before the broker "
                        "confirmed it; it may or may not be in the mailbox");
    br_probes_lost(c, "the connection was lost");
    br_pubchan_lost(c, "the connection was lost");
    amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    g_mutex_lock(&c->lock);
    g_hash_table_remove_all(c->probes);
    g_mutex_unlock(&c->lock);
    g_mutex_lock(&c->lock);
    c->st.node[0] = c->st.server[0] = '\0';
    g_mutex_unlock(&c->lock);
    log_warn("%s: connection lost: %s; reconnecting", br_who(c), why ? why : "unknown reason");
    /* a new connection starts unblocked, but LavinMQ says nothing of its
     * low disk to one (quirks.h): that stays until a canary is taken */
    c->canary_confirms = false;
    if (!c->low_disk)
        br_set_blocked(c, false, NULL);
    br_slots_lost(c);
    br_set_consumer(c, BR_CONS_NONE, "");
    br_set_link(c, BR_CONNECTING, why);
    c->next_attempt_ms = br_now_ms() + BACKOFF_MIN_MS;
    c->backoff_ms = BACKOFF_MIN_MS * 2;
}

void br_close_connection(br_conn *c)
{
    br_req *r;
    if (!c->connected)
        return;
    while ((r = g_queue_pop_head(&c->inflight)))
        br_req_complete(c, r, FE_TIMEOUT,
                        "fleetfs is shutting down before the broker confirmed; the message may or "
                        "may not be in the mailbox");
    br_probes_lost(c, "fleetfs is shutting down");
    br_pubchan_lost(c, "fleetfs is shutting down");
    br_set_sock(c, -1, NULL, 0);
    /* a goodbye, not a conversation: a slow broker must not hold up exit */
    amqp_set_rpc_timeout(c->amqp, &(struct timeval){1, 0});
    if (!c->publisher && br_slot_by_channel(c, CH_CONS))
        amqp_channel_close(c->amqp, CH_CONS, AMQP_REPLY_SUCCESS);
    br_slots_lost(c);
    amqp_connection_close(c->amqp, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c->amqp);
    c->amqp = NULL;
    c->connected = false;
}
