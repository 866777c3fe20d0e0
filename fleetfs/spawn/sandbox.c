/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox.c — a spawned agent's confinement (sandbox.h). */
#include "fleetfs/spawn/sandbox.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

/* Variables a terminal agent needs, passed on from the daemon's own. */
static const char *const sb_keep[] = {"HOME", "PATH", "TERM", "LANG", "USER", "LOGNAME", NULL};

char *sb_find_tool(void)
{
#ifdef __APPLE__
    return g_file_test("/usr/bin/sandbox-exec", G_FILE_TEST_IS_EXECUTABLE)
               ? g_strdup("/usr/bin/sandbox-exec")
               : NULL;
#else
    const char *env = g_getenv("FLEETFS_BWRAP");

    if (env) /* the operator's choice of bwrap: an executable, else none */
        return env[0] == '/' && g_file_test(env, G_FILE_TEST_IS_EXECUTABLE) ? g_strdup(env) : NULL;
    return g_find_program_in_path("bwrap");
#endif
}

static void add(GPtrArray *a, const char *s)
{
    g_ptr_array_add(a, g_strdup(s));
}

#ifdef __APPLE__
/* sandbox-exec's profile language (SBPL): reads allowed but for the
 * hidden paths and the mount outside the home; writes only in dir, the
 * home and the temporary directories. */
static char *sb_profile(const sb_host *h, const char *home, const char *dir)
{
    GString *p = g_string_new("(version 1)\n(allow default)\n(deny file-write*)\n");

    g_string_append_printf(p, "(allow file-write* (subpath \"%s\") (subpath \"%s\")", dir, home);
    g_string_append(p, " (subpath \"/private/tmp\") (subpath \"/private/var/folders\")"
                       " (literal \"/dev/null\") (regex #\"^/dev/tty\"))\n");
    g_string_append_printf(p,
                           "(deny file-read* (require-all (subpath \"%s\") "
                           "(require-not (subpath \"%s\"))))\n",
                           h->mountpoint, home);
    for (size_t i = 0; i < G_N_ELEMENTS(h->hide); i++)
        if (h->hide[i])
            g_string_append_printf(p, "(deny file-read* (subpath \"%s\"))\n", h->hide[i]);
    return g_string_free(p, FALSE);
}
#endif

char **sb_argv(const sb_host *h, const char *gid, const char *dir, const char *const *cmd,
               char *why, size_t n)
{
    GPtrArray *a;
    char *home;

    if (!h->tool) {
        snprintf(why, n, "no sandbox here: bwrap (Debian: bubblewrap) is not installed");
        return NULL;
    }
    if (!dir || dir[0] != '/' || !h->mountpoint || h->mountpoint[0] != '/') {
        snprintf(why, n, "the sandbox needs an absolute directory and mount point");
        return NULL;
    }
    home = g_build_filename(h->mountpoint, "agents", gid, NULL);
    a = g_ptr_array_new();
    add(a, h->tool);
#ifdef __APPLE__
    {
        char *prof = sb_profile(h, home, dir);
        add(a, "-p");
        g_ptr_array_add(a, prof);
        /* sandbox-exec keeps the environment: env -i starts a fresh one */
        add(a, "/usr/bin/env");
        add(a, "-i");
        for (const char *const *k = sb_keep; *k; k++)
            if (g_getenv(*k))
                g_ptr_array_add(a, g_strdup_printf("%s=%s", *k, g_getenv(*k)));
        g_ptr_array_add(a, g_strdup_printf("FLEET=%s", h->mountpoint));
        g_ptr_array_add(a, g_strdup_printf("FLEETFS_AGENT=%s", gid));
    }
#else
    {
        const char *const fixed[] = {"--die-with-parent",
                                     "--unshare-pid",
                                     "--unshare-ipc",
                                     "--ro-bind",
                                     "/",
                                     "/",
                                     "--dev",
                                     "/dev",
                                     "--proc",
                                     "/proc",
                                     "--tmpfs",
                                     "/var/tmp",
                                     NULL};
        for (const char *const *f = fixed; *f; f++)
            add(a, *f);
        for (size_t i = 0; i < G_N_ELEMENTS(h->hide); i++) {
            if (!h->hide[i])
                continue;
            if (g_file_test(h->hide[i], G_FILE_TEST_IS_DIR)) {
                add(a, "--tmpfs");
                add(a, h->hide[i]);
            } else if (g_file_test(h->hide[i], G_FILE_TEST_EXISTS)) {
                add(a, "--ro-bind");
                add(a, "/dev/null");
                add(a, h->hide[i]);
            }
        }
        add(a, "--bind");
        add(a, dir);
        add(a, dir);
        add(a, "--tmpfs");
        add(a, h->mountpoint);
        add(a, "--bind");
        add(a, home);
        add(a, home);
        add(a, "--clearenv");
        for (const char *const *k = sb_keep; *k; k++) {
            if (!g_getenv(*k))
                continue;
            add(a, "--setenv");
            add(a, *k);
            add(a, g_getenv(*k));
        }
        add(a, "--setenv");
        add(a, "FLEET");
        add(a, h->mountpoint);
        add(a, "--setenv");
        add(a, "FLEETFS_AGENT");
        add(a, gid);
        add(a, "--setenv");
        add(a, "TMPDIR");
        add(a, "/var/tmp");
        add(a, "--chdir");
        add(a, dir);
        add(a, "--");
    }
#endif
    for (const char *const *c = cmd; c && *c; c++)
        add(a, *c);
    g_ptr_array_add(a, NULL);
    g_free(home);
    return (char **)g_ptr_array_free(a, FALSE);
}
