/* rawpub — a raw, hostile AMQP publisher for the integration tests: it puts
 * exactly the bytes a test asks for into a mailbox, bypassing fleetfs, the
 * way any process holding a broker login could.
 *
 *   rawpub URI QUEUE [--body-file F | --body STR] [--message-id ID]
 *                    [--ca FILE] [--confirm]
 *   rawpub URI QUEUE --sign KEYFILE --from ID --to ID --text BODY
 *                    [--expires-in SEC] [--msgid ID] [--reply-to ID]
 *                    [--receipt REF STATE] [--tamper] [--print]
 *                    [--message-id ID] [--ca FILE] [--confirm]
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
 * says otherwise. */
#include <errno.h>
#include <stdarg.h>
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/options.h"
#include "fleetfs/wire/sign.h"

#define RP_USAGE 2
#define RP_REFUSED 1

typedef struct {
    const char *uri, *queue;
    const char *body, *body_file, *message_id, *ca;
    const char *sign, *from, *to, *text, *msgid, *reply_to;
    const char *ref, *state;
    long expires_in;
    bool tamper, print;
} rp_args;

static void rp_usage(void)
{
    fprintf(stderr, "usage: rawpub URI QUEUE [--body-file F | --body STR] [--message-id ID]\n"
                    "                        [--ca FILE] [--confirm]\n"
                    "       rawpub URI QUEUE --sign KEYFILE --from ID --to ID --text BODY\n"
                    "                        [--expires-in SEC] [--msgid ID] [--reply-to ID]\n"
                    "                        [--receipt REF STATE] [--tamper] [--print] ...\n");
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

static void rp_parse(int argc, char **argv, rp_args *a)
{
    char *end;
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
        } else if (strcmp(o, "--expires-in") == 0) {
            o = rp_val(argc, argv, &i);
            errno = 0;
            a->expires_in = strtol(o, &end, 10);
            if (errno != 0 || end == o || *end != '\0')
                rp_die(RP_USAGE, "--expires-in wants seconds, not '%s'", o);
        } else {
            rp_die(RP_USAGE, "unknown option '%s'", o);
        }
    }
    if ((a->body != NULL) + (a->body_file != NULL) + (a->sign != NULL) != 1)
        rp_die(RP_USAGE, "give exactly one of --body, --body-file, --sign");
    if (a->sign != NULL && (a->from == NULL || a->to == NULL || a->text == NULL))
        rp_die(RP_USAGE, "--sign needs --from, --to and --text");
}

/* Copies s into a fixed envelope field; the tool may build hostile
 * envelopes, but never overflows its own buffers. */
static void rp_set(char *dst, size_t n, const char *s, const char *what)
{
    if (strlen(s) >= n)
        rp_die(RP_USAGE, "%s is too long for the envelope ('%s')", what, s);
    memcpy(dst, s, strlen(s) + 1);
}

static char *rp_envelope(const rp_args *a, size_t *len, char msgid[ENV_ID_LEN + 1])
{
    char *err = NULL, *js;
    sig_key *k = sig_load_secret(a->sign, &err);
    int64_t now = env_now_ms();
    envelope e;

    if (k == NULL)
        rp_die(RP_USAGE, "%s", err);
    memset(&e, 0, sizeof(e));
    e.v = 1;
    rp_set(e.type, sizeof(e.type), a->ref ? ENV_TYPE_RECEIPT : ENV_TYPE_COORD, "type");
    if (a->msgid != NULL)
        rp_set(e.msgId, sizeof(e.msgId), a->msgid, "--msgid");
    else
        env_new_msgid(e.msgId);
    rp_set(e.from, sizeof(e.from), a->from, "--from");
    rp_set(e.to, sizeof(e.to), a->to, "--to");
    env_time_format(now, e.sentAt);
    env_time_format(now + (int64_t)a->expires_in * 1000, e.expiresAt);
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
    sig_key_free(k);
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
    g_free(buf);
    return c;
}

/* Reads frames until the confirm of delivery tag 1. A return (no queue)
 * arrives before its ack, so it is remembered and turns the ack into a
 * failure. */
static int rp_wait_confirm(amqp_connection_state_t c)
{
    struct timeval tv = {30, 0};
    bool returned = false;
    amqp_frame_t f;
    amqp_message_t m;
    int rc;

    for (;;) {
        rc = amqp_simple_wait_frame_noblock(c, &f, &tv);
        if (rc != AMQP_STATUS_OK) {
            fprintf(stderr, "rawpub: no confirm: %s\n", amqp_error_string2(rc));
            return RP_USAGE;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD:
            if (returned)
                fprintf(stderr, "rawpub: returned: no such queue\n");
            return returned ? RP_REFUSED : 0;
        case AMQP_BASIC_NACK_METHOD:
            fprintf(stderr, "rawpub: nacked (queue full?)\n");
            return RP_REFUSED;
        case AMQP_BASIC_RETURN_METHOD:
            returned = true;
            if (amqp_read_message(c, f.channel, &m, 0).reply_type == AMQP_RESPONSE_NORMAL)
                amqp_destroy_message(&m);
            break;
        case AMQP_CHANNEL_CLOSE_METHOD: {
            amqp_channel_close_t *cl = f.payload.method.decoded;

            fprintf(stderr, "rawpub: broker closed the channel: %d %.*s\n", cl->reply_code,
                    (int)cl->reply_text.len, (char *)cl->reply_text.bytes);
            return RP_REFUSED;
        }
        default:
            break;
        }
    }
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

int main(int argc, char **argv)
{
    amqp_connection_state_t c;
    amqp_basic_properties_t p;
    char msgid[ENV_ID_LEN + 1];
    char *body, *shown;
    size_t len;
    rp_args a;
    int rc;

    rp_parse(argc, argv, &a);
    shown = uri_redact(a.uri);
    body = rp_body(&a, &len, msgid);
    if (a.print) {
        fwrite(body, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    c = rp_connect(&a, shown);
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 2;
    if (a.message_id != NULL || msgid[0] != '\0') {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = amqp_cstring_bytes(a.message_id ? a.message_id : msgid);
    }
    rc = amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(a.queue), 1, 0, &p,
                            (amqp_bytes_t){len, body});
    if (rc != AMQP_STATUS_OK)
        rp_die(RP_USAGE, "publish to %s failed: %s", shown, amqp_error_string2(rc));
    rc = rp_wait_confirm(c);
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    g_free(body);
    g_free(shown);
    return rc;
}
