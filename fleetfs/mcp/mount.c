/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/mount.c — which mount `fleetfs mcp`, `fleetfs ask` and
 * `fleetfs claim` speak to: the argument; else $FLEET; else this user's
 * only fuse.fleetfs mount in the mount table (fleetfs/os/os.h); else
 * /fleet.  Below serve.c, ask.c and claim.c: it calls none of them.
 */
#include "fleetfs/mcp/mount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/os/os.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo */
/* this user's fuse.fleetfs mount points */
static GPtrArray *own_mounts(void)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    size_t n;
    os_mount *m = os_mounts(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].type, "fuse.fleetfs") && m[i].uid == (long)getuid())
            g_ptr_array_add(out, g_strdup(m[i].dir));
    os_mounts_free(m, n);
    return out;
}

char *mcp_pick_mount(const char *arg, const char *cmd)
{
    const char *env = getenv("FLEET");
    GPtrArray *m;
    char *pick;
    if (arg)
        return g_strdup(arg);
    if (env && *env)
        return g_strdup(env);
    m = own_mounts();
    if (m->len > 1) {
        fprintf(stderr, "fleetfs %s: %u fleetfs mounts of yours (", cmd, m->len);
        for (guint i = 0; i < m->len; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", (char *)m->pdata[i]);
        fprintf(stderr, "); name one: fleetfs %s MOUNTPOINT\n", cmd);
        g_ptr_array_free(m, TRUE);
        return NULL;
    }
    pick = g_strdup(m->len == 1 ? m->pdata[0] : "/fleet");
    g_ptr_array_free(m, TRUE);
    return pick;
}
