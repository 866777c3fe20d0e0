/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_mcp_rpc.c — libFuzzer target for mcp_rpc_line, the JSON-RPC line
 * handler of `fleetfs mcp` (fleetfs/mcp/rpc.c): every line an MCP client
 * sends on stdin goes through it before any tool touches the mount.
 *
 * It checks the promises itself: any input gives either no answer or one
 * line (no newline in it) that is a JSON object with "jsonrpc":"2.0", an
 * id, and exactly one of result and error (a known code with a string
 * message); a tool is only ever run with an object of arguments in which
 * no string holds a NUL (one that would be cut short in C), and only for
 * a request whose "jsonrpc" is exactly "2.0" and whose method is exactly
 * "tools/call" (not "tools/call\u0000x"). An answer may echo a string id
 * holding \u0000, so it is read back with JSON_ALLOW_NUL. One server lives
 * across inputs, as one does across a client's lines. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/mcp/rpc.h"

static const mcp_tool fz_tools[] = {
    {"fleet_send", "Send", "Sends.",
     "{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"}}}",
     "{\"readOnlyHint\":false}", NULL},
    {"fleet_list", "List", "Lists.", "{\"type\":\"object\"}", NULL, NULL},
};

static bool fz_has_nul(json_t *v)
{
    const char *key;
    json_t *x;
    size_t i;
    if (json_is_string(v))
        return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    if (json_is_object(v)) {
        json_object_foreach(v, key, x)
        {
            if (fz_has_nul(x))
                return true;
        }
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            if (fz_has_nul(x))
                return true;
        }
    }
    return false;
}

/* whether the input being run is a request that may run a tool */
static bool fz_may_run;

/* v's member key is the string want, to the last byte */
static bool fz_exactly(json_t *v, const char *key, const char *want)
{
    json_t *s = json_object_get(v, key);
    return json_is_string(s) && json_string_length(s) == strlen(want) &&
           !memcmp(json_string_value(s), want, strlen(want));
}

static json_t *fz_call(void *ud, const mcp_tool *tool, json_t *args)
{
    (void)ud;
    if (!tool || !json_is_object(args) || fz_has_nul(args)) {
        fprintf(stderr, "fuzz_mcp_rpc: a tool ran with bad arguments\n");
        abort();
    }
    if (!fz_may_run) {
        fprintf(stderr, "fuzz_mcp_rpc: a tool ran for what is not a tools/call request\n");
        abort();
    }
    if (!strcmp(tool->name, "fleet_list"))
        return mcp_result_json(json_pack("{s:s}", "me", "alpha"));
    return mcp_result_text(json_string_value(json_object_get(args, "to")), false);
}

static bool fz_known_code(json_int_t c)
{
    return c == MCP_PARSE_ERROR || c == MCP_INVALID_REQUEST || c == MCP_METHOD_NOT_FOUND ||
           c == MCP_INVALID_PARAMS || c == MCP_UNSUPPORTED_VERSION;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static mcp_rpc *r;
    json_error_t jerr;
    json_t *v, *res, *err, *id;
    char *out;

    if (!r)
        r = mcp_rpc_new(fz_tools, sizeof fz_tools / sizeof fz_tools[0], fz_call, NULL, "fuzz",
                        "instructions");
    v = json_loadb((const char *)data, size, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    fz_may_run = json_is_object(v) && fz_exactly(v, "jsonrpc", "2.0") &&
                 fz_exactly(v, "method", "tools/call");
    json_decref(v);
    out = mcp_rpc_line(r, (const char *)data, size);
    if (!out)
        return 0;
    if (strchr(out, '\n')) {
        fprintf(stderr, "fuzz_mcp_rpc: an answer of more than one line\n");
        abort();
    }
    v = json_loads(out, JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(v) ||
        strcmp(json_string_value(json_object_get(v, "jsonrpc")) ?: "", "2.0")) {
        fprintf(stderr, "fuzz_mcp_rpc: an answer that is no JSON-RPC object: %s\n", out);
        abort();
    }
    res = json_object_get(v, "result");
    err = json_object_get(v, "error");
    id = json_object_get(v, "id");
    if (!id || !(json_is_null(id) || json_is_string(id) || json_is_integer(id)) || !res == !err ||
        (res && !json_is_object(res)) ||
        (err && (!fz_known_code(json_integer_value(json_object_get(err, "code"))) ||
                 !json_is_string(json_object_get(err, "message"))))) {
        fprintf(stderr, "fuzz_mcp_rpc: a malformed answer: %s\n", out);
        abort();
    }
    json_decref(v);
    free(out);
    return 0;
}
