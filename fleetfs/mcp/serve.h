/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/serve.h — `fleetfs mcp [MOUNTPOINT]`: the MCP server on
 * stdio (see serve.c). */
#ifndef FLEETFS_MCP_SERVE_H
#define FLEETFS_MCP_SERVE_H

/* argv[1] is "mcp"; returns the process's exit code. */
int mcp_main(int argc, char **argv);

/* Which mount: arg; else $FLEET; else this user's only fuse.fleetfs mount;
 * else /fleet.  NULL (said on stderr, naming `fleetfs cmd`) when the user
 * has several and named none.  g_free it. */
char *mcp_pick_mount(const char *arg, const char *cmd);

#endif
