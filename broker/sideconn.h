/* SPDX-License-Identifier: Apache-2.0 */
/* broker/sideconn.h — what the broker's side connections share (broker/
 * only): the roster's (roster.c) and the claims' (claims.c, claimconn.c),
 * each owned by a thread of its own beside the mailbox connection, which
 * it must neither wait for nor share.  The connect sequence (parse the
 * URI, TCP or TLS with verification, log in with the connection's name),
 * the words for a refused synchronous call, the retry timing after a
 * loss, and the bounded wait for the thread's end.  The login's
 * properties table is the mailbox connection's too (session.c).
 */
#ifndef FLEETFS_BROKER_SIDECONN_H
#define FLEETFS_BROKER_SIDECONN_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <amqp.h>

/* The capabilities a login asks for (sc_login's caps). */
enum {
    /* basic.cancel when a consumed queue goes (deleted, its node down),
     * instead of a consumer dropped silently */
    SC_CAP_CANCEL_NOTIFY = 1,
    /* a resource alarm told (connection.blocked), not met as a hang */
    SC_CAP_BLOCKED = 2
};

/* How a side connection is made. */
typedef struct {
    const char *vhost;   /* NULL or "": the URI's */
    const char *ca;      /* -o ca=, or NULL (amqps:// needs it) */
    const char *uri_env; /* for the messages (br_where) */
    const char *name;    /* connection_name, as the broker's tools show it */
    int heartbeat_s;
    int rpc_timeout_ms; /* the handshake's and every synchronous call's */
    int caps;           /* SC_CAP_* */
    /* tests only: FLEETFS_TEST_SNDBUF=BYTES fixes the socket's send
     * buffer, so that a test can fill it (t1107); log lines start with who */
    bool test_sndbuf;
    const char *who;
} sc_params;

/* Log in on amqp (socket open) with the connection's name and product and
 * caps: rabbitmq-c's reply. */
amqp_rpc_reply_t sc_login(amqp_connection_state_t amqp, const char *vhost, int heartbeat_s,
                          const char *name, int caps, const char *user, const char *password);
/* Parse uri, open the socket (2 s), log in: 0, or -1 and why.  *amqp is
 * the new connection (set once it is made, also when a later step fails:
 * the caller destroys it); shown gets host:port (no credentials) once the
 * URI parsed. */
int sc_open_login(const sc_params *p, const char *uri, amqp_connection_state_t *amqp, char *shown,
                  size_t shown_n, char *why, size_t n);
/* The broker's words (b) as a string, cleaned for the log. */
void sc_bytes_str(amqp_bytes_t b, char *out, size_t n);
/* "what: " and the words of the last failed synchronous call on amqp. */
void sc_rpc_words(amqp_connection_state_t amqp, const char *what, char *out, size_t n);
/* After a failed synchronous call on channel ch: the broker's
 * channel.close code (answered close-ok; the channel is closed now), or 0
 * when it was not a channel close or the close-ok could not be sent (the
 * connection is not usable then). */
int sc_channel_refused(amqp_connection_state_t amqp, int ch);
/* The connection went down: the next attempt is due after *backoff_ms,
 * which doubles up to max_ms. */
void sc_retry_later(int64_t now_ms, int64_t *next_attempt_ms, int64_t *backoff_ms, int64_t max_ms);
/* Wait under lock on cv until *finished or the deadline (monotonic µs):
 * whether *finished is set (a thread's end; conn.c also waits on its first
 * attempt with it). */
bool sc_wait_finished(GMutex *lock, GCond *cv, const bool *finished, gint64 until);
/* A side thread asked to stop at stop_at (monotonic µs): wait wait_ms from
 * then, however long the caller stopped other threads meanwhile; if it has
 * not ended (blocked in a send, it never sees the request), kick it (kick:
 * under lock, shut its socket down) and wait wait_ms again.  true: it
 * ended (join it); false: it did not (the caller says so, leaves it). */
bool sc_stop_wait(GMutex *lock, GCond *cv, const bool *finished, gint64 stop_at, int wait_ms,
                  void (*kick_locked)(void *ud), void *ud);

#endif
