/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/cmdline.c — the command line: flags, -o lists split into
 * fleetfs options, FUSE options passed through, and mount(8)'s own
 * options; the config file first, then -o (which wins).
 */
#include "fleetfs/start/cmdline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fleetfs/os/os.h"

/* FUSE mount options passed through as they are. */
static const char *fuse_passthrough[] = {"allow_other",
                                         "allow_root",
                                         "default_permissions",
                                         "auto_unmount",
                                         "fsname",
                                         "subtype",
                                         "noatime",
                                         "nodev",
                                         "nosuid",
                                         NULL};

/* ---- mount(8) and /etc/fstab ------------------------------------------
 * mount -t fuse.fleetfs SOURCE DIR -o OPTS runs mount.fuse3, which runs
 * `fleetfs SOURCE DIR -o OPTS` (SOURCE: the first field of the fstab
 * line, e.g. "fleetfs"; it is accepted and not used).  OPTS then carry
 * the kernel's generic mount flags (mount.fuse3 adds dev,suid itself;
 * `user` makes mount(8) add noexec,nosuid,nodev): libfuse applies them.
 * The options for mount(8) and systemd only (_netdev, nofail, x-systemd.*,
 * ...) are removed by mount(8) or mount.fuse3 before fleetfs runs; should
 * one still arrive it is ignored here, never an error.  Anything else
 * unknown stays an error. */
static const char *mount_flags[] = {"rw",     "ro",      "dev",     "nodev", "suid",
                                    "nosuid", "exec",    "noexec",  "async", "sync",
                                    "atime",  "noatime", "dirsync", NULL};
static const char *mount_only[] = {"defaults", "auto",  "noauto",  "user",   "nouser", "users",
                                   "owner",    "group", "_netdev", "nofail", NULL};

static bool in_list(const char **list, const char *item, size_t len)
{
    for (const char **p = list; *p; p++)
        if (strlen(*p) == len && strncmp(*p, item, len) == 0)
            return true;
    return false;
}

static bool is_mount_only(const char *item)
{
    return in_list(mount_only, item, strlen(item)) || g_str_has_prefix(item, "x-") ||
           g_str_has_prefix(item, "comment=");
}
/* ---- end mount(8) ------------------------------------------------------ */

void cl_usage(FILE *to)
{
    fprintf(
        to,
        "usage: fleetfs [SOURCE] MOUNTPOINT [-f] [-d] [-s] [-o opt[,opt...]]\n"
        "       fleetfs keygen PATH\n"
        "       fleetfs mcp [MOUNTPOINT] [--as GID]   (an MCP server on stdio; fleetfs mcp "
        "--help)\n"
        "       fleetfs ask [MOUNTPOINT] [--timeout D] PEER TEXT   (ask, print the answer)\n"
        "       fleetfs claim [MOUNTPOINT] NAME [--wait S] [--note TEXT]   (take a claim, print "
        "its token)\n"
        "       fleetfs declare NAME [-o opt[,opt...]]   (run by fleetfs-broker host add)\n"
        "       fleetfs dlq list | show ID | redrive ID | purge [-o opt[,opt...]]\n"
        "       fleetfs --help | --version\n"
        "\n"
        "Mounts the fleet's lead mailboxes (queues on an AMQP broker) as files.\n"
        "  -f   stay in the foreground        -d  debug (FUSE traffic), implies -f\n"
        "  -s   single-threaded FUSE loop\n"
        "\n"
        "%s"
        "FUSE options passed through: allow_other, allow_root, default_permissions,\n"
        "  auto_unmount, fsname=, subtype=, noatime, nodev, nosuid,\n"
        "  and the generic mount flags rw, ro, dev, suid, exec, noexec, sync, ...\n"
        "FUSE loop: max_idle_threads=N (1..1000, default 16) threads kept waiting\n"
        "mount(8): mount -t fuse.fleetfs fleetfs MOUNTPOINT -o opts, or an fstab line\n"
        "  (SOURCE is ignored; fstab-only options such as _netdev, nofail, x-systemd.*\n"
        "  are ignored)\n"
        "\n"
        "The broker URI (with credentials) is read from the environment variable named\n"
        "by broker_uri_env (default FLEET_BROKER_URI); several URIs separated by spaces\n"
        "or commas are tried in turn.  Unmount with: " OS_UNMOUNT_CMD " MOUNTPOINT\n",
        opts_help());
}

static bool is_passthrough(const char *item)
{
    size_t klen = strcspn(item, "=");
    return in_list(fuse_passthrough, item, klen) || in_list(mount_flags, item, strlen(item));
}

static int add_o(cmdline *cl, const char *list)
{
    gchar **items = g_strsplit(list, ",", -1);
    int rc = 0;
    for (gchar **it = items; *it; it++) {
        char key[128];
        size_t klen = strcspn(*it, "=");
        if (!**it)
            continue;
        g_strlcpy(key, *it, MIN(klen + 1, sizeof key));
        if (!strcmp(key, "max_idle_threads")) {
            /* libfuse 3.14 takes it only in the loop's configuration, not
             * as a mount option (fuse: unknown option) */
            char *end = NULL;
            long n = klen < strlen(*it) ? strtol(*it + klen + 1, &end, 10) : 0;
            if (!end || *end || n < 1 || n > 1000) {
                fprintf(stderr,
                        "fleetfs: max_idle_threads=%s: give a whole number from 1 to "
                        "1000 (the FUSE threads kept waiting for requests)\n",
                        klen < strlen(*it) ? *it + klen + 1 : "");
                rc = -1;
            } else
                cl->max_idle_threads = (unsigned)n;
        } else if (opts_known(key)) {
            g_ptr_array_add(cl->ours, g_strdup(*it));
        } else if (is_passthrough(*it)) {
            g_ptr_array_add(cl->fuse_opts, g_strdup("-o"));
            g_ptr_array_add(cl->fuse_opts, g_strdup(*it));
        } else if (is_mount_only(*it)) {
            continue; /* for mount(8) and systemd, not for us */
        } else if (klen == strlen(*it) && it != items && g_str_has_prefix(it[-1], "peers=")) {
            /* peers=a,b: the comma ended the option; the rest looks like a peer */
            fprintf(stderr,
                    "fleetfs: unknown option '%s' (after %s): peers are separated by ':', "
                    "not ',' (peers=a:b)\n",
                    key, it[-1]);
            rc = -1;
        } else {
            fprintf(stderr, "fleetfs: unknown option '%s' (see fleetfs --help)\n", key);
            rc = -1;
        }
    }
    g_strfreev(items);
    return rc;
}

int cl_parse(int argc, char **argv, cmdline *cl)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cl_usage(stdout);
            return 1;
        } else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("fleetfs %s\n", FLEETFS_VERSION);
            return 1;
        } else if (!strcmp(a, "-f")) {
            cl->foreground = true;
        } else if (!strcmp(a, "-d")) {
            cl->debug = cl->foreground = true;
        } else if (!strcmp(a, "-s")) {
            cl->single = true;
        } else if (!strcmp(a, "-o")) {
            if (++i >= argc) {
                fprintf(stderr, "fleetfs: -o needs an argument\n");
                return -1;
            }
            if (add_o(cl, argv[i]) < 0)
                return -1;
        } else if (!strncmp(a, "-o", 2)) {
            if (add_o(cl, a + 2) < 0)
                return -1;
        } else if (a[0] == '-') {
            fprintf(stderr, "fleetfs: unknown flag '%s' (see fleetfs --help)\n", a);
            return -1;
        } else if (cl->mountpoint && !cl->source) {
            /* mount.fuse3: fleetfs SOURCE MOUNTPOINT */
            cl->source = cl->mountpoint;
            cl->mountpoint = g_strdup(a);
        } else if (cl->mountpoint) {
            fprintf(stderr,
                    "fleetfs: one mount point only (got '%s', '%s' and '%s'; usage: fleetfs "
                    "[SOURCE] MOUNTPOINT)\n",
                    cl->source, cl->mountpoint, a);
            return -1;
        } else {
            cl->mountpoint = g_strdup(a);
        }
    }
    if (!cl->mountpoint) {
        cl_usage(stderr);
        return -1;
    }
    return 0;
}

static int apply(fs_opts *o, const char *kv)
{
    char *err = NULL;
    char *key = g_strndup(kv, strcspn(kv, "="));
    const char *val = strchr(kv, '=') ? strchr(kv, '=') + 1 : "";
    int rc = opts_set(o, key, val, &err);
    if (rc < 0) {
        fprintf(stderr, "fleetfs: %s\n", err);
        g_free(err);
    }
    g_free(key);
    return rc;
}

static char *default_config(void)
{
    char *user = g_build_filename(g_get_user_config_dir(), "fleetfs", "fleetfs.conf", NULL);
    if (g_file_test(user, G_FILE_TEST_EXISTS))
        return user;
    g_free(user);
    return g_strdup("/etc/fleetfs/fleetfs.conf");
}

int cl_load_options(cmdline *cl, fs_opts *o)
{
    char *err = NULL;
    char *cfg = NULL;
    bool explicit_cfg = false;

    /* -o config= first: it says which file the rest overrides */
    for (guint i = 0; i < cl->ours->len; i++)
        if (g_str_has_prefix(cl->ours->pdata[i], "config=")) {
            g_free(cfg);
            cfg = g_strdup((char *)cl->ours->pdata[i] + 7);
            explicit_cfg = true;
        }
    if (!cfg)
        cfg = default_config();
    if (opts_load_file(o, cfg, explicit_cfg, &err) < 0) {
        fprintf(stderr, "fleetfs: %s\n", err);
        g_free(err);
        g_free(cfg);
        return -1;
    }
    g_free(cfg);
    for (guint i = 0; i < cl->ours->len; i++)
        if (apply(o, cl->ours->pdata[i]) < 0)
            return -1;
    if (opts_finish(o, &err) < 0) {
        fprintf(stderr, "fleetfs: %s\n", err);
        g_free(err);
        return -1;
    }
    return 0;
}
