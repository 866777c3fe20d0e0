/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/tools.h — the fleet_* tools of `fleetfs mcp`, done through
 * the mounted files alone (see tools.c). */
#ifndef FLEETFS_MCP_TOOLS_H
#define FLEETFS_MCP_TOOLS_H

#include <stddef.h>

#include <jansson.h>

#include "fleetfs/mcp/rpc.h"

extern const mcp_tool mcp_fleet_tools[];
extern const size_t mcp_fleet_ntools;

/* One server's tools: the mount at mnt, for its lead (as NULL) or for the
 * local agent as (a gid: `fleetfs mcp --as`), and what fleet_inbox has
 * shown (fleet_ack's `through`).  Thread-safe. */
typedef struct mcp_fleet mcp_fleet;
mcp_fleet *mcp_fleet_new(const char *mnt, const char *as);
void mcp_fleet_free(mcp_fleet *f);

/* Runs one tool; blocks on the files (the caller bounds it, serve.c).
 * Returns a CallToolResult, new reference. */
json_t *mcp_fleet_call(mcp_fleet *f, const mcp_tool *tool, json_t *args);

/* The file under the mount that fleet_send writes for `to` (coord_id, gid
 * or group:<g>) and replyTo ref (NULL: none), for the lead me (as NULL)
 * or the local agent as: g_free() it.  NULL and *why (g_free) when `to`
 * cannot be sent to that way. */
char *mcp_fleet_send_path(const char *as, const char *me, const char *to, const char *ref,
                          char **why);

/* NULL when gid is a local agent of the mount at mnt (its home exists);
 * else why not, in words (g_free).  Touches the mount: bound the wait. */
char *mcp_fleet_check_as(const char *mnt, const char *gid);

/* How much longer than send_timeout a call of tool with args may rightly
 * take, in seconds: fleet_ask waits for its answer up to its timeout. */
int mcp_fleet_wait_s(const mcp_tool *tool, json_t *args);

/* send_timeout of the mount in seconds, read from its root status file
 * ("send_timeout: 5s"); 0 when it cannot be read. */
int mcp_fleet_send_timeout(const char *mnt);

/* What errno err means for an agent doing `what`, and what to do: one or
 * two sentences (SPEC section 5's table, and the mount's own failures).
 * home: the caller's home directory (NULL: mnt/self); peer (a coord_id,
 * gid or group:<g>) and ref may be NULL.  g_free() the result. */
char *mcp_fleet_errno_text(int err, const char *what, const char *mnt, const char *home,
                           const char *peer, const char *ref);

#endif
