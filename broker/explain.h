/* SPDX-License-Identifier: Apache-2.0 */
/* broker/explain.h — a refused connection, in words an operator can act on
 * (broker/ only).  Each function gets plain values and writes one sentence:
 * what was asked for, what the broker or the network said, what to change.
 */
#ifndef FLEETFS_BROKER_EXPLAIN_H
#define FLEETFS_BROKER_EXPLAIN_H

#include <stddef.h>

#include <amqp.h>

/* Where the connection attempt stood, for the messages. */
typedef struct {
    const char *shown; /* the URI, password redacted */
    const char *host;
    int port;
    const char *user;
    const char *vhost;   /* as sent to the broker */
    const char *ca;      /* -o ca=, or NULL */
    const char *uri_env; /* name of the variable holding the URI with its password */
} br_where;

/* amqp_socket_open failed with rc (an amqp_status_enum). */
void br_explain_open(const br_where *w, int rc, char *out, size_t n);
/* The login failed: the broker closed the connection with code and text
 * (code < 0: no connection.close came; code is rabbitmq-c's status and
 * text its words). */
void br_explain_login(const br_where *w, int code, const char *text, char *out, size_t n);
/* The same from the reply of a failed amqp_login (the code and text taken
 * from the broker's connection.close, or rabbitmq-c's status). */
void br_explain_login_reply(const br_where *w, amqp_rpc_reply_t rep, char *out, size_t n);

#endif
