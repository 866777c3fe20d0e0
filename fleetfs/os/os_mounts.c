/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/os_mounts.c — the mount table and FUSE's page limit (design
 * in os.h).  Linux has no route to either but /proc, so the portable
 * build on Linux keeps it; macOS asks getmntinfo. */
#include "fleetfs/os/os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#ifdef __APPLE__
#include <sys/mount.h>
#include <sys/param.h>
#include <sys/ucred.h>
#endif

void os_mounts_free(os_mount *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        g_free(m[i].dir);
        g_free(m[i].type);
        g_free(m[i].dev);
    }
    g_free(m);
}

#if defined(__linux__)

/* mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo */
static char *unescape(const char *s)
{
    GString *o = g_string_new(NULL);
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            g_string_append_c(o, (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0')));
            s += 3;
        } else {
            g_string_append_c(o, *s);
        }
    }
    return g_string_free(o, FALSE);
}

/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE SUPEROPTS" */
os_mount *os_mounts(size_t *n)
{
    char *text = NULL;
    GArray *a;

    *n = 0;
    if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
        return NULL;
    a = g_array_new(FALSE, TRUE, sizeof(os_mount));
    gchar **lines = g_strsplit(text, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        gchar **f = g_strsplit(*l, " ", 0);
        guint nf = g_strv_length(f), i;
        for (i = 6; i < nf && strcmp(f[i], "-") != 0; i++)
            ;
        if (nf > 5 && i + 1 < nf) {
            os_mount m = {.dir = unescape(f[4]),
                          .type = g_strdup(f[i + 1]),
                          .uid = -1,
                          .dev = g_strdup(f[2])};
            if (i + 3 < nf) {
                gchar **opts = g_strsplit(f[i + 3], ",", -1);
                for (gchar **o = opts; *o; o++)
                    if (g_str_has_prefix(*o, "user_id="))
                        m.uid = strtol(*o + 8, NULL, 10);
                g_strfreev(opts);
            }
            g_array_append_val(a, m);
        }
        g_strfreev(f);
    }
    g_strfreev(lines);
    g_free(text);
    *n = a->len;
    return (os_mount *)g_array_free(a, FALSE);
}

long os_fuse_max_pages_limit(void)
{
    FILE *f = fopen("/proc/sys/fs/fuse/max_pages_limit", "re");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

#elif defined(__APPLE__)

/* macFUSE's mounts are of type "macfuse" (older: "osxfuse"), their
 * f_mntfromname the fsname fleetfs gives (fsname=fleetfs, start/main.c) */
os_mount *os_mounts(size_t *n)
{
    struct statfs *fs;
    int got = getmntinfo(&fs, MNT_NOWAIT);
    os_mount *m;

    *n = 0;
    if (got <= 0)
        return NULL;
    m = g_new0(os_mount, got);
    for (int i = 0; i < got; i++) {
        bool fuse = g_str_has_prefix(fs[i].f_fstypename, "macfuse") ||
                    g_str_has_prefix(fs[i].f_fstypename, "osxfuse");
        m[i].dir = g_strdup(fs[i].f_mntonname);
        m[i].type = g_strdup(!fuse                                     ? fs[i].f_fstypename
                             : !strcmp(fs[i].f_mntfromname, "fleetfs") ? "fuse.fleetfs"
                                                                       : "fuse");
        m[i].uid = (long)fs[i].f_owner;
    }
    *n = (size_t)got;
    return m;
}

long os_fuse_max_pages_limit(void)
{
    return -1;
}

#else

os_mount *os_mounts(size_t *n)
{
    *n = 0;
    return NULL;
}

long os_fuse_max_pages_limit(void)
{
    return -1;
}

#endif
