/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/gone.c — an unmount the FUSE connection outlives (design
 * in gone.h). */
#include "fleetfs/start/gone.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"

static struct {
    GMutex lock;
    struct fuse_session *se;
    pthread_t loop; /* the thread in the FUSE loop */
    char *dev;      /* our mount's "MAJ:MIN"; NULL: not watched */
    char *dir;
    int misses; /* rounds in a row without it */
    bool armed, gone;
} mg;

void mg_arm(struct fuse_session *se, const char *mountpoint)
{
    size_t n;
    os_mount *m = os_mounts(&n);

    g_mutex_lock(&mg.lock);
    mg.se = se;
    mg.loop = pthread_self();
    mg.dir = g_strdup(mountpoint);
    for (size_t i = n; i-- > 0 && !mg.dev;) /* the newest on that point: ours */
        if (m[i].dev && strcmp(m[i].dir, mountpoint) == 0 && g_str_has_prefix(m[i].type, "fuse"))
            mg.dev = g_strdup(m[i].dev);
    mg.armed = mg.dev != NULL;
    g_mutex_unlock(&mg.lock);
    if (!mg.dev && m && n && m[0].dev)
        log_warn("unmount: %s is not in this process's mount table; an unmount that leaves a "
                 "copy of the mount in another mount namespace will not end this daemon (stop "
                 "it with SIGTERM then)",
                 mountpoint);
    os_mounts_free(m, n);
}

/* the kernel has ended the connection (an unmount it saw through, or an
 * abort): libfuse's loop ends by itself */
static bool connection_ended(void)
{
    struct pollfd p = {.fd = fuse_session_fd(mg.se), .events = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

void mg_check(void)
{
    size_t n;
    bool here = false;
    os_mount *m;

    g_mutex_lock(&mg.lock);
    if (!mg.armed || mg.gone) {
        g_mutex_unlock(&mg.lock);
        return;
    }
    m = os_mounts(&n);
    for (size_t i = 0; i < n && !here; i++)
        here = m[i].dev && strcmp(m[i].dev, mg.dev) == 0;
    os_mounts_free(m, n);
    /* an unreadable table says nothing; two rounds: an unmount here ends
     * the connection a moment after the table loses it */
    mg.misses = here || !m ? 0 : mg.misses + 1;
    if (mg.misses >= 2 && !connection_ended()) {
        mg.gone = true;
        log_info("unmount: %s is no longer mounted here, but the kernel keeps its FUSE "
                 "connection: a copy of the mount is left in another mount namespace (one made "
                 "while it was mounted: unshare -m, a sandbox, ip netns exec); ending the FUSE "
                 "loop here, which leaves that copy disconnected",
                 mg.dir);
        fuse_session_exit(mg.se);
        /* wakes the loop's wait: libfuse's handler (no SA_RESTART) */
        pthread_kill(mg.loop, SIGTERM);
    }
    g_mutex_unlock(&mg.lock);
}

void mg_disarm(void)
{
    g_mutex_lock(&mg.lock);
    mg.armed = false;
    g_mutex_unlock(&mg.lock);
}

void mg_unmount(struct fuse_session *se)
{
    int p[2];
    bool gone;

    g_mutex_lock(&mg.lock);
    gone = mg.gone;
    g_free(mg.dev);
    g_free(mg.dir);
    mg.dev = mg.dir = NULL;
    g_mutex_unlock(&mg.lock);
    if (!gone) {
        fuse_session_unmount(se);
        return;
    }
    /* libfuse unmounts the mount point unless the descriptor reports
     * POLLERR (a connection already ended): put in its place one that
     * does (a pipe's write end without a reader); that also closes
     * /dev/fuse, which ends the connection for the copy left elsewhere */
    if (pipe(p) != 0) {
        log_warn("unmount: no pipe (%s); /dev/fuse is let go of at exit", g_strerror(errno));
        return;
    }
    close(p[0]);
    if (dup2(p[1], fuse_session_fd(se)) >= 0)
        fuse_session_unmount(se); /* closes it, unmounts nothing */
    else
        log_warn("unmount: dup2: %s; /dev/fuse is let go of at exit", g_strerror(errno));
    close(p[1]);
}
