/* SPDX-License-Identifier: Apache-2.0 */
/* test_mcp_rpc.c — the protocol layer of `fleetfs mcp` (fleetfs/mcp/rpc.c),
 * one line in, one line (or none) out: JSON-RPC framing errors, the
 * handshake revisions and the current stateless one, notifications never
 * answered, tools/list and tools/call shapes; and the tool table and the
 * errno texts of tools.c as an agent reads them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include <glib.h>
#include <jansson.h>

#include "fleetfs/mcp/rpc.h"
#include "fleetfs/mcp/tools.h"
#include "fleetfs/os/os.h"

static const mcp_tool fake_tools[] = {
    {"echo", "Echo", "Says back its argument.",
     "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}",
     "{\"readOnlyHint\":true}", NULL},
    {"boom", "Boom", "Always fails.", "{\"type\":\"object\"}", NULL, NULL},
};

static int calls;
static char last_args[256];

static json_t *fake_call(void *ud, const mcp_tool *tool, json_t *args)
{
    const char *name = tool->name;
    char *s = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    (void)ud;
    calls++;
    g_strlcpy(last_args, s, sizeof last_args);
    free(s);
    if (!strcmp(name, "boom"))
        return mcp_result_text("it failed: EMSGSIZE, shorten it", true);
    return mcp_result_text(json_string_value(json_object_get(args, "x")), false);
}

static mcp_rpc *rpc(void)
{
    calls = 0;
    last_args[0] = '\0';
    return mcp_rpc_new(fake_tools, G_N_ELEMENTS(fake_tools), fake_call, NULL, "9.9.9", "hi");
}

/* the answer to line, parsed; NULL when nothing was answered */
static json_t *ask(mcp_rpc *r, const char *line)
{
    char *out = mcp_rpc_line(r, line, strlen(line));
    json_error_t err;
    json_t *v;
    if (!out)
        return NULL;
    assert_null(strchr(out, '\n'));            /* one line, whatever it carries */
    v = json_loads(out, JSON_ALLOW_NUL, &err); /* an echoed id may hold one */
    assert_non_null(v);
    free(out);
    assert_string_equal(json_string_value(json_object_get(v, "jsonrpc")), "2.0");
    return v;
}

static int err_code(json_t *v)
{
    return (int)json_integer_value(json_object_get(json_object_get(v, "error"), "code"));
}

static void assert_error(mcp_rpc *r, const char *line, int code, bool id_null)
{
    json_t *v = ask(r, line);
    assert_non_null(v);
    assert_int_equal(err_code(v), code);
    assert_null(json_object_get(v, "result"));
    if (id_null)
        assert_true(json_is_null(json_object_get(v, "id")));
    else
        assert_false(json_is_null(json_object_get(v, "id")));
    json_decref(v);
}

static void test_framing_errors(void **state)
{
    mcp_rpc *r = rpc();
    (void)state;
    assert_error(r, "{not json", MCP_PARSE_ERROR, true);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", MCP_PARSE_ERROR,
                 true);
    assert_error(r, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_INVALID_REQUEST,
                 true);
    assert_error(r, "[]", MCP_INVALID_REQUEST, true);
    assert_error(r, "42", MCP_INVALID_REQUEST, true);
    assert_error(r, "{\"id\":7,\"method\":\"ping\"}", MCP_INVALID_REQUEST, false);
    assert_error(r, "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}", MCP_INVALID_REQUEST,
                 false);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":5}", MCP_INVALID_REQUEST, false);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", MCP_INVALID_REQUEST,
                 true);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_INVALID_REQUEST,
                 true);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", MCP_INVALID_REQUEST,
                 true);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":\"x\"}",
                 MCP_INVALID_REQUEST, false);
    /* not a valid request, though it has no id: answered, id null */
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"method\":1,\"params\":\"bar\"}", MCP_INVALID_REQUEST,
                 true);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"resources/list\"}",
                 MCP_METHOD_NOT_FOUND, false);
    assert_int_equal(calls, 0);
    mcp_rpc_free(r);
}

/* a NUL inside any string of params is refused before the tool runs; a
 * parse error keeps the parser's reason */
static void test_nul_and_parse_reason(void **state)
{
    mcp_rpc *r = rpc();
    json_t *v;
    (void)state;
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
               "{\"name\":\"echo\",\"arguments\":{\"x\":\"beta\\u0000x\"}}}");
    assert_int_equal(err_code(v), MCP_INVALID_PARAMS);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
               "params.arguments.x has a NUL"));
    json_decref(v);
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
               "{\"name\":\"echo\",\"arguments\":{\"l\":[\"a\",{\"y\":\"\\u0000\"}]}}}");
    assert_int_equal(err_code(v), MCP_INVALID_PARAMS);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
               "params.arguments.l[1].y has a NUL"));
    json_decref(v);
    assert_int_equal(calls, 0);
    v = ask(r, "{oops");
    assert_int_equal(err_code(v), MCP_PARSE_ERROR);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
               "expected near 'oops'"));
    json_decref(v);
    mcp_rpc_free(r);
}

/* a NUL in the request's own strings: a method with one is none of ours
 * (never "ping" or "tools/call" cut short), a jsonrpc with one is not
 * "2.0"; a string id with one is echoed whole */
static void test_nul_in_request(void **state)
{
    mcp_rpc *r = rpc();
    json_t *v, *id;
    (void)state;
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000x\"}",
                 MCP_METHOD_NOT_FOUND, false);
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\\u0000x\",\"params\":"
                 "{\"name\":\"echo\",\"arguments\":{\"x\":\"run\"}}}",
                 MCP_METHOD_NOT_FOUND, false);
    assert_error(r, "{\"jsonrpc\":\"2.0\\u0000junk\",\"id\":3,\"method\":\"ping\"}",
                 MCP_INVALID_REQUEST, false);
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\\u0000\",\"id\":4,\"method\":\"tools/call\",\"params\":"
                 "{\"name\":\"echo\",\"arguments\":{\"x\":\"run\"}}}",
                 MCP_INVALID_REQUEST, false);
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\\u0000x\",\"params\":"
                       "{\"name\":\"echo\",\"arguments\":{\"x\":\"run\"}}}"));
    assert_int_equal(calls, 0);
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"ping\"}");
    id = json_object_get(v, "id");
    assert_true(json_is_string(id));
    assert_int_equal(json_string_length(id), 3);
    assert_memory_equal(json_string_value(id), "a\0b", 3);
    assert_true(json_is_object(json_object_get(v, "result")));
    json_decref(v);
    mcp_rpc_free(r);
}

static void test_ids_come_back(void **state)
{
    mcp_rpc *r = rpc();
    json_t *v;
    (void)state;
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"ping\"}");
    assert_string_equal(json_string_value(json_object_get(v, "id")), "req-1");
    assert_true(json_is_object(json_object_get(v, "result")));
    assert_int_equal(json_object_size(json_object_get(v, "result")), 0);
    json_decref(v);
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}");
    assert_int_equal(json_integer_value(json_object_get(v, "id")), 0);
    json_decref(v);
    mcp_rpc_free(r);
}

static void test_silence(void **state)
{
    mcp_rpc *r = rpc();
    (void)state;
    /* notifications, known or not, with or without params: never answered */
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                       "\"params\":{\"requestId\":3}}"));
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"method\":\"no/such\"}"));
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":"
                       "\"echo\",\"arguments\":{\"x\":\"y\"}}}"));
    /* a client's responses: we asked nothing */
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}"));
    assert_null(ask(r, "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":1,\"message\":\"x\"}}"));
    /* blank lines */
    assert_null(ask(r, ""));
    assert_null(ask(r, "  \r"));
    assert_int_equal(calls, 0); /* the notification to tools/call ran nothing */
    mcp_rpc_free(r);
}

static const char *init_version(mcp_rpc *r, const char *asked, char *buf, size_t n)
{
    char line[256];
    json_t *v;
    snprintf(line, sizeof line,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
             "\"version\":\"1\"}}}",
             asked);
    v = ask(r, line);
    assert_non_null(json_object_get(v, "result"));
    g_strlcpy(buf,
              json_string_value(json_object_get(json_object_get(v, "result"), "protocolVersion")),
              n);
    assert_non_null(
        json_object_get(json_object_get(json_object_get(v, "result"), "capabilities"), "tools"));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(v, "result"), "serverInfo"), "version")),
        "9.9.9");
    json_decref(v);
    return buf;
}

static void test_initialize(void **state)
{
    mcp_rpc *r = rpc();
    char b[32];
    (void)state;
    assert_null(mcp_rpc_version(r));
    assert_string_equal(init_version(r, MCP_V_PREVIOUS, b, sizeof b), MCP_V_PREVIOUS);
    assert_string_equal(mcp_rpc_version(r), MCP_V_PREVIOUS);
    assert_string_equal(init_version(r, MCP_V_OLDER, b, sizeof b), MCP_V_OLDER);
    /* one we do not speak: we answer ours, the client decides */
    assert_string_equal(init_version(r, "2024-11-05", b, sizeof b), MCP_V_PREVIOUS);
    assert_string_equal(init_version(r, "2099-01-01", b, sizeof b), MCP_V_PREVIOUS);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                 MCP_INVALID_PARAMS, false);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}", MCP_INVALID_PARAMS,
                 false);
    mcp_rpc_free(r);
}

static void test_tools_list_and_call(void **state)
{
    mcp_rpc *r = rpc();
    json_t *v, *tools, *res;
    (void)state;
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}");
    tools = json_object_get(json_object_get(v, "result"), "tools");
    assert_int_equal(json_array_size(tools), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
                        "echo");
    assert_true(json_is_object(json_object_get(json_array_get(tools, 0), "inputSchema")));
    assert_true(json_is_true(
        json_object_get(json_object_get(json_array_get(tools, 0), "annotations"), "readOnlyHint")));
    assert_null(json_object_get(json_array_get(tools, 1), "annotations"));
    assert_null(json_object_get(json_object_get(v, "result"), "resultType"));
    json_decref(v);

    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":{\"x\":\"hello\"}}}");
    res = json_object_get(v, "result");
    assert_false(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(res, "content"), 0), "text")),
                        "hello");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(res, "content"), 0), "type")),
                        "text");
    assert_string_equal(last_args, "{\"x\":\"hello\"}");
    json_decref(v);

    /* no arguments at all: the tool gets {} */
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"boom\"}}");
    res = json_object_get(v, "result");
    assert_true(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(last_args, "{}");
    json_decref(v);

    assert_int_equal(calls, 2);
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"nope\"}}",
                 MCP_INVALID_PARAMS, false);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}",
                 MCP_INVALID_PARAMS, false);
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"echo\",\"arguments\":[1]}}",
                 MCP_INVALID_PARAMS, false);
    assert_error(r, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":[1]}",
                 MCP_INVALID_PARAMS, false);
    assert_int_equal(calls, 2);
    mcp_rpc_free(r);
}

#define META(v) "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":" v "}"

/* the name in a result's _meta["io.modelcontextprotocol/serverInfo"] */
static const char *server_meta_name(json_t *res)
{
    json_t *info =
        json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo");
    assert_true(json_is_string(json_object_get(info, "version")));
    return json_string_value(json_object_get(info, "name"));
}

static void test_current_revision(void **state)
{
    mcp_rpc *r = rpc();
    json_t *v, *res, *data;
    (void)state;
    /* no initialize first: every request says its version */
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META(
                   "\"" MCP_V_CURRENT "\"") "}}");
    res = json_object_get(v, "result");
    assert_string_equal(json_string_value(json_object_get(res, "resultType")), "complete");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(res, "supportedVersions"), 0)),
        MCP_V_CURRENT);
    assert_non_null(json_object_get(json_object_get(res, "capabilities"), "tools"));
    /* the 2026-07-28 DiscoverResult: no serverInfo of its own (it is in
     * _meta), the cache hints it requires, and the instructions */
    assert_null(json_object_get(res, "serverInfo"));
    assert_string_equal(server_meta_name(res), "fleetfs");
    assert_true(json_is_integer(json_object_get(res, "ttlMs")));
    assert_true(json_integer_value(json_object_get(res, "ttlMs")) >= 0);
    assert_string_equal(json_string_value(json_object_get(res, "cacheScope")), "private");
    assert_string_equal(json_string_value(json_object_get(res, "instructions")), "hi");
    json_decref(v);

    /* tools/list is cacheable too */
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\",\"params\":{" META(
                   "\"" MCP_V_CURRENT "\"") "}}");
    res = json_object_get(v, "result");
    assert_int_equal(json_array_size(json_object_get(res, "tools")), 2);
    assert_true(json_is_integer(json_object_get(res, "ttlMs")));
    assert_string_equal(json_string_value(json_object_get(res, "cacheScope")), "private");
    assert_string_equal(server_meta_name(res), "fleetfs");
    json_decref(v);

    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":{\"x\":\"now\"}," META("\"" MCP_V_CURRENT "\"") "}}");
    res = json_object_get(v, "result");
    assert_string_equal(json_string_value(json_object_get(res, "resultType")), "complete");
    assert_false(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(server_meta_name(res), "fleetfs");
    assert_null(json_object_get(res, "ttlMs")); /* a tool's result is not cacheable */
    json_decref(v);

    /* a version we do not speak: -32022 naming ours */
    v = ask(r, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{" META(
                   "\"2030-01-01\"") "}}");
    assert_int_equal(err_code(v), MCP_UNSUPPORTED_VERSION);
    data = json_object_get(json_object_get(v, "error"), "data");
    assert_string_equal(json_string_value(json_array_get(json_object_get(data, "supported"), 0)),
                        MCP_V_CURRENT);
    assert_string_equal(json_string_value(json_object_get(data, "requested")), "2030-01-01");
    json_decref(v);
    /* what the current revision removed */
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{" META(
                     "\"" MCP_V_CURRENT "\"") "}}",
                 MCP_METHOD_NOT_FOUND, false);
    assert_error(r,
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{" META(
                     "\"" MCP_V_CURRENT "\"") ",\"protocolVersion\":\"" MCP_V_PREVIOUS "\"}}",
                 MCP_METHOD_NOT_FOUND, false);
    assert_null(mcp_rpc_version(r));
    mcp_rpc_free(r);
}

/* a JSON result: the object as structuredContent and, equal, as its text */
static void test_result_json(void **state)
{
    json_t *v = mcp_result_json(json_pack("{s:s,s:i}", "msgId", "abc", "count", 2));
    json_t *sc = json_object_get(v, "structuredContent"), *t;
    json_error_t err;
    (void)state;
    assert_non_null(sc);
    assert_string_equal(json_string_value(json_object_get(sc, "msgId")), "abc");
    t = json_loads(json_string_value(
                       json_object_get(json_array_get(json_object_get(v, "content"), 0), "text")),
                   0, &err);
    assert_non_null(t);
    assert_true(json_equal(t, sc));
    assert_false(json_is_true(json_object_get(v, "isError")));
    json_decref(t);
    json_decref(v);
}

static void test_result_text_utf8(void **state)
{
    json_t *v = mcp_result_text("ok \xff\xfe bytes", true);
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(v, "content"), 0), "text"));
    (void)state;
    assert_non_null(t);
    assert_true(g_utf8_validate(t, -1, NULL));
    assert_non_null(strstr(t, "bytes"));
    assert_true(json_is_true(json_object_get(v, "isError")));
    json_decref(v);
}

/* the real table: eleven tools (three for claims), each with its handler and its hints, schemas that are JSON objects closed to
 * unknown arguments, one or two sentences each */
static void test_fleet_tool_table(void **state)
{
    static const struct {
        const char *name;
        bool read_only, destructive;
    } want[] = {{"fleet_send", false, false},   {"fleet_ask", false, false},
                {"fleet_list", true, false},    {"fleet_inbox", true, false},
                {"fleet_ack", false, true},     {"fleet_sent", true, false},
                {"fleet_resend", false, false}, {"fleet_status", true, false},
                {"fleet_claim", false, false},  {"fleet_release", false, true},
                {"fleet_claims", true, false}};
    (void)state;
    assert_int_equal(mcp_fleet_ntools, G_N_ELEMENTS(want));
    for (size_t i = 0; i < mcp_fleet_ntools; i++) {
        const mcp_tool *t = &mcp_fleet_tools[i];
        json_error_t err;
        json_t *s = json_loads(t->input_schema, 0, &err);
        int sentences = 0;
        json_t *ann = json_loads(t->annotations, 0, &err);
        assert_string_equal(t->name, want[i].name);
        assert_non_null(t->run);
        assert_non_null(ann);
        assert_int_equal(json_is_true(json_object_get(ann, "readOnlyHint")), want[i].read_only);
        assert_int_equal(json_is_true(json_object_get(ann, "destructiveHint")),
                         want[i].destructive);
        json_decref(ann);
        if (!s)
            fail_msg("%s: inputSchema does not parse: %s", t->name, err.text);
        assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
        assert_true(json_is_false(json_object_get(s, "additionalProperties")));
        assert_true(json_is_object(json_object_get(s, "properties")));
        json_decref(s);
        for (const char *p = t->description; *p; p++)
            sentences += *p == '.' && (p[1] == ' ' || p[1] == '\0');
        assert_in_range(sentences, 1, 2);
    }
}

/* each errno of SPEC section 5 has words that name it and say what to do */
static void test_errno_texts(void **state)
{
    static const struct {
        int err;
        const char *name, *words;
    } want[] = {
        {ENOENT, "ENOENT", "no such peer"},    {EINVAL, "EINVAL", "empty"},
        {EMSGSIZE, "EMSGSIZE", "max_message"}, {OS_ECOMM, "ECOMM", "nothing was sent"},
        {ETIMEDOUT, "ETIMEDOUT", "resend"},    {ENOSPC, "ENOSPC", "full"},
        {ENXIO, "ENXIO", "does not exist"},    {EACCES, "EACCES", "not yours"},
        {ENOTCONN, "ENOTCONN", "daemon"},
    };
    (void)state;
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        char *t =
            mcp_fleet_errno_text(want[i].err, "fleet_send to beta", "/fleet", NULL, "beta", NULL);
        if (!strstr(t, want[i].name) || !strstr(t, want[i].words))
            fail_msg("errno %s: '%s'", want[i].name, t);
        g_free(t);
    }
}

/* agents and groups: ENOENT and ENXIO name what is missing */
static void test_errno_texts_agents(void **state)
{
    static const struct {
        int err;
        const char *peer, *words;
    } want[] = {
        {ENOENT, "w1@beta", "no such agent 'w1@beta' known here (ENOENT)"},
        {ENOENT, "group:ops", "no such group 'ops' (ENOENT)"},
        {ENXIO, "w1@beta", "agent w1@beta's mailbox does not exist"},
        {ENXIO, "group:ops", "group 'ops' has no member to receive it (ENXIO)"},
        {ETIMEDOUT, "w1@beta", "/fleet/agents/w2@alpha/resend"},
    };
    (void)state;
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        char *t = mcp_fleet_errno_text(want[i].err, "fleet_send", "/fleet",
                                       "/fleet/agents/w2@alpha", want[i].peer, NULL);
        if (!strstr(t, want[i].words))
            fail_msg("%s, errno %d: '%s'", want[i].peer, want[i].err, t);
        g_free(t);
    }
}

/* where fleet_send writes: the lead by kind of address, an agent always
 * as itself (to/ or its own reply/) */
static void test_send_paths(void **state)
{
    static const char *ref = "0123456789abcdef0123456789abcdef";
    static const struct {
        const char *as, *to;
        bool reply;
        const char *path; /* NULL: refused */
    } want[] = {
        {NULL, "beta", false, "peers/beta/send"},
        {NULL, "w1@beta", false, "agents/w1@beta/send"},
        {NULL, "w1@alpha", false, "agents/w1@alpha/send"},
        {NULL, "group:all", false, "groups/all/send"},
        {NULL, "group:ops", false, "groups/ops/send"},
        {NULL, "beta", true, "peers/beta/reply/0123456789abcdef0123456789abcdef"},
        {NULL, "w1@beta", true, "leads/alpha/reply/0123456789abcdef0123456789abcdef"},
        {NULL, "group:all", true, NULL},
        {NULL, "group:", false, NULL},
        {NULL, "Beta", false, NULL},
        {NULL, "w1@beta@x", false, NULL},
        {"w1@alpha", "beta", false, "agents/w1@alpha/to/beta"},
        {"w1@alpha", "alpha", false, "agents/w1@alpha/to/alpha"},
        {"w1@alpha", "w2@beta", false, "agents/w1@alpha/to/w2@beta"},
        {"w1@alpha", "group:ops", false, "agents/w1@alpha/to/group:ops"},
        {"w1@alpha", "beta", true, "agents/w1@alpha/reply/0123456789abcdef0123456789abcdef"},
        {"w1@alpha", "w1@alpha", false, NULL},
        {"w1@alpha", "group:ops", true, NULL},
    };
    (void)state;
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
        char *why = NULL;
        char *p =
            mcp_fleet_send_path(want[i].as, "alpha", want[i].to, want[i].reply ? ref : NULL, &why);
        if (want[i].path) {
            if (!p || strcmp(p, want[i].path))
                fail_msg("as %s to %s: '%s' (%s), want '%s'", want[i].as ? want[i].as : "lead",
                         want[i].to, p ? p : "NULL", why ? why : "", want[i].path);
            assert_null(why);
        } else {
            if (p)
                fail_msg("as %s to %s: '%s', want refused", want[i].as ? want[i].as : "lead",
                         want[i].to, p);
            assert_non_null(why);
        }
        g_free(p);
        g_free(why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing_errors),
        cmocka_unit_test(test_nul_and_parse_reason),
        cmocka_unit_test(test_nul_in_request),
        cmocka_unit_test(test_ids_come_back),
        cmocka_unit_test(test_silence),
        cmocka_unit_test(test_initialize),
        cmocka_unit_test(test_tools_list_and_call),
        cmocka_unit_test(test_current_revision),
        cmocka_unit_test(test_result_json),
        cmocka_unit_test(test_result_text_utf8),
        cmocka_unit_test(test_fleet_tool_table),
        cmocka_unit_test(test_errno_texts),
        cmocka_unit_test(test_errno_texts_agents),
        cmocka_unit_test(test_send_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
