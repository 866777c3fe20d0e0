/* SPDX-License-Identifier: Apache-2.0 */
/* broker/explain.c — see explain.h.
 *
 * rabbitmq-c says "a socket error occurred" for a refused TCP connection,
 * and RabbitMQ's refusals name neither the user nor where the password came
 * from, so the sentences are made here.  RabbitMQ 3.10's texts, as seen:
 *   403 ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN...
 *   530 NOT_ALLOWED - vhost X not found            ("vhost  not found" for "")
 *   530 NOT_ALLOWED - access to vhost 'X' refused for user 'U'
 * A URI's path is the vhost: amqp://host:port/ asks for the empty vhost "",
 * not "/", which is written amqp://host:port or amqp://host:port/%2f.
 */
#include "broker/explain.h"
#include "fleetfs/os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <amqp.h>

#define DIAG_TIMEOUT_MS 1000

/* rabbitmq-c keeps the errno of a failed connect to itself: connect once
 * more, without AMQP, to learn it.  0 when the connect works now. */
static int tcp_errno(const char *host, int port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    char svc[16];
    int err = EHOSTUNREACH;

    snprintf(svc, sizeof svc, "%d", port);
    if (getaddrinfo(host, svc, &hints, &res) != 0)
        return EHOSTUNREACH;
    for (ai = res; ai; ai = ai->ai_next) {
        int fd = os_socket(ai->ai_family, ai->ai_socktype, 0, OS_NONBLOCK);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        socklen_t len = sizeof err;
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            err = 0;
        } else if (errno != EINPROGRESS) {
            err = errno;
        } else if (poll(&p, 1, DIAG_TIMEOUT_MS) <= 0) {
            err = ETIMEDOUT;
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
            err = errno;
        }
        close(fd);
        if (err == 0)
            break;
    }
    freeaddrinfo(res);
    return err;
}

static void explain_tcp(const br_where *w, char *out, size_t n)
{
    int err = tcp_errno(w->host, w->port);
    switch (err) {
    case ECONNREFUSED:
        snprintf(out, n,
                 "%s: nothing listens on %s:%d (connection refused); check the port in the "
                 "URI (RabbitMQ's AMQP port is usually 5672, 5671 for amqps://) and that the "
                 "broker is running",
                 w->shown, w->host, w->port);
        break;
    case ETIMEDOUT:
        snprintf(out, n,
                 "%s: %s:%d does not answer (connection timed out); check the host, the port "
                 "and any firewall between",
                 w->shown, w->host, w->port);
        break;
    case 0:
        snprintf(out, n, "%s: the connection to %s:%d failed, then worked when tried again",
                 w->shown, w->host, w->port);
        break;
    default:
        snprintf(out, n, "%s: cannot connect to %s:%d: %s", w->shown, w->host, w->port,
                 strerror(err));
    }
}

void br_explain_open(const br_where *w, int rc, char *out, size_t n)
{
    switch (rc) {
    case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
        snprintf(out, n,
                 "%s: TLS: the broker's certificate is not trusted by the CA in %s; set "
                 "-o ca= to the CA file that signed the broker's certificate",
                 w->shown, w->ca);
        break;
    case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
        snprintf(out, n,
                 "%s: TLS: the broker's certificate does not name host '%s' (hostname "
                 "verification failed); connect with a DNS name from the certificate's "
                 "subjectAltName (an IP address never matches)",
                 w->shown, w->host);
        break;
    case AMQP_STATUS_SSL_CONNECTION_FAILED:
        snprintf(out, n,
                 "%s: TLS handshake failed; is port %d the broker's TLS listener "
                 "(usually 5671)?",
                 w->shown, w->port);
        break;
    case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED:
        snprintf(out, n, "%s: cannot resolve the host name '%s'; check the URI's host", w->shown,
                 w->host);
        break;
    case AMQP_STATUS_SOCKET_ERROR:
    case AMQP_STATUS_TIMEOUT:
        explain_tcp(w, out, n);
        break;
    default:
        snprintf(out, n, "%s: %s", w->shown, amqp_error_string2(rc));
    }
}

static void explain_vhost(const br_where *w, const char *text, char *out, size_t n)
{
    if (!*w->vhost)
        snprintf(out, n,
                 "%s asks for the empty vhost '' (a '/' after host:port with nothing behind it "
                 "names vhost ''), which the broker does not have (%s); for the default vhost "
                 "'/' write amqp://%s:%d with no path, or amqp://%s:%d/%%2f",
                 w->shown, text, w->host, w->port, w->host, w->port);
    else
        snprintf(out, n,
                 "%s: the broker has no vhost '%s' (%s); create it (rabbitmqctl add_vhost "
                 "'%s') or fix the URI's path or -o vhost= (a '/' inside a vhost name is "
                 "written %%2f)",
                 w->shown, w->vhost, text, w->vhost);
}

void br_explain_login(const br_where *w, int code, const char *text, char *out, size_t n)
{
    if (code == 403 && strstr(text, "ACCESS_REFUSED"))
        snprintf(out, n,
                 "%s: the broker refused the login of user '%s' (%s); check the user name "
                 "and the password in the environment variable %s (named by broker_uri_env), "
                 "and that the user exists on the broker",
                 w->shown, w->user, text, w->uri_env ? w->uri_env : "FLEET_BROKER_URI");
    else if (code == 530 && strstr(text, "vhost") && strstr(text, "not found"))
        explain_vhost(w, text, out, n);
    else if (code == 530 && strstr(text, "refused for user"))
        snprintf(out, n,
                 "%s: user '%s' may not use vhost '%s' (%s); grant it: rabbitmqctl "
                 "set_permissions -p '%s' '%s' '.*' '.*' '.*'",
                 w->shown, w->user, w->vhost, text, w->vhost, w->user);
    else if (code > 0)
        snprintf(out, n, "%s refused the login: %s", w->shown, text);
    else if (code == AMQP_STATUS_TIMEOUT)
        snprintf(out, n,
                 "%s: %s:%d accepted the connection but did not complete the AMQP handshake in "
                 "time (%s): the broker is paused or overloaded, or the port is not AMQP",
                 w->shown, w->host, w->port, text);
    else
        snprintf(out, n,
                 "%s: the AMQP handshake with %s:%d failed (%s); is it the broker's AMQP port "
                 "(usually 5672, 5671 for amqps://)?",
                 w->shown, w->host, w->port, text);
}

void br_explain_login_reply(const br_where *w, amqp_rpc_reply_t rep, char *out, size_t n)
{
    char t[256] = "unexpected reply";
    int code = 0;
    if (rep.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        rep.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = rep.reply.decoded;
        code = m->reply_code;
        snprintf(t, sizeof t, "%.*s", (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else if (rep.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        code = rep.library_error; /* negative: an amqp_status_enum */
        snprintf(t, sizeof t, "%s", amqp_error_string2(rep.library_error));
    }
    br_explain_login(w, code, t, out, n);
}
