/* SPDX-License-Identifier: Apache-2.0 */
/* rawpub — a raw, hostile AMQP publisher for the integration tests: it puts
 * exactly the bytes a test asks for into a mailbox, bypassing fleetfs, the
 * way any process holding a broker login could.
 *
 *   rawpub URI QUEUE [--body-file F | --body STR] [--message-id ID]
 *                    [--ca FILE] [--confirm]
 *   rawpub URI QUEUE --sign KEYFILE --from ID --to ID --text BODY
 *                    [--expires-in SEC] [--sent-in SEC] [--msgid ID]
 *                    [--reply-to ID] [--receipt REF STATE] [--tamper]
 *                    [--print] [--count N]
 *                    [--message-id ID] [--ca FILE] [--confirm]
 *   rawpub URI QUEUE --get-requeue [--ca FILE]
 *   rawpub URI QUEUE --move [--ca FILE]
 *   rawpub URI QUEUE --consume N [--ca FILE]
 *   rawpub URI QUEUE --take [--ca FILE]
 *
 * One persistent message to the default exchange, routing key QUEUE,
 * mandatory, on a channel in confirm mode; it always waits for the
 * confirm (--confirm is accepted and changes nothing, for readable tests).
 * Exit 0 when the broker acked it into the queue, 1 on a nack or a return
 * (no such queue) or a channel the broker closed, 2 on usage or connection
 * errors. The URI's password is never printed.
 *
 * The --sign mode builds a real fleetfs envelope and signs it with the key,
 * so a test can produce every kind of message the receiver must judge:
 * good (the trusted key of --from), wrongly signed (another lead's key, or
 * --tamper, which alters the body after signing), unknown (an untrusted
 * key), expired (--expires-in -60), replayed (the same --msgid twice),
 * mis-addressed (--to another lead than the queue's). --print writes the
 * envelope to stdout too, so a test can republish the exact bytes later
 * with --body-file. The AMQP message_id is the msgId unless --message-id
 * says otherwise. --sent-in shifts sentAt (and expiresAt with it) from now,
 * e.g. into the future.
 *
 * --answer REQUEST_ID STATE (with --sign, --from, --to; no --text) builds
 * the control plane's answer instead (wire/control.h: type spawned, the
 * far host's word on a spawn or stop request), with --detail TEXT and
 * --gid GID when given; --expires-in, --sent-in, --msgid, --tamper (which
 * alters the detail after signing) and --print work as for a message.
 *
 * --count N (with --sign, without --msgid) publishes N such envelopes,
 * each with its own msgId and signature, on one connection with up to
 * 1000 confirms outstanding, not persistent (delivery mode 1): a flood
 * from a trusted key.  Exit 0 when the broker took all of them.
 *
 * Two ways a broker login touches what is already queued:
 * --get-requeue takes the first ready message of QUEUE with basic.get
 * (manual ack), prints its body, and closes the channel without acking:
 * the broker puts it back flagged `redelivered`, the way any channel reset
 * does (exit 1 when the queue was empty).  --move takes every message of
 * QUEUE in turn, publishes its body (and content type and message id) to
 * QUEUE again as a new message and acks the old one once the broker
 * confirmed the new: the messages stay, in order, but lose the
 * `redelivered` flag, as a shovel or a broker that forgets the flag
 * (LavinMQ across its restart) does.  It prints how many it moved.
 *
 * --consume N is a raw reader instead: it consumes QUEUE (not exclusively,
 * manual ack), prints "consuming", then each of the next N bodies on a
 * line of its own, acking each, and exits 0: a reader of a mailbox that is
 * no fleetfs and sends no heartbeat (another implementation of the
 * protocol).
 *
 * --take takes every message of QUEUE off it (basic.get, acked) and prints
 * one line for each: its AMQP message id ("-" without one), the length of
 * its body, the offset of the body's first NUL byte (-1: none), and
 * "torn" when the body is bytes without a NUL followed by NUL bytes to its
 * end, or empty without a message id (what an interrupted write into a
 * zeroed file leaves: the rest of the message, or all of it but its first
 * field, still zero), else "whole".  A test reads fleet.dlq with it: a
 * torn copy of a message is told from a refused whole one without
 * trusting what fleetfs says. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "fleetfs/wire/control.h"
#include "fleetfs/wire/envelope.h"
#include "fleetfs/config/options.h"
#include "fleetfs/wire/sign.h"

#define RP_USAGE 2
#define RP_REFUSED 1

typedef struct {
    const char *uri, *queue;
    const char *body, *body_file, *message_id, *ca;
    const char *sign, *from, *to, *text, *msgid, *reply_to;
    const char *ref, *state;
    const char *answer, *answer_state, *detail, *gid; /* --answer: a control `spawned` */
    long expires_in, sent_in, count;
    long consume;
    bool tamper, print, get_requeue, move, take;
} rp_args;

static void rp_usage(void)
{
    fprintf(stderr,
            "usage: rawpub URI QUEUE [--body-file F | --body STR] [--message-id ID]\n"
            "                        [--ca FILE] [--confirm]\n"
            "       rawpub URI QUEUE --sign KEYFILE --from ID --to ID --text BODY\n"
            "                        [--expires-in SEC] [--sent-in SEC] [--msgid ID]\n"
            "                        [--reply-to ID] [--receipt REF STATE] [--tamper]\n"
            "                        [--print] [--count N] ...\n"
            "       rawpub URI QUEUE --sign KEYFILE --from ID --to ID\n"
            "                        --answer REQUEST_ID STATE [--detail TEXT] [--gid GID]\n"
            "                        [--expires-in SEC] [--sent-in SEC] [--msgid ID]\n"
            "                        [--tamper] [--print]\n"
            "       rawpub URI QUEUE --get-requeue | --move | --take [--ca FILE]\n"
            "       rawpub URI QUEUE --consume N [--ca FILE]\n");
    exit(RP_USAGE);
}

static void rp_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void rp_die(int code, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "rawpub: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(code);
}

static const char *rp_val(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        rp_die(RP_USAGE, "%s needs a value", argv[*i]);
    return argv[++*i];
}

static long rp_long(int argc, char **argv, int *i)
{
    const char *o = argv[*i], *v = rp_val(argc, argv, i);
    char *end;
    long n;

    errno = 0;
    n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0')
        rp_die(RP_USAGE, "%s wants a number, not '%s'", o, v);
    return n;
}

static void rp_parse(int argc, char **argv, rp_args *a)
{
    int i;

    memset(a, 0, sizeof(*a));
    a->expires_in = 3600;
    if (argc < 3)
        rp_usage();
    a->uri = argv[1];
    a->queue = argv[2];
    for (i = 3; i < argc; i++) {
        const char *o = argv[i];

        if (strcmp(o, "--body") == 0)
            a->body = rp_val(argc, argv, &i);
        else if (strcmp(o, "--body-file") == 0)
            a->body_file = rp_val(argc, argv, &i);
        else if (strcmp(o, "--message-id") == 0)
            a->message_id = rp_val(argc, argv, &i);
        else if (strcmp(o, "--ca") == 0)
            a->ca = rp_val(argc, argv, &i);
        else if (strcmp(o, "--sign") == 0)
            a->sign = rp_val(argc, argv, &i);
        else if (strcmp(o, "--from") == 0)
            a->from = rp_val(argc, argv, &i);
        else if (strcmp(o, "--to") == 0)
            a->to = rp_val(argc, argv, &i);
        else if (strcmp(o, "--text") == 0)
            a->text = rp_val(argc, argv, &i);
        else if (strcmp(o, "--msgid") == 0)
            a->msgid = rp_val(argc, argv, &i);
        else if (strcmp(o, "--reply-to") == 0)
            a->reply_to = rp_val(argc, argv, &i);
        else if (strcmp(o, "--tamper") == 0)
            a->tamper = true;
        else if (strcmp(o, "--print") == 0)
            a->print = true;
        else if (strcmp(o, "--confirm") == 0)
            continue;
        else if (strcmp(o, "--receipt") == 0) {
            a->ref = rp_val(argc, argv, &i);
            a->state = rp_val(argc, argv, &i);
        } else if (strcmp(o, "--answer") == 0) {
            a->answer = rp_val(argc, argv, &i);
            a->answer_state = rp_val(argc, argv, &i);
        } else if (strcmp(o, "--detail") == 0) {
            a->detail = rp_val(argc, argv, &i);
        } else if (strcmp(o, "--gid") == 0) {
            a->gid = rp_val(argc, argv, &i);
        } else if (strcmp(o, "--expires-in") == 0) {
            a->expires_in = rp_long(argc, argv, &i);
        } else if (strcmp(o, "--sent-in") == 0) {
            a->sent_in = rp_long(argc, argv, &i);
        } else if (strcmp(o, "--count") == 0) {
            a->count = rp_long(argc, argv, &i);
        } else if (strcmp(o, "--get-requeue") == 0) {
            a->get_requeue = true;
        } else if (strcmp(o, "--move") == 0) {
            a->move = true;
        } else if (strcmp(o, "--take") == 0) {
            a->take = true;
        } else if (strcmp(o, "--consume") == 0) {
            a->consume = rp_long(argc, argv, &i);
            if (a->consume < 1)
                rp_die(RP_USAGE, "--consume wants a count of at least 1");
        } else {
            rp_die(RP_USAGE, "unknown option '%s'", o);
        }
    }
    if ((a->body != NULL) + (a->body_file != NULL) + (a->sign != NULL) + a->get_requeue + a->move +
            a->take + (a->consume > 0) !=
        1)
        rp_die(RP_USAGE, "give exactly one of --body, --body-file, --sign, --get-requeue, --move, "
                         "--take, --consume");
    if (a->sign != NULL && (a->from == NULL || a->to == NULL || (a->text == NULL) == !a->answer))
        rp_die(RP_USAGE, "--sign needs --from, --to and --text (or --answer instead of --text)");
    if (a->count != 0 && (a->sign == NULL || a->msgid != NULL || a->count < 1))
        rp_die(RP_USAGE, "--count N wants N >= 1, --sign, and no --msgid");
}

/* Copies s into a fixed envelope field; the tool may build hostile
 * envelopes, but never overflows its own buffers. */
static void rp_set(char *dst, size_t n, const char *s, const char *what)
{
    if (strlen(s) >= n)
        rp_die(RP_USAGE, "%s is too long for the envelope ('%s')", what, s);
    memcpy(dst, s, strlen(s) + 1);
}

/* The header both kinds of envelope share: msgId (--msgid or a fresh
 * one), from, to, sentAt = now, expiresAt = now + --expires-in. */
static void rp_header(const rp_args *a, int64_t now, char *msg_id, size_t idn, char *from,
                      size_t fromn, char *to, size_t ton, char *sent, char *expires)
{
    if (a->msgid != NULL)
        rp_set(msg_id, idn, a->msgid, "--msgid");
    else
        env_new_msgid(msg_id);
    rp_set(from, fromn, a->from, "--from");
    rp_set(to, ton, a->to, "--to");
    env_time_format(now, sent);
    env_time_format(now + (int64_t)a->expires_in * 1000, expires);
}
#define RP_HEADER(a, now, e)                                                                 \
    rp_header(a, now, (e)->msgId, sizeof((e)->msgId), (e)->from, sizeof((e)->from), (e)->to, \
              sizeof((e)->to), (e)->sentAt, (e)->expiresAt)

/* --answer: a signed control answer (wire/control.h). */
static char *rp_control(const rp_args *a, sig_key *k, size_t *len, char msgid[ENV_ID_LEN + 1])
{
    int64_t now = env_now_ms() + (int64_t)a->sent_in * 1000;
    ctl_env e;
    char *js;

    memset(&e, 0, sizeof(e));
    e.v = 1;
    rp_set(e.type, sizeof(e.type), CTL_TYPE_SPAWNED, "type");
    RP_HEADER(a, now, &e);
    rp_set(e.requestId, sizeof(e.requestId), a->answer, "--answer REQUEST_ID");
    rp_set(e.state, sizeof(e.state), a->answer_state, "--answer STATE");
    rp_set(e.detail, sizeof(e.detail), a->detail ? a->detail : "", "--detail");
    rp_set(e.gid, sizeof(e.gid), a->gid ? a->gid : "", "--gid");
    if (ctl_sign(k, &e) < 0)
        rp_die(RP_USAGE, "signing failed");
    if (a->tamper)
        rp_set(e.detail, sizeof(e.detail), "tampered after signing", "--detail");
    js = ctl_encode(&e, len);
    if (js == NULL)
        rp_die(RP_USAGE, "cannot encode the answer");
    memcpy(msgid, e.msgId, ENV_ID_LEN + 1);
    return js;
}

static char *rp_envelope(const rp_args *a, size_t *len, char msgid[ENV_ID_LEN + 1])
{
    static sig_key *k;
    char *err = NULL, *js;
    int64_t now = env_now_ms() + (int64_t)a->sent_in * 1000;
    envelope e;

    if (k == NULL)
        k = sig_load_secret(a->sign, &err);
    if (k == NULL)
        rp_die(RP_USAGE, "%s", err);
    if (a->answer != NULL)
        return rp_control(a, k, len, msgid);
    memset(&e, 0, sizeof(e));
    e.v = 1;
    rp_set(e.type, sizeof(e.type), a->ref ? ENV_TYPE_RECEIPT : ENV_TYPE_COORD, "type");
    RP_HEADER(a, now, &e);
    if (a->reply_to != NULL)
        rp_set(e.replyTo, sizeof(e.replyTo), a->reply_to, "--reply-to");
    if (a->ref != NULL) {
        rp_set(e.ref, sizeof(e.ref), a->ref, "--receipt REF");
        rp_set(e.state, sizeof(e.state), a->state, "--receipt STATE");
    }
    e.body = g_strdup(a->text);
    e.body_len = strlen(a->text);
    if (sig_sign(k, &e) < 0)
        rp_die(RP_USAGE, "signing failed");
    if (a->tamper && e.body_len > 0)
        e.body[e.body_len - 1] ^= 0x01;
    js = env_encode(&e, len);
    if (js == NULL)
        rp_die(RP_USAGE, "cannot encode the envelope (body not UTF-8?)");
    memcpy(msgid, e.msgId, ENV_ID_LEN + 1);
    g_free(e.body);
    return js;
}

static amqp_connection_state_t rp_connect(const rp_args *a, const char *shown)
{
    struct amqp_connection_info info;
    char *buf = g_strdup(a->uri);
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s;
    struct timeval tv = {10, 0};
    amqp_rpc_reply_t r;
    int rc;

    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK)
        rp_die(RP_USAGE, "cannot parse broker URI %s", shown);
    if (info.ssl) {
        s = amqp_ssl_socket_new(c);
        if (s != NULL && a->ca != NULL && amqp_ssl_socket_set_cacert(s, a->ca) != AMQP_STATUS_OK)
            rp_die(RP_USAGE, "cannot load CA file %s", a->ca);
        if (s != NULL) {
            amqp_ssl_socket_set_verify_peer(s, 1);
            amqp_ssl_socket_set_verify_hostname(s, 1);
        }
    } else {
        s = amqp_tcp_socket_new(c);
    }
    if (s == NULL)
        rp_die(RP_USAGE, "cannot create a socket");
    rc = amqp_socket_open_noblock(s, info.host, info.port, &tv);
    if (rc != AMQP_STATUS_OK)
        rp_die(RP_USAGE, "cannot connect to %s: %s", shown, amqp_error_string2(rc));
    r = amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "login to %s refused", shown);
    amqp_channel_open(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "cannot open a channel on %s", shown);
    amqp_confirm_select(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "confirm.select refused on %s", shown);
    amqp_channel_open(c, 2); /* basic.get, for --get-requeue and --move */
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "cannot open a second channel on %s", shown);
    g_free(buf);
    return c;
}

/* The confirms of everything published on channel 1: tag i (1-based) is
 * 0 pending, 1 acked, 2 nacked.  A return (no queue) arrives before its
 * ack and turns it into a failure. */
typedef struct {
    GByteArray *st;
    uint64_t published, answered, failed;
    bool returned;
} rp_confirms;

static void rp_answer(rp_confirms *k, uint64_t tag, bool multiple, uint8_t how)
{
    uint64_t from = multiple ? 1 : tag;

    for (uint64_t t = from; t <= tag && t <= k->published; t++) {
        if (k->st->data[t] != 0)
            continue;
        k->st->data[t] = how;
        k->answered++;
        k->failed += how != 1;
    }
}

/* Reads one frame of the publish channel's answers. 0, or RP_REFUSED /
 * RP_USAGE when the channel or the connection is gone. */
static int rp_read_confirm(amqp_connection_state_t c, rp_confirms *k)
{
    struct timeval tv = {30, 0};
    amqp_frame_t f;
    amqp_message_t m;
    int rc = amqp_simple_wait_frame_noblock(c, &f, &tv);

    if (rc != AMQP_STATUS_OK) {
        fprintf(stderr, "rawpub: no confirm: %s\n", amqp_error_string2(rc));
        return RP_USAGE;
    }
    if (f.frame_type != AMQP_FRAME_METHOD)
        return 0;
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *ack = f.payload.method.decoded;

        rp_answer(k, ack->delivery_tag, ack->multiple, k->returned ? 2 : 1);
        if (k->returned)
            fprintf(stderr, "rawpub: returned: no such queue\n");
        k->returned = false;
        return 0;
    }
    case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *nack = f.payload.method.decoded;

        fprintf(stderr, "rawpub: nacked (queue full?)\n");
        rp_answer(k, nack->delivery_tag, nack->multiple, 2);
        return 0;
    }
    case AMQP_BASIC_RETURN_METHOD:
        k->returned = true;
        if (amqp_read_message(c, f.channel, &m, 0).reply_type == AMQP_RESPONSE_NORMAL)
            amqp_destroy_message(&m);
        return 0;
    case AMQP_CHANNEL_CLOSE_METHOD: {
        amqp_channel_close_t *cl = f.payload.method.decoded;

        fprintf(stderr, "rawpub: broker closed the channel: %d %.*s\n", cl->reply_code,
                (int)cl->reply_text.len, (char *)cl->reply_text.bytes);
        return RP_REFUSED;
    }
    default:
        return 0;
    }
}

/* Publishes body to queue on channel 1 (persistent, mandatory). */
static void rp_publish(amqp_connection_state_t c, rp_confirms *k, const char *queue,
                       amqp_basic_properties_t *p, const char *body, size_t len)
{
    int rc = amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0, p,
                                (amqp_bytes_t){len, (void *)body});

    if (rc != AMQP_STATUS_OK)
        rp_die(RP_USAGE, "publish to %s failed: %s", queue, amqp_error_string2(rc));
    k->published++;
    g_byte_array_set_size(k->st, (guint)k->published + 1);
    k->st->data[k->published] = 0;
}

/* Reads answers until at most `pending` publishes wait for theirs. */
static int rp_settle(amqp_connection_state_t c, rp_confirms *k, uint64_t pending)
{
    int rc;

    while (k->published - k->answered > pending)
        if ((rc = rp_read_confirm(c, k)) != 0)
            return rc;
    return 0;
}

static char *rp_body(const rp_args *a, size_t *len, char msgid[ENV_ID_LEN + 1])
{
    GError *ge = NULL;
    char *body = NULL;
    gsize n = 0;

    msgid[0] = '\0';
    if (a->sign != NULL)
        return rp_envelope(a, len, msgid);
    if (a->body != NULL) {
        *len = strlen(a->body);
        return g_strdup(a->body);
    }
    if (!g_file_get_contents(a->body_file, &body, &n, &ge))
        rp_die(RP_USAGE, "%s", ge->message);
    *len = n;
    return body;
}

/* persistent: delivery mode 2, else 1 (a flood: three times faster) */
static void rp_props(amqp_basic_properties_t *p, const char *message_id, bool persistent)
{
    memset(p, 0, sizeof(*p));
    p->_flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    p->content_type = amqp_cstring_bytes("application/json");
    p->delivery_mode = persistent ? 2 : 1;
    if (message_id != NULL && *message_id) {
        p->_flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p->message_id = amqp_cstring_bytes(message_id);
    }
}

/* basic.get of one message on channel 2 (manual ack): false when empty. */
static bool rp_get(amqp_connection_state_t c, const rp_args *a, amqp_message_t *m,
                   amqp_basic_get_ok_t *ok)
{
    amqp_rpc_reply_t r = amqp_basic_get(c, 2, amqp_cstring_bytes(a->queue), 0);

    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *cl = r.reply.decoded;
        rp_die(RP_USAGE, "basic.get on %s refused: %d %.*s", a->queue, cl->reply_code,
               (int)cl->reply_text.len, (const char *)cl->reply_text.bytes);
    }
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "basic.get on %s refused", a->queue);
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
        return false;
    *ok = *(amqp_basic_get_ok_t *)r.reply.decoded;
    if (amqp_read_message(c, 2, m, 0).reply_type != AMQP_RESPONSE_NORMAL)
        rp_die(RP_USAGE, "cannot read the message got from %s", a->queue);
    return true;
}

static int rp_get_requeue(amqp_connection_state_t c, const rp_args *a)
{
    amqp_message_t m;
    amqp_basic_get_ok_t ok;

    if (!rp_get(c, a, &m, &ok))
        return RP_REFUSED;
    fwrite(m.body.bytes, 1, m.body.len, stdout);
    fputc('\n', stdout);
    amqp_destroy_message(&m);
    /* not acked: closing the channel gives it back, flagged redelivered */
    amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS);
    return 0;
}

static int rp_move(amqp_connection_state_t c, const rp_args *a, rp_confirms *k)
{
    amqp_message_t m;
    amqp_basic_get_ok_t ok;
    amqp_basic_properties_t p;
    long moved = 0, left = -1;
    int rc;

    while (left != 0 && rp_get(c, a, &m, &ok)) {
        char *mid = NULL;

        if (left < 0)
            left = (long)ok.message_count + 1;
        if (m.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
            mid = g_strndup(m.properties.message_id.bytes, m.properties.message_id.len);
        rp_props(&p, mid, true);
        rp_publish(c, k, a->queue, &p, m.body.bytes, m.body.len);
        if ((rc = rp_settle(c, k, 0)) != 0 || k->failed)
            rp_die(RP_REFUSED, "the copy of a message was refused; the original stays");
        if (amqp_basic_ack(c, 2, ok.delivery_tag, 0) != AMQP_STATUS_OK)
            rp_die(RP_USAGE, "cannot ack the original");
        amqp_destroy_message(&m);
        g_free(mid);
        moved++;
        left--;
    }
    printf("moved %ld\n", moved);
    return 0;
}

/* --take: every message off the queue, one line each (see the top). */
static int rp_take(amqp_connection_state_t c, const rp_args *a)
{
    amqp_message_t m;
    amqp_basic_get_ok_t ok;

    while (rp_get(c, a, &m, &ok)) {
        const char *b = m.body.bytes;
        const char *nul = m.body.len ? memchr(b, '\0', m.body.len) : NULL;
        bool has_id = m.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG;
        /* cut off after its first field: no properties, no body */
        bool torn = nul != NULL || (m.body.len == 0 && !has_id);
        for (const char *p = nul; nul && torn && p < b + m.body.len; p++)
            torn = *p == '\0';
        if (has_id)
            printf("%.*s", (int)m.properties.message_id.len,
                   (const char *)m.properties.message_id.bytes);
        else
            printf("-");
        printf("\t%zu\t%td\t%s\n", m.body.len, nul ? nul - b : (ptrdiff_t)-1,
               torn ? "torn" : "whole");
        if (amqp_basic_ack(c, 2, ok.delivery_tag, 0) != AMQP_STATUS_OK)
            rp_die(RP_USAGE, "cannot ack a message taken from %s", a->queue);
        amqp_destroy_message(&m);
    }
    return 0;
}

/* --consume: print and ack the next n deliveries of queue. */
static int rp_consume(amqp_connection_state_t c, const char *queue, long n)
{
    amqp_basic_consume(c, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL) {
        fprintf(stderr, "rawpub: cannot consume %s\n", queue);
        return RP_REFUSED;
    }
    printf("consuming\n");
    fflush(stdout);
    for (; n > 0; n--) {
        amqp_envelope_t e;
        amqp_maybe_release_buffers(c);
        if (amqp_consume_message(c, &e, NULL, 0).reply_type != AMQP_RESPONSE_NORMAL) {
            fprintf(stderr, "rawpub: the consumer of %s ended\n", queue);
            return RP_REFUSED;
        }
        printf("%.*s\n", (int)e.message.body.len, (const char *)e.message.body.bytes);
        fflush(stdout);
        amqp_basic_ack(c, 1, e.delivery_tag, 0);
        amqp_destroy_envelope(&e);
    }
    return 0;
}

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    amqp_basic_properties_t p;
    rp_confirms k = {g_byte_array_new(), 0, 0, 0, false};
    char msgid[ENV_ID_LEN + 1];
    char *body = NULL, *shown;
    size_t len;
    rp_args a;
    int rc = 0;

    rp_parse(argc, argv, &a);
    shown = uri_redact(a.uri);
    if (!a.get_requeue && !a.move && !a.take && !a.consume) {
        body = rp_body(&a, &len, msgid);
        if (a.print) {
            fwrite(body, 1, len, stdout);
            fputc('\n', stdout);
            fflush(stdout);
        }
    }
    c = rp_connect(&a, shown);
    if (a.consume) {
        rc = rp_consume(c, a.queue, a.consume);
    } else if (a.get_requeue) {
        rc = rp_get_requeue(c, &a);
    } else if (a.take) {
        rc = rp_take(c, &a);
    } else if (a.move) {
        rc = rp_move(c, &a, &k);
    } else {
        long n = a.count ? a.count : 1;

        for (long i = 0; i < n && rc == 0; i++) {
            if (i > 0) {
                g_free(body);
                body = rp_body(&a, &len, msgid);
            }
            rp_props(&p, a.message_id ? a.message_id : msgid, a.count == 0);
            rp_publish(c, &k, a.queue, &p, body, len);
            rc = rp_settle(c, &k, 1000);
        }
        if (rc == 0)
            rc = rp_settle(c, &k, 0);
        if (rc == 0 && k.failed)
            rc = RP_REFUSED;
        if (a.count)
            fprintf(stderr, "rawpub: %" PRIu64 " published, %" PRIu64 " refused\n", k.published,
                    k.failed);
    }
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    g_byte_array_free(k.st, TRUE);
    g_free(body);
    g_free(shown);
    return rc;
}
