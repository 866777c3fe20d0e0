/* SPDX-License-Identifier: Apache-2.0 */
/* client.c — herdr socket client: one request per connection.
 *
 * herdr reads one line per connection, answers one line and closes; a second
 * request on the same connection is never answered, so every call connects
 * anew. herdr has no timeout for ordinary requests, so the deadline is ours:
 * each call computes one absolute deadline (CLOCK_MONOTONIC) and every
 * connect/send/recv waits in poll() for at most what is left of it. The
 * socket is non-blocking throughout; a full listen backlog (EAGAIN from a
 * unix connect) is retried until the deadline instead of blocking.
 *
 * We never half-close (shutdown(SHUT_WR)) after sending: on long calls such
 * as agent.prompt with a wait, herdr takes a half-close or any extra byte as
 * the client going away and ends the call without answering.
 *
 * Replies are bounded to 1 MiB, the same limit herdr puts on requests.
 * Parsing them (untrusted input) is reply.c's. */
#include "herdr/client.h"
#include "herdr/client_int.h"
#include "herdr/sanitize.h"
#include "fleetfs/os/os.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct hd_client {
    char *path;
    atomic_uint seq; /* request ids; any thread may call */
};
/* ------------------------------------------------------------ socket path */

/* <cfg> of the protocol page: $XDG_CONFIG_HOME/herdr or ~/.config/herdr.
 * A relative XDG_CONFIG_HOME is ignored, as the XDG spec asks.  The same
 * on macOS: herdr's own config_dir (src/config/io.rs) takes ~/.config/herdr
 * there too, not ~/Library/Application Support.  macOS's sun_path holds
 * 104 bytes (Linux's 108): a longer path is refused below either way. */
static char *config_dir(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    char *s = NULL;

    if (xdg && xdg[0] == '/') {
        if (asprintf(&s, "%s/herdr", xdg) < 0)
            return NULL;
    } else if (home && *home) {
        if (asprintf(&s, "%s/.config/herdr", home) < 0)
            return NULL;
    }
    return s;
}

char *hd_socket_path(void)
{
    const char *env = getenv("HERDR_SOCKET_PATH");
    const char *session = getenv("HERDR_SESSION");
    char *cfg, *s = NULL;
    int rc;

    if (env && *env)
        return strdup(env);
    /* A session name is one path component; anything else would leave
	 * the config directory, and falling back to the default session would
	 * type into the wrong herdr. */
    if (session && (strchr(session, '/') || !strcmp(session, ".") || !strcmp(session, "..")))
        return NULL;
    cfg = config_dir();
    if (!cfg)
        return NULL;
    if (session && *session && strcmp(session, "default") != 0)
        rc = asprintf(&s, "%s/sessions/%s/herdr.sock", cfg, session);
    else
        rc = asprintf(&s, "%s/herdr.sock", cfg);
    free(cfg);
    return rc < 0 ? NULL : s;
}

/* ----------------------------------------------------------------- client */

hd_client *hd_client_new(const char *socket_path)
{
    hd_client *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->path = socket_path ? strdup(socket_path) : hd_socket_path();
    if (!c->path) {
        free(c);
        return NULL;
    }
    atomic_init(&c->seq, 0);
    return c;
}

void hd_client_free(hd_client *c)
{
    if (!c)
        return;
    free(c->path);
    free(c);
}

const char *hd_client_path(const hd_client *c)
{
    return c->path;
}

/* -------------------------------------------------------------- transport */

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(long long deadline)
{
    long long d = deadline - now_ms();

    return d < 0 ? 0 : d > 1000000000 ? 1000000000 : (int)d;
}

/* Waits for ev on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short ev, long long deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = ev};
        int n = poll(&p, 1, left_ms(deadline));

        if (n >= 0)
            return n;
        if (errno != EINTR)
            return -1;
    }
}

static int connect_unix(const char *path, long long deadline, hd_reply *r)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        hd_set_reply(r, HD_ERR_DOWN, "connect", "socket path too long");
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = os_socket(AF_UNIX, SOCK_STREAM, 0, OS_NONBLOCK);
    if (fd < 0) {
        hd_set_reply(r, HD_ERR_DOWN, "connect", "socket: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        int err = 0;
        socklen_t el = sizeof(err);

        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) { /* backlog full: herdr is busy */
            if (left_ms(deadline) == 0)
                break;
            poll(NULL, 0, left_ms(deadline) < 10 ? left_ms(deadline) : 10);
            continue;
        }
        if (errno != EINPROGRESS) {
            hd_set_reply(r, HD_ERR_DOWN, "connect", "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (wait_fd(fd, POLLOUT, deadline) <= 0)
            break;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && !err)
            return fd;
        hd_set_reply(r, HD_ERR_DOWN, "connect", "%s: %s", path, strerror(err));
        close(fd);
        return -1;
    }
    /* nothing was sent: as good as down, never "maybe typed" */
    hd_set_reply(r, HD_ERR_DOWN, "connect", "connect timed out (herdr accepts no connection)");
    close(fd);
    return -1;
}

static int send_all(int fd, const char *buf, size_t len, long long deadline, hd_reply *r)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (errno == EAGAIN || errno == EINTR) {
            if (errno == EAGAIN && wait_fd(fd, POLLOUT, deadline) <= 0)
                return hd_set_reply(r, HD_ERR_TIMEOUT, "timeout", "send timed out"), -1;
        } else {
            return hd_set_reply(r, HD_ERR_CLOSED, "closed", "send: %s", strerror(errno)), -1;
        }
    }
    return 0;
}

/* Reads one line; *line is malloc'd, without its '\n'. */
static int recv_line(int fd, long long deadline, char **line, size_t *len, hd_reply *r)
{
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);

    if (!buf)
        return hd_set_reply(r, HD_ERR_PROTOCOL, "bad_request", "out of memory"), -1;
    for (;;) {
        ssize_t n;
        char *nl;

        if (used == cap) {
            char *nb;

            if (cap > HD_LINE_MAX)
                break; /* too large */
            cap = cap * 2 > HD_LINE_MAX + 1 ? HD_LINE_MAX + 1 : cap * 2;
            nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        n = recv(fd, buf + used, cap - used, 0);
        if (n > 0) {
            nl = memchr(buf + used, '\n', (size_t)n);
            used += (size_t)n;
            if (nl) {
                *line = buf;
                *len = (size_t)(nl - buf);
                return 0;
            }
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            const char *why = n == 0 ? "" : strerror(errno);

            hd_set_reply(r, HD_ERR_CLOSED, used ? "truncated" : "closed",
                         "herdr closed the connection %s%s%s",
                         used ? "mid-reply" : "without a reply", *why ? ": " : "", why);
            free(buf);
            return -1;
        }
        if (errno == EAGAIN) {
            int w = wait_fd(fd, POLLIN, deadline);

            if (w <= 0) {
                hd_set_reply(r, HD_ERR_TIMEOUT, "timeout", "no reply within the deadline");
                free(buf);
                return -1;
            }
        }
    }
    free(buf);
    return hd_set_reply(r, HD_ERR_PROTOCOL, "too_large", "reply longer than 1 MiB"), -1;
}

static int call_until(hd_client *c, const char *method, json_t *params, long long deadline,
                      hd_reply *out)
{
    char id[48], *req, *line;
    size_t reqlen, linelen;
    json_t *obj;
    int fd;

    hd_reply_clear(out);
    snprintf(id, sizeof(id), "fleetfs-%d-%u", (int)getpid(), atomic_fetch_add(&c->seq, 1) + 1);
    /* "o" steals the reference, also when packing fails (jansson 2.11+) */
    obj = json_pack("{s:s, s:s, s:o}", "id", id, "method", method, "params",
                    params ? json_incref(params) : json_object());
    req = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!req)
        return hd_set_reply(out, HD_ERR_PROTOCOL, "bad_request",
                            "cannot encode request (invalid UTF-8?)");
    reqlen = strlen(req);
    if (reqlen > HD_LINE_MAX) {
        free(req);
        return hd_set_reply(out, HD_ERR_PROTOCOL, "too_large", "request longer than 1 MiB");
    }
    req[reqlen] = '\n'; /* overwrites the NUL; length is tracked */
    fd = connect_unix(c->path, deadline, out);
    if (fd >= 0 && send_all(fd, req, reqlen + 1, deadline, out) == 0 &&
        recv_line(fd, deadline, &line, &linelen, out) == 0) {
        hd_parse_reply(line, linelen, id, out);
        free(line);
    }
    if (fd >= 0)
        close(fd);
    free(req);
    return out->kind;
}

int hd_call(hd_client *c, const char *method, json_t *params, int timeout_ms, hd_reply *out)
{
    return call_until(c, method, params, now_ms() + timeout_ms, out);
}

/* ----------------------------------------------------------- typed calls */

static int bad_result(hd_reply *rep, const char *what)
{
    return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_result", "unexpected %s result", what);
}

int hd_ping(hd_client *c, int timeout_ms, hd_version *v, hd_reply *rep)
{
    hd_version tmp;

    if (hd_call(c, "ping", NULL, timeout_ms, rep) != HD_OK)
        return rep->kind;
    if (hd_parse_version(rep->result, &tmp))
        return bad_result(rep, "ping");
    if (v)
        *v = tmp;
    return HD_OK;
}

/* result {"type": type, key: object} → out via parse. */
static int one_object(hd_reply *rep, const char *type, const char *key,
                      int (*parse)(const json_t *, void *), void *out)
{
    if (rep->kind != HD_OK)
        return rep->kind;
    if (!hd_has_type(rep->result, type) || parse(json_object_get(rep->result, key), out))
        return bad_result(rep, type);
    return HD_OK;
}

/* result {"type": type, key: [objects]} → calloc'd array of size elsz. */
static int object_list(hd_reply *rep, const char *type, const char *key,
                       int (*parse)(const json_t *, void *), size_t elsz, void **arr, size_t *n)
{
    const json_t *a = json_object_get(rep->result, key);
    char *v;

    *arr = NULL;
    *n = 0;
    if (rep->kind != HD_OK)
        return rep->kind;
    if (!hd_has_type(rep->result, type) || !json_is_array(a))
        return bad_result(rep, type);
    v = calloc(json_array_size(a) + 1, elsz);
    if (!v)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_result", "out of memory");
    for (size_t i = 0; i < json_array_size(a); i++) {
        if (parse(json_array_get(a, i), v + i * elsz)) {
            free(v);
            return bad_result(rep, type);
        }
    }
    *arr = v;
    *n = json_array_size(a);
    return HD_OK;
}

static int parse_agent_v(const json_t *o, void *out)
{
    return hd_parse_agent(o, out);
}

static int parse_pane_v(const json_t *o, void *out)
{
    return hd_parse_pane(o, out);
}

static json_t *params1(const char *key, const char *value)
{
    return json_pack("{s:s}", key, value ? value : "");
}

int hd_agent_get(hd_client *c, const char *target, int timeout_ms, hd_agent *a, hd_reply *rep)
{
    json_t *p = params1("target", target);
    hd_agent tmp;

    hd_call(c, "agent.get", p, timeout_ms, rep);
    json_decref(p);
    if (one_object(rep, "agent_info", "agent", parse_agent_v, &tmp) == HD_OK && a)
        *a = tmp;
    return rep->kind;
}

int hd_agent_list(hd_client *c, int timeout_ms, hd_agent **agents, size_t *n, hd_reply *rep)
{
    void *arr;

    hd_call(c, "agent.list", NULL, timeout_ms, rep);
    object_list(rep, "agent_list", "agents", parse_agent_v, sizeof(hd_agent), &arr, n);
    *agents = arr;
    return rep->kind;
}

int hd_pane_get(hd_client *c, const char *pane_id, int timeout_ms, hd_pane *p, hd_reply *rep)
{
    json_t *params = params1("pane_id", pane_id);
    hd_pane tmp;

    hd_call(c, "pane.get", params, timeout_ms, rep);
    json_decref(params);
    if (one_object(rep, "pane_info", "pane", parse_pane_v, &tmp) == HD_OK && p)
        *p = tmp;
    return rep->kind;
}

int hd_pane_list(hd_client *c, int timeout_ms, hd_pane **panes, size_t *n, hd_reply *rep)
{
    void *arr;

    hd_call(c, "pane.list", NULL, timeout_ms, rep);
    object_list(rep, "pane_list", "panes", parse_pane_v, sizeof(hd_pane), &arr, n);
    *panes = arr;
    return rep->kind;
}

/* NULL-terminated strings → JSON array; NULL on encoding failure. */
static json_t *string_array(const char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v[i]; i++) {
        if (json_array_append_new(a, json_string(v[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static int refuse_unclean(const char *text, hd_reply *rep)
{
    if (text && !san_is_clean(text, strlen(text)))
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "unsafe_text",
                            "text contains control characters; "
                            "pass it through san_text first");
    return HD_OK;
}

int hd_agent_prompt(hd_client *c, const char *target, const char *text,
                    const char *const *wait_until, int wait_timeout_ms, int timeout_ms, hd_agent *a,
                    hd_reply *rep)
{
    long long deadline = now_ms() + timeout_ms;
    json_t *p, *wait = NULL, *until = NULL;
    hd_agent tmp;

    hd_reply_clear(rep);
    if (!target || !text)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "target and text are required");
    if (refuse_unclean(text, rep) != HD_OK)
        return rep->kind;
    if (wait_until) {
        until = *wait_until ? string_array(wait_until) : NULL;
        if (*wait_until && !until)
            return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "cannot encode wait statuses");
        wait = until ? json_pack("{s:o, s:i}", "until", until, "timeout_ms", wait_timeout_ms)
                     : json_pack("{s:i}", "timeout_ms", wait_timeout_ms);
        /* herdr must answer before we give up on it */
        deadline += wait_timeout_ms > 0 ? wait_timeout_ms : 0;
        if (!wait)
            return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "cannot encode wait");
    }
    p = json_pack("{s:s, s:s}", "target", target, "text", text);
    if (p && wait)
        json_object_set_new(p, "wait", wait);
    else
        json_decref(wait);
    if (!p)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request",
                            "cannot encode prompt (invalid UTF-8?)");
    call_until(c, "agent.prompt", p, deadline, rep);
    json_decref(p);
    if (rep->kind == HD_OK && !hd_has_type(rep->result, "agent_prompted"))
        return bad_result(rep, "agent.prompt");
    /* The text was typed: an odd AgentInfo must not turn that into an
	 * error, so *a is then left "unknown" for the caller to re-check. */
    if (rep->kind == HD_OK && a) {
        if (hd_parse_agent(json_object_get(rep->result, "agent"), &tmp))
            memset(&tmp, 0, sizeof(tmp));
        *a = tmp;
    }
    return rep->kind;
}

int hd_pane_send_input(hd_client *c, const char *pane_id, const char *text, const char *const *keys,
                       int timeout_ms, hd_reply *rep)
{
    json_t *p, *k = NULL;

    hd_reply_clear(rep);
    if (!pane_id)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "pane_id is required");
    if (refuse_unclean(text, rep) != HD_OK)
        return rep->kind;
    p = json_pack("{s:s}", "pane_id", pane_id);
    if (p && text && json_object_set_new(p, "text", json_string(text)))
        json_decref(p), p = NULL;
    if (p && keys && (!(k = string_array(keys)) || json_object_set_new(p, "keys", k)))
        json_decref(p), p = NULL;
    if (!p)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request",
                            "cannot encode input (invalid UTF-8?)");
    hd_call(c, "pane.send_input", p, timeout_ms, rep);
    json_decref(p);
    if (rep->kind == HD_OK && !hd_has_type(rep->result, "ok"))
        return bad_result(rep, "pane.send_input");
    return rep->kind;
}

/* ------------------------------------------------ panes and agent.start */

/* params gets key = s when s is set; false when it cannot be encoded. */
static bool put_opt(json_t *params, const char *key, const char *s)
{
    return !s || json_object_set_new(params, key, json_string(s)) == 0;
}

/* result[key] as a PaneInfo into out (when out is set). */
static int pane_result(hd_reply *rep, const char *key, const char *what, hd_pane *out)
{
    hd_pane tmp;

    if (rep->kind != HD_OK)
        return rep->kind;
    if (hd_parse_pane(json_object_get(rep->result, key), &tmp))
        return bad_result(rep, what);
    if (out)
        *out = tmp;
    return HD_OK;
}

int hd_tab_create(hd_client *c, const char *workspace_id, const char *label, int timeout_ms,
                  hd_pane *root, hd_reply *rep)
{
    json_t *p = json_pack("{s:b}", "focus", 0);

    hd_reply_clear(rep);
    if (!p || !put_opt(p, "workspace_id", workspace_id) || !put_opt(p, "label", label)) {
        json_decref(p);
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "cannot encode tab.create");
    }
    hd_call(c, "tab.create", p, timeout_ms, rep);
    json_decref(p);
    return pane_result(rep, "root_pane", "tab.create", root);
}

int hd_pane_split(hd_client *c, const char *target_pane_id, const char *direction, const char *cwd,
                  int timeout_ms, hd_pane *out, hd_reply *rep)
{
    json_t *p;

    hd_reply_clear(rep);
    if (!direction || (strcmp(direction, "right") != 0 && strcmp(direction, "down") != 0))
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "direction must be right or down");
    p = json_pack("{s:s, s:b}", "direction", direction, "focus", 0);
    if (!p || !put_opt(p, "target_pane_id", target_pane_id) || !put_opt(p, "cwd", cwd)) {
        json_decref(p);
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request", "cannot encode pane.split");
    }
    hd_call(c, "pane.split", p, timeout_ms, rep);
    json_decref(p);
    return pane_result(rep, "pane", "pane.split", out);
}

int hd_agent_start(hd_client *c, const char *name, const char *kind, const char *pane_id,
                   const char *const *args, int wait_ms, int timeout_ms, hd_agent *a, hd_reply *rep)
{
    json_t *p, *av = NULL;
    hd_agent tmp;

    hd_reply_clear(rep);
    if (!name || !kind || !pane_id)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request",
                            "name, kind and pane_id are required");
    if (wait_ms <= 3000 || wait_ms > 300000)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request",
                            "agent.start timeout_ms must be > 3000 and <= 300000 (got %d)",
                            wait_ms);
    p = json_pack("{s:s, s:s, s:s, s:i}", "name", name, "kind", kind, "pane_id", pane_id,
                  "timeout_ms", wait_ms);
    if (p && args && (!(av = string_array(args)) || json_object_set_new(p, "args", av)))
        json_decref(p), p = NULL;
    if (!p)
        return hd_set_reply(rep, HD_ERR_PROTOCOL, "bad_request",
                            "cannot encode agent.start (invalid UTF-8?)");
    call_until(c, "agent.start", p, now_ms() + wait_ms + timeout_ms, rep);
    json_decref(p);
    if (rep->kind != HD_OK)
        return rep->kind;
    if (hd_parse_agent(json_object_get(rep->result, "agent"), &tmp))
        return bad_result(rep, "agent.start");
    if (a)
        *a = tmp;
    return HD_OK;
}

int hd_pane_close(hd_client *c, const char *pane_id, int timeout_ms, hd_reply *rep)
{
    json_t *p = params1("pane_id", pane_id);

    hd_call(c, "pane.close", p, timeout_ms, rep);
    json_decref(p);
    return rep->kind;
}
