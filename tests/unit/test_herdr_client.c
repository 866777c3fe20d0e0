/* SPDX-License-Identifier: Apache-2.0 */
/* test_herdr_client.c — the herdr client: reply parsing on captured lines,
 * socket path resolution, and real round trips against a tiny AF_UNIX
 * server thread in this file that follows herdr's framing (one line in, one
 * line out, close) or misbehaves on purpose (close, hang, truncate, flood).
 * Making panes and starting agents (pane.split, tab.create, agent.start,
 * pane.close, and sp_herdr_start on top) run against the fake herdr
 * itself (BUILD/fake-herdr, next to this binary's directory), whose state
 * file says which panes exist: a failed start must leave none behind. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fleetfs/os/os.h"
#include "herdr/client.h"
#include "herdr/spawn.h"
#include "tests/unit/fake_herdr_run.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ------------------------------------------------------- parsing lines */

#define PARSE(line, id, rep) hd_parse_reply((line), strlen(line), (id), (rep))

static void pong_null_caps_suffixed_version(void **state)
{
    hd_reply r = {0};
    hd_version v;

    (void)state;
    assert_int_equal(PARSE("{\"id\":\"p\",\"result\":{\"type\":\"pong\","
                           "\"version\":\"0.8.2-beta.1+g3f2\",\"protocol\":20,"
                           "\"capabilities\":null}}\n",
                           "p", &r),
                     HD_OK);
    assert_int_equal(hd_parse_version(r.result, &v), 0);
    assert_string_equal(v.version, "0.8.2-beta.1+g3f2");
    assert_int_equal(v.protocol, 20);
    assert_string_equal(v.text, "herdr 0.8.2-beta.1+g3f2 protocol 20");
    hd_reply_clear(&r);

    assert_int_equal(PARSE("{\"id\":\"p\",\"result\":{\"type\":\"pong\","
                           "\"version\":\"0.9.0\",\"new\":[1]}}",
                           "p", &r),
                     HD_OK);
    assert_int_equal(hd_parse_version(r.result, &v), 0);
    assert_int_equal(v.protocol, -1);
    hd_reply_clear(&r);
}

static void pane_list_tolerant(void **state)
{
    const char *line = "{\"id\":\"l\",\"result\":{\"type\":\"pane_list\",\"panes\":["
                       "{\"pane_id\":\"w1:p1\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\","
                       "\"focused\":true,\"agent_status\":\"idle\",\"label\":\"beta\","
                       "\"agent\":\"claude\",\"title\":\"\\u001b[31mbuild\\nok\","
                       "\"cwd\":\"/src\",\"future_key\":{\"a\":[]}},"
                       "{\"pane_id\":\"w1:p2\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\","
                       "\"focused\":false,\"agent_status\":\"thinking\",\"agent\":null}"
                       "]}}";
    hd_reply r = {0};
    hd_pane p;
    json_t *panes;

    (void)state;
    assert_int_equal(PARSE(line, "l", &r), HD_OK);
    panes = json_object_get(r.result, "panes");
    assert_int_equal(hd_parse_pane(json_array_get(panes, 0), &p), 0);
    assert_string_equal(p.pane_id, "w1:p1");
    assert_string_equal(p.label, "beta");
    assert_string_equal(p.agent, "claude");
    assert_string_equal(p.title, "build ok"); /* sanitised, one line */
    assert_true(p.focused);
    assert_int_equal(p.status, HD_IDLE);
    assert_int_equal(hd_parse_pane(json_array_get(panes, 1), &p), 0);
    assert_string_equal(p.label, "");
    assert_string_equal(p.agent, "");
    assert_int_equal(p.status, HD_UNKNOWN);
    hd_reply_clear(&r);
}

static void pane_and_agent_required_fields(void **state)
{
    json_t *o;
    hd_pane p;
    hd_agent a;
    char longid[300];

    (void)state;
    o = json_pack("{s:s}", "label", "x");
    assert_int_equal(hd_parse_pane(o, &p), -1);
    json_decref(o);
    memset(longid, 'w', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    o = json_pack("{s:s}", "pane_id", longid);
    assert_int_equal(hd_parse_pane(o, &p), -1); /* never truncate an id */
    assert_int_equal(hd_parse_agent(o, &a), -1);
    json_decref(o);
    o = json_pack("{s:s, s:s}", "pane_id", "w1:p1", "label", longid);
    assert_int_equal(hd_parse_pane(o, &p), 0); /* a label may be cut */
    assert_int_equal(strlen(p.label), HD_TEXT_MAX - 1);
    json_decref(o);
    assert_int_equal(hd_parse_pane(NULL, &p), -1);
    /* ids and names reach status files and logs: no control character */
    o = json_pack("{s:s, s:s}", "pane_id", "w1:p2\x1b]2;x\x07", "name", "be\nta");
    assert_int_equal(hd_parse_pane(o, &p), 0);
    assert_string_equal(p.pane_id, "w1:p2?]2;x?");
    assert_string_equal(p.name, "be?ta");
    assert_int_equal(hd_parse_agent(o, &a), 0);
    assert_string_equal(a.pane_id, "w1:p2?]2;x?");
    json_decref(o);
}

static void agent_info_line(void **state)
{
    hd_reply r = {0};
    hd_agent a;

    (void)state;
    assert_int_equal(PARSE("{\"id\":\"a\",\"result\":{\"type\":\"agent_info\","
                           "\"agent\":{\"pane_id\":\"w2:p7\",\"name\":\"beta\","
                           "\"agent\":\"codex\",\"agent_status\":\"blocked\","
                           "\"extra\":1}}}",
                           "a", &r),
                     HD_OK);
    assert_int_equal(hd_parse_agent(json_object_get(r.result, "agent"), &a), 0);
    assert_string_equal(a.pane_id, "w2:p7");
    assert_string_equal(a.name, "beta");
    assert_string_equal(a.agent, "codex");
    assert_int_equal(a.status, HD_BLOCKED);
    assert_string_equal(hd_status_name(a.status), "blocked");
    assert_false(a.launch_pending); /* absent: false, as before herdr 0.8.2 */
    hd_reply_clear(&r);
    /* herdr's AgentInfo of a managed start not ready yet */
    assert_int_equal(PARSE("{\"id\":\"a\",\"result\":{\"type\":\"agent_info\","
                           "\"agent\":{\"pane_id\":\"w2:p7\",\"agent\":\"claude\","
                           "\"agent_status\":\"idle\",\"launch_pending\":true,"
                           "\"interactive_ready\":false,\"state_change_seq\":3}}}",
                           "a", &r),
                     HD_OK);
    assert_int_equal(hd_parse_agent(json_object_get(r.result, "agent"), &a), 0);
    assert_true(a.launch_pending);
    hd_reply_clear(&r);
}

static void error_envelopes(void **state)
{
    hd_reply r = {0};

    (void)state;
    assert_int_equal(PARSE("{\"id\":\"r1\",\"error\":{\"code\":\"agent_blocked\","
                           "\"message\":\"agent is blocked\"}}",
                           "r1", &r),
                     HD_ERR_REMOTE);
    assert_string_equal(r.code, "agent_blocked");
    assert_string_equal(r.message, "agent is blocked");
    assert_null(r.result);
    /* malformed requests are answered with an empty id */
    assert_int_equal(PARSE("{\"id\":\"\",\"error\":{\"code\":\"invalid_request\","
                           "\"message\":\"unknown method\"}}",
                           "r1", &r),
                     HD_ERR_REMOTE);
    assert_string_equal(r.code, "invalid_request");
    assert_int_equal(PARSE("{\"error\":{\"code\":\"internal_error\"}}", "r1", &r), HD_ERR_REMOTE);
    assert_string_equal(r.message, "");
    assert_int_equal(PARSE("{\"id\":\"r9\",\"error\":{\"code\":\"timeout\"}}", "r1", &r),
                     HD_ERR_PROTOCOL);
    assert_string_equal(r.code, "id_mismatch");
    /* a message is made safe to log */
    assert_int_equal(PARSE("{\"id\":\"r1\",\"error\":{\"code\":\"x\",\"message\":"
                           "\"bad\\u001b]0;t\\u0007 thing\\r\\n\"}}",
                           "r1", &r),
                     HD_ERR_REMOTE);
    assert_string_equal(r.message, "bad thing ");
    hd_reply_clear(&r);
}

static void unusable_lines(void **state)
{
    static const char *const bad[] = {
        "",
        "\n",
        "garbage",
        "{\"id\":\"p\",\"result\":{\"type\":\"po",
        "[1,2]",
        "null",
        "{\"id\":\"p\"}",
        "{\"id\":\"p\",\"result\":{},\"error\":{\"code\":\"x\"}}",
        "{\"id\":\"p\",\"result\":[1]}",
        "{\"id\":7,\"result\":{}}",
        "{\"id\":\"q\",\"result\":{\"type\":\"pong\"}}",
        "{\"result\":{\"type\":\"pong\"}}",
        "{\"id\":\"p\",\"result\":{}}\n{\"id\":\"p\",\"result\":{}}",
        "{\"id\":\"p\",\"result\":{\"type\":\"\xff\"}}",
    };
    hd_reply r = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(PARSE(bad[i], "p", &r), HD_ERR_PROTOCOL);
        assert_null(r.result);
        assert_true(r.code[0] != '\0');
    }
    hd_reply_clear(&r);
}

/* ------------------------------------------------------------ socket path */

static void set(const char *k, const char *v)
{
    if (v)
        setenv(k, v, 1);
    else
        unsetenv(k);
}

static void expect_path(const char *sock, const char *session, const char *xdg, const char *home,
                        const char *want)
{
    char *p;

    set("HERDR_SOCKET_PATH", sock);
    set("HERDR_SESSION", session);
    set("XDG_CONFIG_HOME", xdg);
    set("HOME", home);
    p = hd_socket_path();
    if (want) {
        assert_non_null(p);
        assert_string_equal(p, want);
    } else {
        assert_null(p);
    }
    free(p);
}

static void socket_path_resolution(void **state)
{
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

    (void)state;
    expect_path("/run/h.sock", "work", "/cfg", "/home/u", "/run/h.sock");
    expect_path(NULL, "work", "/cfg", "/home/u", "/cfg/herdr/sessions/work/herdr.sock");
    expect_path(NULL, "default", "/cfg", "/home/u", "/cfg/herdr/herdr.sock");
    expect_path(NULL, NULL, "/cfg", "/home/u", "/cfg/herdr/herdr.sock");
    expect_path("", "", NULL, "/home/u", "/home/u/.config/herdr/herdr.sock");
    expect_path(NULL, "w", NULL, "/home/u", "/home/u/.config/herdr/sessions/w/herdr.sock");
    expect_path(NULL, NULL, "relative", "/home/u", "/home/u/.config/herdr/herdr.sock");
    expect_path(NULL, "../evil", "/cfg", "/home/u", NULL);
    expect_path(NULL, NULL, NULL, NULL, NULL);
    set("HOME", home);
    set("HERDR_SESSION", NULL);
    free(home);
}

/* --------------------------------------------------------- a tiny server */

enum srv_mode { SRV_REPLY, SRV_CLOSE, SRV_HANG, SRV_TRUNCATE, SRV_FLOOD };

typedef struct {
    char path[108];
    int lfd;
    enum srv_mode mode;
    const char *reply_fmt; /* one %s: the request's id */
    int delay_ms;
    int conns;
    char last[4096];
    pthread_t thread;
} srv;

static void send_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

        if (w <= 0)
            return;
        b += w;
        n -= (size_t)w;
    }
}

static void serve_one(srv *s, int fd)
{
    char buf[4096], out[8192], *nl;
    size_t used = 0;
    ssize_t n;
    json_t *req;

    while (used < sizeof(buf) - 1 && (n = read(fd, buf + used, sizeof(buf) - 1 - used)) > 0) {
        used += (size_t)n;
        buf[used] = '\0';
        if ((nl = strchr(buf, '\n')) != NULL)
            break;
    }
    buf[used] = '\0';
    snprintf(s->last, sizeof(s->last), "%s", buf);
    if (s->mode == SRV_CLOSE)
        return;
    if (s->mode == SRV_HANG) {
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
        return;
    }
    if (s->mode == SRV_TRUNCATE) {
        send_all(fd, "{\"id\":\"", 7);
        return;
    }
    if (s->mode == SRV_FLOOD) {
        memset(out, 'x', sizeof(out));
        for (int i = 0; i < 140; i++) /* > 1 MiB, no newline */
            send_all(fd, out, sizeof(out));
        return;
    }
    req = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
    snprintf(out, sizeof(out), s->reply_fmt, json_string_value(json_object_get(req, "id")));
    json_decref(req);
    strcat(out, "\n");
    if (s->delay_ms)
        poll(NULL, 0, s->delay_ms);
    send_all(fd, out, strlen(out));
}

static void *srv_main(void *arg)
{
    srv *s = arg;
    int fd;

    while ((fd = accept(s->lfd, NULL, NULL)) >= 0) {
        s->conns++;
        serve_one(s, fd);
        close(fd);
    }
    return NULL;
}

static srv *srv_start(enum srv_mode mode, const char *reply_fmt)
{
    srv *s = calloc(1, sizeof(*s));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    snprintf(s->path, sizeof(s->path), "/tmp/hd-test-%d-%ld.sock", (int)getpid(), (long)random());
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->path);
    s->mode = mode;
    s->reply_fmt = reply_fmt;
    s->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    assert_int_equal(pthread_create(&s->thread, NULL, srv_main, s), 0);
    return s;
}

static void srv_stop(srv *s)
{
    shutdown(s->lfd, SHUT_RDWR); /* wakes accept() */
    pthread_join(s->thread, NULL);
    close(s->lfd);
    unlink(s->path);
    free(s);
}

static long long ms_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define PONG                                                    \
    "{\"id\":\"%s\",\"result\":{\"type\":\"pong\",\"version\":" \
    "\"0.8.2\",\"protocol\":20,\"capabilities\":null}}"

static void round_trip_ping(void **state)
{
    srv *s = srv_start(SRV_REPLY, PONG);
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};
    hd_version v;
    json_t *req;

    (void)state;
    assert_int_equal(hd_ping(c, 2000, &v, &r), HD_OK);
    assert_string_equal(v.text, "herdr 0.8.2 protocol 20");
    /* one compact line, params {} */
    assert_non_null(strchr(s->last, '\n'));
    assert_int_equal(strchr(s->last, '\n')[1], '\0');
    assert_null(strchr(s->last, ' '));
    req = json_loads(s->last, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(req, "method")), "ping");
    assert_true(json_is_object(json_object_get(req, "params")));
    assert_non_null(json_string_value(json_object_get(req, "id")));
    json_decref(req);
    /* every call is a new connection */
    assert_int_equal(hd_ping(c, 2000, &v, &r), HD_OK);
    assert_int_equal(s->conns, 2);
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void round_trip_lists_and_input(void **state)
{
    srv *s =
        srv_start(SRV_REPLY, "{\"id\":\"%s\",\"result\":{\"type\":\"pane_list\",\"panes\":["
                             "{\"pane_id\":\"w1:p1\",\"agent_status\":\"done\",\"label\":\"beta\"},"
                             "{\"pane_id\":\"w1:p2\",\"agent_status\":\"working\"}]}}");
    hd_client *c = hd_client_new(s->path);
    const char *keys[] = {"enter", NULL};
    hd_reply r = {0};
    hd_pane *panes;
    size_t n;

    (void)state;
    assert_int_equal(hd_pane_list(c, 2000, &panes, &n, &r), HD_OK);
    assert_int_equal(n, 2);
    assert_string_equal(panes[0].label, "beta");
    assert_int_equal(panes[0].status, HD_DONE);
    assert_int_equal(panes[1].status, HD_WORKING);
    free(panes);
    /* the wrong result type for the call is a protocol error */
    s->reply_fmt = "{\"id\":\"%s\",\"result\":{\"type\":\"pane_info\"}}";
    {
        hd_agent *agents = NULL;

        assert_int_equal(hd_agent_list(c, 2000, &agents, &n, &r), HD_ERR_PROTOCOL);
        assert_string_equal(r.code, "bad_result");
        assert_null(agents);
    }
    s->reply_fmt = "{\"id\":\"%s\",\"result\":{\"type\":\"ok\"}}";
    assert_int_equal(hd_pane_send_input(c, "w1:p2", "line one\nline two", keys, 2000, &r), HD_OK);
    assert_non_null(strstr(s->last, "\"pane_id\":\"w1:p2\""));
    assert_non_null(strstr(s->last, "\"text\":\"line one\\nline two\""));
    assert_non_null(strstr(s->last, "\"keys\":[\"enter\"]"));
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

#define PROMPTED                                                               \
    "{\"id\":\"%s\",\"result\":{\"type\":\"agent_prompted\","                  \
    "\"agent\":{\"pane_id\":\"w1:p1\",\"name\":\"beta\",\"agent\":\"claude\"," \
    "\"agent_status\":\"working\"}}}"

static void prompt_wait_extends_deadline(void **state)
{
    srv *s = srv_start(SRV_REPLY, PROMPTED);
    hd_client *c = hd_client_new(s->path);
    const char *until[] = {"idle", "done", NULL};
    const char *dflt[] = {NULL};
    hd_reply r = {0};
    hd_agent a;

    (void)state;
    s->delay_ms = 350;
    /* 200 ms alone would time out; the 300 ms wait is added to it */
    assert_int_equal(hd_agent_prompt(c, "beta", "hello", until, 300, 200, &a, &r), HD_OK);
    assert_int_equal(a.status, HD_WORKING);
    assert_non_null(strstr(s->last, "\"wait\":{\"until\":[\"idle\",\"done\"],\"timeout_ms\":300}"));
    assert_int_equal(hd_agent_prompt(c, "beta", "hello", NULL, 0, 200, &a, &r), HD_ERR_TIMEOUT);
    assert_null(strstr(s->last, "wait"));
    s->delay_ms = 0;
    assert_int_equal(hd_agent_prompt(c, "beta", "x", dflt, 100, 500, NULL, &r), HD_OK);
    assert_non_null(strstr(s->last, "\"wait\":{\"timeout_ms\":100}"));
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void unsafe_text_never_sent(void **state)
{
    srv *s = srv_start(SRV_REPLY, PROMPTED);
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};

    (void)state;
    assert_int_equal(hd_agent_prompt(c, "beta", "x\x1b[201~\r", NULL, 0, 500, NULL, &r),
                     HD_ERR_PROTOCOL);
    assert_string_equal(r.code, "unsafe_text");
    assert_int_equal(hd_pane_send_input(c, "w1:p1", "\x7f", NULL, 500, &r), HD_ERR_PROTOCOL);
    assert_int_equal(s->conns, 0);
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void remote_error_with_empty_id(void **state)
{
    srv *s = srv_start(SRV_REPLY, "{\"id\":\"\",\"error\":{\"code\":"
                                  "\"invalid_request\",\"message\":\"unknown method\"}}");
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};

    (void)state;
    assert_int_equal(hd_call(c, "no.such", NULL, 1000, &r), HD_ERR_REMOTE);
    assert_string_equal(r.code, "invalid_request");
    assert_string_equal(r.message, "unknown method");
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void closed_without_reply(void **state)
{
    srv *s = srv_start(SRV_CLOSE, NULL);
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};

    (void)state;
    assert_int_equal(hd_ping(c, 2000, NULL, &r), HD_ERR_CLOSED);
    assert_string_equal(r.code, "closed");
    s->mode = SRV_TRUNCATE;
    assert_int_equal(hd_ping(c, 2000, NULL, &r), HD_ERR_CLOSED);
    assert_string_equal(r.code, "truncated");
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void hang_times_out(void **state)
{
    srv *s = srv_start(SRV_HANG, NULL);
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};
    long long t0 = ms_now(), dt;

    (void)state;
    assert_int_equal(hd_ping(c, 300, NULL, &r), HD_ERR_TIMEOUT);
    dt = ms_now() - t0;
    assert_true(dt >= 290 && dt < 1500);
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s); /* our close ended the hanging call */
}

static void oversized_reply_refused(void **state)
{
    srv *s = srv_start(SRV_FLOOD, NULL);
    hd_client *c = hd_client_new(s->path);
    hd_reply r = {0};

    (void)state;
    assert_int_equal(hd_ping(c, 5000, NULL, &r), HD_ERR_PROTOCOL);
    assert_string_equal(r.code, "too_large");
    hd_reply_clear(&r);
    hd_client_free(c);
    srv_stop(s);
}

static void absent_or_refused_is_down(void **state)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    hd_client *c = hd_client_new("/nonexistent/dir/herdr.sock");
    hd_reply r = {0};
    int fd;

    (void)state;
    assert_int_equal(hd_ping(c, 500, NULL, &r), HD_ERR_DOWN);
    hd_client_free(c);
    /* a socket file nobody listens on: ECONNREFUSED */
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/hd-test-dead-%d.sock", (int)getpid());
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    c = hd_client_new(sa.sun_path);
    assert_int_equal(hd_ping(c, 500, NULL, &r), HD_ERR_DOWN);
    assert_string_equal(r.code, "connect");
    close(fd);
    unlink(sa.sun_path);
    hd_reply_clear(&r);
    hd_client_free(c);
}

/* herdr's listen backlog is full: the connect never completes.  Nothing
 * was sent, so a prompt is "down" (not typed), never "maybe typed". */
static void connect_timeout_is_down(void **state)
{
    char dir[] = "/tmp/hdbacklog-XXXXXX";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int lfd, fds[64], nf = 0;
    hd_client *c;
    hd_reply r = {0};
    hd_agent a;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/herdr.sock", dir);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 0), 0);
    while (nf < 64) { /* fill the backlog, never accepting */
        int fd = os_socket(AF_UNIX, SOCK_STREAM, 0, OS_NONBLOCK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            assert_int_equal(errno, EAGAIN);
            close(fd);
            break;
        }
        fds[nf++] = fd;
    }
    assert_true(nf < 64);
    c = hd_client_new(sa.sun_path);
    assert_int_equal(hd_agent_prompt(c, "beta", "hello", NULL, 0, 200, &a, &r), HD_ERR_DOWN);
    assert_string_equal(r.code, "connect");
    hd_reply_clear(&r);
    hd_client_free(c);
    while (nf > 0)
        close(fds[--nf]);
    close(lfd);
    unlink(sa.sun_path);
    rmdir(dir);
}

/* ------------------------------------------- against the fake herdr */

#define LEAD_PANE                                                                               \
    "{\"pane_id\":\"w1:p1\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"agent\":\"claude\"," \
    "\"name\":\"beta\",\"agent_status\":\"idle\"}"

static void fake_make_start_close(void **state)
{
    fake *f = fake_start("{\"panes\":[" LEAD_PANE "]}");
    hd_client *c = hd_client_new(f->sock);
    const char *args[] = {"--model", "opus", "two words", NULL};
    hd_reply r = {0};
    hd_pane tab, split;
    hd_agent a;
    json_t *p;

    (void)state;
    assert_int_equal(hd_tab_create(c, NULL, "w1", 2000, &tab, &r), HD_OK);
    assert_int_equal(hd_pane_split(c, "w1:p1", "down", "/srv/x", 2000, &split, &r), HD_OK);
    assert_string_not_equal(tab.pane_id, split.pane_id);
    assert_string_not_equal(split.pane_id, "w1:p1");
    assert_int_equal(fake_panes(f), 3);
    p = fake_pane(f, split.pane_id); /* the cwd reached herdr; no env was sent */
    assert_string_equal(json_string_value(json_object_get(p, "cwd")), "/srv/x");
    assert_null(json_object_get(p, "env"));
    json_decref(p);
    assert_int_equal(hd_agent_start(c, "w1", "codex", split.pane_id, args, 5000, 2000, &a, &r),
                     HD_OK);
    assert_string_equal(a.pane_id, split.pane_id);
    assert_string_equal(a.name, "w1");
    assert_int_equal(a.status, HD_IDLE);
    p = fake_pane(f, split.pane_id); /* the args arrived unchanged */
    assert_string_equal(json_string_value(json_object_get(p, "agent")), "codex");
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "args"), 2)),
                        "two words");
    json_decref(p);
    /* a second agent of that name, or into a pane that runs one: refused */
    assert_int_equal(hd_agent_start(c, "w1", "codex", tab.pane_id, NULL, 5000, 2000, &a, &r),
                     HD_ERR_REMOTE);
    assert_string_equal(r.code, "invalid_params");
    assert_int_equal(hd_pane_close(c, split.pane_id, 2000, &r), HD_OK);
    assert_int_equal(hd_pane_close(c, tab.pane_id, 2000, &r), HD_OK);
    assert_int_equal(hd_pane_close(c, tab.pane_id, 2000, &r), HD_ERR_REMOTE);
    assert_string_equal(r.code, "pane_not_found");
    assert_int_equal(fake_panes(f), 1);
    hd_reply_clear(&r);
    hd_client_free(c);
    fake_stop(f);
}

/* Refused before connecting: nothing reaches herdr. */
static void agent_start_bounds(void **state)
{
    fake *f = fake_start("{\"panes\":[" LEAD_PANE "]}");
    hd_client *c = hd_client_new(f->sock);
    hd_reply r = {0};

    (void)state;
    assert_int_equal(hd_agent_start(c, "w1", "claude", "w1:p1", NULL, 3000, 500, NULL, &r),
                     HD_ERR_PROTOCOL);
    assert_string_equal(r.code, "bad_request");
    assert_int_equal(hd_agent_start(c, "w1", "claude", "w1:p1", NULL, 300001, 500, NULL, &r),
                     HD_ERR_PROTOCOL);
    assert_int_equal(hd_pane_split(c, NULL, "left", NULL, 500, NULL, &r), HD_ERR_PROTOCOL);
    assert_int_equal(fake_lines(f, ".calls"), 0);
    hd_reply_clear(&r);
    hd_client_free(c);
    fake_stop(f);
}

static sp_request herdr_rq(const char *dir)
{
    static const char *const args[] = {"--yes", NULL};
    sp_request rq = {.name = "w7", .dir = dir, .ready_ms = 3001, .kind = "claude", .args = args};

    return rq;
}

static void spawn_ready_and_close(void **state)
{
    fake *f = fake_start("{\"panes\":[" LEAD_PANE "],\"behaviour\":{\"start\":\"slow:200\"}}");
    hd_client *c = hd_client_new(f->sock);
    sp_request rq = herdr_rq(NULL);
    sp_result out;
    char why[256];
    json_t *p;

    (void)state;
    /* generous deadlines: not the subject (2 s ran out under load) */
    assert_int_equal(sp_herdr_start(c, &rq, 10000, &out), 0);
    assert_int_equal(fake_panes(f), 2);
    p = fake_pane(f, out.pane_id);
    assert_non_null(p);
    assert_string_equal(json_string_value(json_object_get(p, "name")), "w7");
    json_decref(p);
    assert_int_equal(fake_lines(f, ".starts"), 1);
    /* with a dir: a split, which carries the cwd */
    rq = herdr_rq("/srv/work/a");
    rq.name = "w8";
    assert_int_equal(sp_herdr_start(c, &rq, 10000, &out), 0);
    p = fake_pane(f, out.pane_id);
    assert_string_equal(json_string_value(json_object_get(p, "cwd")), "/srv/work/a");
    json_decref(p);
    assert_int_equal(sp_herdr_close(c, out.pane_id, 10000, why, sizeof why), 0);
    assert_int_equal(sp_herdr_close(c, out.pane_id, 10000, why, sizeof why), 0); /* gone: fine */
    assert_int_equal(fake_panes(f), 2);
    hd_client_free(c);
    fake_stop(f);
}

/* Every failure after the pane exists closes it: the fake's world holds
 * only the lead's pane afterwards. */
static void spawn_failures_leave_no_pane(void **state)
{
    static const struct {
        const char *behaviour, *words;
    } cases[] = {
        {"\"start\":\"blocked\"", "agent_not_ready"},
        {"\"start:claude\":\"error:agent_prompt_failed\"", "agent_prompt_failed"},
        {"\"start\":\"close\"", "closed"},
        {"\"start\":\"never\"", "did not become ready within 3001 ms"},
        {"\"split\":\"error:internal_error\"", "pane.split: remote internal_error"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char st[512];
        fake *f;
        hd_client *c;
        sp_request rq = herdr_rq(i == 4 ? "/srv" : NULL);
        sp_result out;

        snprintf(st, sizeof st, "{\"panes\":[" LEAD_PANE "],\"behaviour\":{%s}}",
                 cases[i].behaviour);
        f = fake_start(st);
        c = hd_client_new(f->sock);
        /* the calls' deadline is not the subject: generous, for a loaded
         * machine under ASan (a 1 s one ran out in CI) */
        assert_int_equal(sp_herdr_start(c, &rq, 10000, &out), -1);
        if (!strstr(out.why, cases[i].words))
            fail_msg("case %zu: '%s' does not say '%s'", i, out.why, cases[i].words);
        if (i < 4)
            assert_non_null(strstr(out.why, "closed"));
        assert_string_equal(out.pane_id, "");
        assert_int_equal(fake_panes(f), 1);
        hd_client_free(c);
        fake_stop(f);
    }
}

/* herdr never answers agent.start: the client's own deadline (the wait
 * plus one call) ends it, and the pane is still closed. */
static void spawn_hang_times_out_and_closes(void **state)
{
    fake *f = fake_start("{\"panes\":[" LEAD_PANE "],\"behaviour\":{\"start\":\"hang\"}}");
    hd_client *c = hd_client_new(f->sock);
    sp_request rq = herdr_rq(NULL);
    sp_result out;

    (void)state;
    /* the same deadline bounds the split and the close: long enough for
     * those on a loaded machine, short enough for the test */
    assert_int_equal(sp_herdr_start(c, &rq, 1500, &out), -1);
    if (!strstr(out.why, "timeout") || !strstr(out.why, "closed"))
        fail_msg("'%s' does not say it timed out and the pane was closed", out.why);
    assert_int_equal(fake_panes(f), 1);
    hd_client_free(c);
    fake_stop(f);
}

/* The close fails too: the answer must say which pane may remain. */
static void spawn_close_failure_is_said(void **state)
{
    fake *f = fake_start("{\"panes\":[" LEAD_PANE "],\"behaviour\":{\"start\":\"blocked\","
                         "\"close\":\"error:internal_error\"}}");
    hd_client *c = hd_client_new(f->sock);
    sp_request rq = herdr_rq(NULL);
    sp_result out;

    (void)state;
    /* generous: the deadline is not the subject (a 1 s one ran out in CI
     * under ASan, and the answer then said the tab call timed out) */
    assert_int_equal(sp_herdr_start(c, &rq, 10000, &out), -1);
    if (!strstr(out.why, "may remain") || !strstr(out.why, "close it by hand"))
        fail_msg("'%s' does not say which pane may remain", out.why);
    assert_int_equal(fake_panes(f), 2);
    hd_client_free(c);
    fake_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(connect_timeout_is_down),
        cmocka_unit_test(pong_null_caps_suffixed_version),
        cmocka_unit_test(pane_list_tolerant),
        cmocka_unit_test(pane_and_agent_required_fields),
        cmocka_unit_test(agent_info_line),
        cmocka_unit_test(error_envelopes),
        cmocka_unit_test(unusable_lines),
        cmocka_unit_test(socket_path_resolution),
        cmocka_unit_test(round_trip_ping),
        cmocka_unit_test(round_trip_lists_and_input),
        cmocka_unit_test(prompt_wait_extends_deadline),
        cmocka_unit_test(unsafe_text_never_sent),
        cmocka_unit_test(remote_error_with_empty_id),
        cmocka_unit_test(closed_without_reply),
        cmocka_unit_test(hang_times_out),
        cmocka_unit_test(oversized_reply_refused),
        cmocka_unit_test(absent_or_refused_is_down),
        cmocka_unit_test(fake_make_start_close),
        cmocka_unit_test(agent_start_bounds),
        cmocka_unit_test(spawn_ready_and_close),
        cmocka_unit_test(spawn_failures_leave_no_pane),
        cmocka_unit_test(spawn_hang_times_out_and_closes),
        cmocka_unit_test(spawn_close_failure_is_said),
    };

    srandom((unsigned)getpid());
    return cmocka_run_group_tests(tests, NULL, NULL);
}
