/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/startup.c — start-up checks, run before anything touches the
 * broker or forks.
 *
 * Why here, and why first: a mistake that cannot heal must not look like a
 * mount that works.  An unparsable broker URI, amqps:// without ca=, a
 * mount point that is a file, not empty, already a fleetfs mount or one
 * whose daemon died (kill -9: every access says ENOTCONN), and a
 * /dev/fuse this user cannot open all used to mount (or consume the
 * mailbox) first and fail later or never: the daemon then retried forever,
 * hid the first lead under the second, or held the mailbox so the user's
 * next, correct mount waited out takeover_grace.  Each is now refused at
 * once with what to do: exit 2 for configuration (systemd's
 * RestartPreventExitStatus=2 stops the restarts), exit 1 for a mount that
 * cannot come up.  An unreachable broker is not checked here: that heals,
 * and the broker thread keeps trying.
 *
 * max_message is checked against this kernel's write requests too: one
 * write(2) must reach fleetfs as one request, or be refused whole at its
 * first piece (options.c).  1020 KiB holds for the 256 pages of Linux
 * 4.20 on; an older kernel passes 32 pages (128 KiB) and the
 * fs.fuse.max_pages_limit sysctl (6.13 on) may lower the 256, and there a
 * larger max_message would let a cut write through as several messages.
 */
#include "fleetfs/start/startup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "broker/uri.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

#define SU_DEFAULT_URI "amqp://localhost:5672"

char **su_broker_uris(const fs_opts *o, bool *defaulted)
{
    const char *env = getenv(o->broker_uri_env);

    if (defaulted)
        *defaulted = false;
    if (env && *env)
        return uri_split(env);
    if (o->broker_uri)
        return uri_split(o->broker_uri);
    if (defaulted)
        *defaulted = true;
    return uri_split(SU_DEFAULT_URI);
}

int su_check_uris(const fs_opts *o)
{
    const char *env = getenv(o->broker_uri_env);
    const char *from = env && *env ? o->broker_uri_env : o->broker_uri ? "broker_uri" : NULL;
    bool defaulted;
    char **uris = su_broker_uris(o, &defaulted);
    char why[768];
    int rc = 0;

    if (uris[0] == NULL) {
        fprintf(stderr,
                "fleetfs: %s holds no broker URI: give amqp://HOST:PORT/VHOST (or amqps://...)\n",
                from ? from : "the configuration");
        rc = -1;
    }
    for (char **u = uris; rc == 0 && *u; u++) {
        if (br_uri_check(*u, o->ca, why, sizeof why) < 0) {
            fprintf(stderr, "fleetfs: %s (from %s); not starting: retrying would not mend it\n",
                    why, from ? from : "the default");
            rc = -1;
        }
    }
    if (rc == 0 && defaulted)
        log_warn("broker: %s is unset and no broker_uri is configured: trying the default %s; "
                 "set %s where fleetfs starts (sudo drops it unless -E or env; a systemd unit "
                 "needs Environment= or EnvironmentFile=; mount(8) passes no environment: "
                 "use broker_uri= in the config file for the address)",
                 o->broker_uri_env, SU_DEFAULT_URI, o->broker_uri_env);
    g_strfreev(uris);
    return rc;
}

size_t su_write_request_bytes(const char *release, long max_pages_limit, long page)
{
    const size_t max_write = 1024 * 1024; /* tree_init */
    int major = 0, minor = 0;
    long pages = 32; /* FUSE_DEFAULT_MAX_PAGES_PER_REQ */
    size_t bytes;

    if (release && sscanf(release, "%d.%d", &major, &minor) == 2 &&
        (major > 4 || (major == 4 && minor >= 20)))
        pages = 256; /* FUSE_MAX_PAGES, asked for by libfuse from max_write */
    if (max_pages_limit > 0 && max_pages_limit < pages)
        pages = max_pages_limit;
    bytes = (size_t)pages * (size_t)page;
    return bytes < max_write ? bytes : max_write;
}

int su_check_max_message(const fs_opts *o)
{
    struct utsname u;
    const char *release = g_getenv("FLEETFS_TEST_KERNEL_RELEASE");
    long page = sysconf(_SC_PAGESIZE), limit = os_fuse_max_pages_limit();
    size_t req, most;

    /* macFUSE cuts a write by its own iosize, not Linux's max_pages: not
     * checked there (not yet run on a Mac) */
    if (!OS_FUSE_LINUX)
        return 0;
    if (!release)
        release = uname(&u) == 0 ? u.release : "?";
    req = su_write_request_bytes(release, limit, page);
    most = req - (size_t)page;
    if (o->max_message <= most)
        return 0;
    fprintf(stderr,
            "fleetfs: max_message=%zu is more than this kernel passes in one write request, less "
            "a page (Linux %s%s: %zu KiB per request), so a longer write could reach fleetfs in "
            "pieces and be sent as several messages; set max_message to at most %zuKiB; not "
            "starting\n",
            o->max_message, release,
            limit > 0 && (size_t)limit * (size_t)page == req ? ", fs.fuse.max_pages_limit" : "",
            req / 1024, most / 1024);
    return -1;
}

/* The file-system type mounted on dir (the last such mount), or NULL. */
static char *su_mounted_type(const char *dir)
{
    size_t n;
    os_mount *m = os_mounts(&n);
    char *type = NULL;

    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].dir, dir) == 0) {
            g_free(type);
            type = g_strdup(m[i].type);
        }
    os_mounts_free(m, n);
    return type;
}

void su_say_dead_mount(const char *dir)
{
    fprintf(stderr,
            "fleetfs: not mounting: %s is a FUSE mount whose daemon is gone: " OS_UNMOUNT_LAZY_CMD
            " %s, then mount again\n",
            dir, dir);
}

int su_check_mountpoint(const char *dir)
{
    char *type = su_mounted_type(dir);
    struct stat st;
    DIR *d;
    struct dirent *e;

    if (type && g_str_has_prefix(type, "fuse")) {
        /* a daemon killed (kill -9, a crash) leaves its mount behind: every
         * access then says ENOTCONN, and nothing consumes anything */
        if (stat(dir, &st) < 0 && errno == ENOTCONN)
            su_say_dead_mount(dir);
        else if (strcmp(type, "fuse.fleetfs") == 0)
            fprintf(stderr,
                    "fleetfs: not mounting: %s is already a fleetfs mount; a second one would "
                    "hide it while its daemon keeps consuming its mailbox: unmount it first "
                    "(" OS_UNMOUNT_CMD " %s) or choose another directory\n",
                    dir, dir);
        else
            fprintf(stderr,
                    "fleetfs: not mounting: %s is already a FUSE mount (%s): unmount it first "
                    "(" OS_UNMOUNT_CMD " %s) or choose another directory\n",
                    dir, type, dir);
        g_free(type);
        return -1;
    }
    g_free(type);
    if (stat(dir, &st) < 0) {
        fprintf(stderr, "fleetfs: not mounting: mount point %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "fleetfs: not mounting: %s is not a directory: the mount point must be an empty "
                "directory (mkdir it)\n",
                dir);
        return -1;
    }
    d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fleetfs: not mounting: mount point %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        fprintf(stderr,
                "fleetfs: not mounting: %s is not empty (it holds %s): the mount would hide what "
                "is there; mount on an empty directory\n",
                dir, e->d_name);
        closedir(d);
        return -1;
    }
    closedir(d);
    return 0;
}

/* A fusermount3 on PATH that is setuid root opens /dev/fuse for us. */
static bool su_fusermount_setuid(void)
{
    char *path = g_find_program_in_path("fusermount3");
    struct stat st;
    bool ok = path && stat(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & S_ISUID);
    g_free(path);
    return ok;
}

int su_check_dev_fuse(void)
{
    int fd, e;
    bool absent;
    /* macFUSE has no /dev/fuse: libfuse runs its mount helper, which loads
     * the kernel extension and says itself what is missing */
    if (!OS_FUSE_LINUX)
        return 0;
    fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    e = errno;
    absent = e == ENOENT || e == ENODEV || e == ENXIO;

    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (!absent && geteuid() != 0 && su_fusermount_setuid())
        return 0;
    fprintf(stderr, "fleetfs: not mounting: cannot open /dev/fuse: %s: %s\n", strerror(e),
            absent ? "load the fuse module (modprobe fuse); in a container, pass the device "
                     "(docker run --device /dev/fuse --cap-add SYS_ADMIN)"
                   : "give this user read and write access to /dev/fuse, or install "
                     "fusermount3 setuid root (the fuse3 package does)");
    return -1;
}
