/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/mount.h — which mount the mcp/ commands speak to (mount.c). */
#ifndef FLEETFS_MCP_MOUNT_H
#define FLEETFS_MCP_MOUNT_H

/* Which mount: arg; else $FLEET; else this user's only fuse.fleetfs mount;
 * else /fleet.  NULL (said on stderr, naming `fleetfs cmd`) when the user
 * has several and named none.  g_free it. */
char *mcp_pick_mount(const char *arg, const char *cmd);

#endif
