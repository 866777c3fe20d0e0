/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/rpc.h — the Model Context Protocol's JSON-RPC side, with no
 * file and no thread in it (see rpc.c): one input line in, at most one
 * output line back.  What the tools do is a callback (tools.c). */
#ifndef FLEETFS_MCP_RPC_H
#define FLEETFS_MCP_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The revisions served: the current one (stateless, every request says
 * its version in params._meta) and the handshake ones (initialize). */
#define MCP_V_CURRENT "2026-07-28"
#define MCP_V_PREVIOUS "2025-11-25"
#define MCP_V_OLDER "2025-06-18"

/* JSON-RPC 2.0 and MCP error codes */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_UNSUPPORTED_VERSION (-32022)

/* One tool: what tools/list shows of it and, beside that, its handler. */
typedef struct mcp_tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema; /* JSON text of the input's JSON Schema */
    const char *annotations;  /* JSON text of its ToolAnnotations; NULL: none */
    /* the handler: ctx is the caller's (the mcp_call_fn passes it), args
     * an object; returns a CallToolResult, new reference */
    json_t *(*run)(void *ctx, json_t *args);
} mcp_tool;

/* Runs `tool` (one of the table's) with `args` (an object, maybe empty)
 * and returns a CallToolResult object (mcp_result_text/_json), new
 * reference.  A tool failure is such a result with isError true. */
typedef json_t *(*mcp_call_fn)(void *ud, const mcp_tool *tool, json_t *args);

typedef struct mcp_rpc mcp_rpc;

/* tools: n entries, kept by pointer (static tables); version: serverInfo's. */
mcp_rpc *mcp_rpc_new(const mcp_tool *tools, size_t n, mcp_call_fn call, void *ud,
                     const char *version, const char *instructions);
void mcp_rpc_free(mcp_rpc *r);

/* One line of input (without its newline, len bytes) -> the line to answer
 * with (malloc'd, no newline; free()) or NULL when nothing is answered
 * (notifications, a client's responses, blank lines). */
char *mcp_rpc_line(mcp_rpc *r, const char *line, size_t len);

/* The longest input line read whole: a longer one is answered
 * mcp_rpc_error_line(MCP_INVALID_REQUEST, ...) and skipped to its newline
 * (serve.c), so one line can never take more memory than this. */
#define MCP_LINE_MAX (8u << 20)
#define MCP_LINE_MAX_TEXT "8 MiB"

/* A JSON-RPC error answer with id null (malloc'd, no newline; free()):
 * for what the stdio loop refuses before the line reaches mcp_rpc_line. */
char *mcp_rpc_error_line(int code, const char *message);

/* The revision the handshake settled on, NULL before initialize. */
const char *mcp_rpc_version(const mcp_rpc *r);

/* A CallToolResult with one text block; text must be UTF-8 (invalid bytes
 * are replaced, never dropped silently). New reference. */
json_t *mcp_result_text(const char *text, bool is_error);

/* A successful CallToolResult whose structuredContent is the object v
 * (stolen) and whose one text block is v as JSON text, for a client that
 * reads only text. New reference. */
json_t *mcp_result_json(json_t *v);

#endif
