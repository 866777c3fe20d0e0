/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/serve.h — `fleetfs mcp [MOUNTPOINT]`: the MCP server on
 * stdio (see serve.c). */
#ifndef FLEETFS_MCP_SERVE_H
#define FLEETFS_MCP_SERVE_H

/* argv[1] is "mcp"; returns the process's exit code. */
int mcp_main(int argc, char **argv);

#endif
