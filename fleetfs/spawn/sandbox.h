/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox.h — the command line that starts a spawned agent confined
 * (SPEC section 11; doc/security.md, "The spawn sandbox").
 *
 * Linux: bubblewrap (bwrap) around the profile's command, in a mount, pid
 * and IPC namespace of its own that dies with the pane (--die-with-parent):
 *   - the whole file system read-only, its dir the one place it writes
 *     (and a private, empty /var/tmp, its TMPDIR; /tmp is read-only like
 *     the rest: a private /tmp would hide any mount or state kept there);
 *   - the daemon's state directory, trust directory, key and config file
 *     (and /etc/fleetfs, where units keep the broker's password, and the
 *     user's ~/.config/fleetfs, the default config's place) hidden:
 *     an empty tmpfs over a directory, /dev/null over a file;
 *   - the mount hidden but for the agent's own home agents/<gid>/ (inbox,
 *     ack, sent, to/<target>): no other agent's mail, no lead's home;
 *   - its own /proc (no other process, no daemon's environ to read);
 *   - a fresh environment: HOME, PATH, TERM, LANG, USER from the daemon's,
 *     FLEET (the mount, for `fleetfs mcp`), FLEETFS_AGENT (its gid) and
 *     TMPDIR;
 *     never the broker's URI or password.
 * The network is left as it is (an agent talks to its model's API).
 *
 * macOS: sandbox-exec with a generated profile of the same rules (compiled
 * for, not yet run on: only ever compiled on Linux with -D__APPLE__). Pure:
 * no process is started here. */
#ifndef FLEETFS_SPAWN_SANDBOX_H
#define FLEETFS_SPAWN_SANDBOX_H

#include <stddef.h>

typedef struct {
    const char *tool;       /* bwrap (or sandbox-exec) found, absolute; NULL: none here */
    const char *mountpoint; /* the fleetfs mount */
    const char *hide[8];    /* paths to hide (NULL-terminated; NULL entries skipped) */
} sb_host;

/* The tool's path on this host ("bwrap" on PATH, or $FLEETFS_BWRAP when
 * set: an absolute executable, else none; /usr/bin/sandbox-exec on macOS),
 * g_free; NULL when there is none. */
char *sb_find_tool(void);
/* The argv (g_strfreev) that runs cmd as agent gid in dir, confined; NULL
 * and why when it cannot be (no tool, a relative path). */
char **sb_argv(const sb_host *h, const char *gid, const char *dir, const char *const *cmd,
               char *why, size_t n);

#endif
