/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/rpc.c — the protocol layer of `fleetfs mcp`: JSON-RPC 2.0
 * framing and the MCP methods, on one line at a time.
 *
 * It is a pure function of the line and a little state (the handshake's
 * revision), so every framing rule is unit-tested without a process or a
 * mount (tests/unit/test_mcp_rpc.c); the stdio loop and the tools that
 * touch files are serve.c and tools.c.
 *
 * Framing (JSON-RPC 2.0 as MCP uses it on stdio: one message per line):
 *   - a line that is not JSON: -32700 with id null, and jansson's reason
 *     (invalid UTF-8 is one);
 *   - a line over MCP_LINE_MAX: -32600 with id null (serve.c skips it);
 *   - a string anywhere in params with a NUL (\u0000) in it: -32602,
 *     since every C string past the parse would end at it; in the
 *     request's own strings too: "jsonrpc":"2.0\u0000junk" is not "2.0"
 *     (-32600), and a method with a NUL is none of ours (-32601: never
 *     "ping\u0000x" taken for ping); a string id with a NUL is only ever
 *     echoed (jansson writes it back whole, \u0000 included), never read
 *     as a C string, so it is answered like any other;
 *   - JSON that is not a request object (an array: MCP has no batches
 *     since 2025-06-18; no "jsonrpc":"2.0"; a method that is not a string;
 *     an id that is neither a string nor an integer; params that are not
 *     structured): -32600, with the id when it could be read, else null;
 *   - a notification (a valid request without id) is never answered,
 *     whatever its method: that is what makes it a notification (an
 *     object that is no valid request at all is answered -32600, id null,
 *     as JSON-RPC's own examples do);
 *   - a message with result or error and no method is a client's response:
 *     we send no requests, so it is dropped;
 *   - an unknown method: -32601; bad params of a known one: -32602.
 *
 * Revisions: the current one, 2026-07-28, is stateless: each request
 * carries params._meta["io.modelcontextprotocol/protocolVersion"], and
 * server/discover replaces initialize (which, like ping, it no longer
 * has): it answers the versions, the capabilities, the instructions (the
 * one way a stateless client gets them), and, as every cacheable result
 * (tools/list too), ttlMs and cacheScope; every result of that revision
 * names the server in _meta["io.modelcontextprotocol/serverInfo"] (no
 * serverInfo field of its own).  A request that carries that key is served the current way (an
 * unknown version in it: -32022 listing ours); one that does not is
 * served the handshake way of 2025-11-25 (or 2025-06-18 when the client
 * asks for it), where initialize answers the client's version when we
 * speak it and 2025-11-25 otherwise (the client then decides).
 *
 * Tool errors: a tool that ran and failed is a result with isError true
 * (the agent reads why); an unknown tool or params that are not an
 * object are -32602, as the spec's examples do.
 */
#include "fleetfs/mcp/rpc.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MCP_LIST_TTL_MS 3600000 /* one hour */

struct mcp_rpc {
    const mcp_tool *tools;
    size_t ntools;
    mcp_call_fn call;
    void *ud;
    char *version;
    char *instructions;
    const char *agreed; /* handshake revision, NULL before initialize */
};

static const char *legacy_versions[] = {MCP_V_PREVIOUS, MCP_V_OLDER, NULL};

mcp_rpc *mcp_rpc_new(const mcp_tool *tools, size_t n, mcp_call_fn call, void *ud,
                     const char *version, const char *instructions)
{
    mcp_rpc *r = g_new0(mcp_rpc, 1);
    r->tools = tools;
    r->ntools = n;
    r->call = call;
    r->ud = ud;
    r->version = g_strdup(version);
    r->instructions = g_strdup(instructions);
    return r;
}

void mcp_rpc_free(mcp_rpc *r)
{
    if (!r)
        return;
    g_free(r->version);
    g_free(r->instructions);
    g_free(r);
}

const char *mcp_rpc_version(const mcp_rpc *r)
{
    return r->agreed;
}

json_t *mcp_result_text(const char *text, bool is_error)
{
    gchar *valid = g_utf8_make_valid(text ? text : "", -1);
    json_t *res = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", valid,
                            "isError", is_error);
    g_free(valid);
    return res;
}

json_t *mcp_result_json(json_t *v)
{
    char *t = json_dumps(v, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_t *res = mcp_result_text(t ? t : "null", false);
    free(t);
    if (json_is_object(v))
        json_object_set(res, "structuredContent", v);
    json_decref(v);
    return res;
}

/* ---- answers ----------------------------------------------------------- */

static char *dump(json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return s;
}

/* id: borrowed, NULL for null; data: stolen, may be NULL */
static char *error_line(json_t *id, int code, const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
    if (data)
        json_object_set_new(err, "data", data);
    return dump(
        json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err));
}

char *mcp_rpc_error_line(int code, const char *message)
{
    return error_line(NULL, code, message, NULL);
}

/* result: stolen */
static char *result_line(json_t *id, json_t *result)
{
    return dump(json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* ---- methods ----------------------------------------------------------- */

static json_t *capabilities(void)
{
    return json_pack("{s:{s:b}}", "tools", "listChanged", 0);
}

static json_t *server_info(const mcp_rpc *r)
{
    return json_pack("{s:s,s:s,s:s}", "name", "fleetfs", "title", "fleetfs: the fleet's mailboxes",
                     "version", r->version);
}

/* the Implementation object of the current revision's result _meta */
static json_t *server_identity(const mcp_rpc *r)
{
    return json_pack("{s:s,s:s}", "name", "fleetfs", "version", r->version);
}

/* server/discover and tools/list are cacheable results since 2026-07-28
 * and must say for how long: what they list is fixed for the life of
 * this process (the instructions name this user's mount and, with --as,
 * the agent: private to this caller) */
static void cache_hints(json_t *res)
{
    json_object_set_new(res, "ttlMs", json_integer(MCP_LIST_TTL_MS));
    json_object_set_new(res, "cacheScope", json_string("private"));
}

static char *do_initialize(mcp_rpc *r, json_t *id, json_t *params)
{
    json_t *want = params ? json_object_get(params, "protocolVersion") : NULL;
    const char *agreed = MCP_V_PREVIOUS;
    json_t *res;

    if (!json_is_string(want))
        return error_line(id, MCP_INVALID_PARAMS,
                          "initialize needs params.protocolVersion (a string)", NULL);
    for (const char **v = legacy_versions; *v; v++)
        if (!strcmp(*v, json_string_value(want)))
            agreed = *v;
    r->agreed = agreed;
    res = json_pack("{s:s,s:o,s:o}", "protocolVersion", agreed, "capabilities", capabilities(),
                    "serverInfo", server_info(r));
    if (r->instructions)
        json_object_set_new(res, "instructions", json_string(r->instructions));
    return result_line(id, res);
}

static json_t *tool_list(const mcp_rpc *r)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < r->ntools; i++) {
        const mcp_tool *t = &r->tools[i];
        json_error_t jerr;
        json_t *schema = json_loads(t->input_schema, 0, &jerr);
        if (!schema) /* a bug in our own table: say so rather than crash */
            schema = json_pack("{s:s}", "type", "object");
        json_t *one = json_pack("{s:s,s:s,s:s,s:o}", "name", t->name, "title", t->title,
                                "description", t->description, "inputSchema", schema);
        if (t->annotations) {
            json_t *ann = json_loads(t->annotations, 0, &jerr);
            if (json_is_object(ann))
                json_object_set_new(one, "annotations", ann);
            else
                json_decref(ann);
        }
        json_array_append_new(arr, one);
    }
    return json_pack("{s:o}", "tools", arr);
}

static const mcp_tool *find_tool(const mcp_rpc *r, const char *name)
{
    for (size_t i = 0; i < r->ntools; i++)
        if (!strcmp(r->tools[i].name, name))
            return &r->tools[i];
    return NULL;
}

/* NULL result with *line set: an error answer */
static json_t *do_call(mcp_rpc *r, json_t *id, json_t *params, char **line)
{
    json_t *name = params ? json_object_get(params, "name") : NULL;
    json_t *args = params ? json_object_get(params, "arguments") : NULL;
    const mcp_tool *tool;
    json_t *res;

    if (!json_is_string(name)) {
        *line = error_line(id, MCP_INVALID_PARAMS, "tools/call needs params.name (a string)", NULL);
        return NULL;
    }
    if (!(tool = find_tool(r, json_string_value(name)))) {
        gchar *msg = g_strdup_printf("Unknown tool: %s", json_string_value(name));
        *line = error_line(id, MCP_INVALID_PARAMS, msg, NULL);
        g_free(msg);
        return NULL;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        *line = error_line(id, MCP_INVALID_PARAMS, "tools/call: params.arguments must be an object",
                           NULL);
        return NULL;
    }
    args = json_is_object(args) ? json_incref(args) : json_object();
    res = r->call(r->ud, tool, args);
    json_decref(args);
    if (!res)
        res =
            mcp_result_text("internal error: the tool gave no result; see the server's log", true);
    return res;
}

/* a request's version, or NULL: the handshake way */
static json_t *meta_version(json_t *params)
{
    json_t *meta = params ? json_object_get(params, "_meta") : NULL;
    return json_is_object(meta) ? json_object_get(meta, META_VERSION) : NULL;
}

static json_t *all_versions(void)
{
    return json_pack("[s,s,s]", MCP_V_CURRENT, MCP_V_PREVIOUS, MCP_V_OLDER);
}

/* The path (in path, e.g. "arguments.to" or "arguments.msgIds[0]") of
 * the first string under v with a NUL in it; false when none.  jansson
 * keeps such a string whole (JSON_ALLOW_NUL), but every C string after it
 * would end at the NUL: "beta\u0000x" must not be read as "beta". */
static bool find_nul(json_t *v, GString *path)
{
    const char *key;
    json_t *x;
    size_t i, len = path->len;
    if (json_is_string(v))
        return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    if (json_is_object(v)) {
        json_object_foreach(v, key, x)
        {
            g_string_append_printf(path, "%s%s", len ? "." : "", key);
            if (find_nul(x, path))
                return true;
            g_string_truncate(path, len);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            g_string_append_printf(path, "[%zu]", i);
            if (find_nul(x, path))
                return true;
            g_string_truncate(path, len);
        }
    }
    return false;
}

static char *do_request(mcp_rpc *r, json_t *id, const char *method, json_t *params)
{
    json_t *mv = meta_version(params);
    bool current = mv != NULL;
    json_t *res = NULL;
    char *line = NULL;

    if (params && !json_is_object(params))
        return error_line(id, MCP_INVALID_PARAMS, "params must be an object", NULL);
    if (params) {
        GString *path = g_string_new(NULL);
        if (find_nul(params, path)) {
            gchar *msg = g_strdup_printf("Invalid params: params.%s has a NUL character (\\u0000); "
                                         "nothing was done",
                                         path->str);
            line = error_line(id, MCP_INVALID_PARAMS, msg, NULL);
            g_free(msg);
        }
        g_string_free(path, TRUE);
        if (line)
            return line;
    }
    if (current && (!json_is_string(mv) || strcmp(json_string_value(mv), MCP_V_CURRENT))) {
        json_t *data = json_pack("{s:[s],s:O}", "supported", MCP_V_CURRENT, "requested", mv);
        return error_line(id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
    }
    if (!strcmp(method, "tools/list")) {
        res = tool_list(r);
        if (current)
            cache_hints(res);
    } else if (!strcmp(method, "tools/call")) {
        res = do_call(r, id, params, &line);
    } else if (!strcmp(method, "server/discover")) {
        /* no serverInfo here since 2026-07-28: it is in _meta, below */
        res = json_pack("{s:o,s:o}", "supportedVersions", all_versions(), "capabilities",
                        capabilities());
        if (r->instructions)
            json_object_set_new(res, "instructions", json_string(r->instructions));
        cache_hints(res);
    } else if (!current && !strcmp(method, "initialize"))
        return do_initialize(r, id, params);
    else if (!current && !strcmp(method, "ping"))
        res = json_object();
    else {
        gchar *msg = g_strdup_printf("Method not found: %s", method);
        line = error_line(id, MCP_METHOD_NOT_FOUND, msg, NULL);
        g_free(msg);
    }
    if (!res)
        return line;
    if (current) {
        json_t *meta = json_object_get(res, "_meta");
        json_object_set_new(res, "resultType", json_string("complete"));
        if (!json_is_object(meta))
            json_object_set_new(res, "_meta", meta = json_object());
        json_object_set_new(meta, META_SERVER_INFO, server_identity(r));
    }
    return result_line(id, res);
}

/* ---- framing ----------------------------------------------------------- */

/* a string with a NUL in it (jansson keeps it whole: JSON_ALLOW_NUL) */
static bool has_nul(json_t *v)
{
    return json_is_string(v) && memchr(json_string_value(v), '\0', json_string_length(v));
}

static bool id_ok(json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

char *mcp_rpc_line(mcp_rpc *r, const char *line, size_t len)
{
    json_error_t jerr;
    json_t *msg, *id, *method, *params, *jv;
    bool has_id;
    char *out;
    size_t i;

    for (i = 0; i < len && strchr(" \t\r\n", line[i]); i++)
        ;
    if (i == len)
        return NULL; /* a blank line says nothing */
    msg = json_loadb(line, len, JSON_ALLOW_NUL | JSON_DECODE_ANY,
                     &jerr); /* a NUL in a body: the file says EINVAL */
    if (!msg) {
        /* jansson's own reason (invalid UTF-8, where the text ends...) */
        gchar *why = g_strdup_printf("Parse error: %s (line %d, column %d)", jerr.text, jerr.line,
                                     jerr.column);
        out = error_line(NULL, MCP_PARSE_ERROR, why, NULL);
        g_free(why);
        return out;
    }
    if (!json_is_object(msg)) {
        json_decref(msg);
        return error_line(NULL, MCP_INVALID_REQUEST,
                          "Invalid Request: one JSON object per line (no batches)", NULL);
    }
    id = json_object_get(msg, "id");
    has_id = id != NULL;
    method = json_object_get(msg, "method");
    params = json_object_get(msg, "params");
    jv = json_object_get(msg, "jsonrpc");

    if (!method && has_id && (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
        out = NULL; /* a client's response: we asked nothing */
    } else if (!json_is_string(jv) || json_string_length(jv) != 3 ||
               strcmp(json_string_value(jv), "2.0")) {
        out = error_line(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
                         has_nul(jv) ? "Invalid Request: \"jsonrpc\" must be \"2.0\" (this one "
                                       "has a NUL character, \\u0000, in it)"
                                     : "Invalid Request: \"jsonrpc\" must be \"2.0\"",
                         NULL);
    } else if (!json_is_string(method)) {
        out = error_line(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
                         "Invalid Request: \"method\" must be a string", NULL);
    } else if (has_id && !id_ok(id)) {
        out = error_line(NULL, MCP_INVALID_REQUEST,
                         "Invalid Request: \"id\" must be a string or an integer", NULL);
    } else if (params && !json_is_object(params) && !json_is_array(params)) {
        out = error_line(id, MCP_INVALID_REQUEST, "Invalid Request: \"params\" must be an object",
                         NULL);
    } else if (!has_id) {
        out = NULL; /* a notification: initialized, cancelled, ... never answered */
    } else if (has_nul(method)) {
        out = error_line(id, MCP_METHOD_NOT_FOUND,
                         "Method not found: the method name has a NUL character (\\u0000) in it; "
                         "nothing was done",
                         NULL);
    } else {
        out = do_request(r, id, json_string_value(method), params);
    }
    json_decref(msg);
    return out;
}
