/* SPDX-License-Identifier: Apache-2.0 */
/* broker/watchdog.c — the watchdog of a connected broker thread (see
 * STUCK_MS in conn_int.h) and the kick that shuts a connection's socket
 * down from another thread: the watchdog's, br_stop's, and the consuming
 * connection's for its publishing sibling (br_kick_sibling).  Used through
 * broker/watchdog.h.
 */
#include "broker/watchdog.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "broker/state.h"
#include "fleetfs/base/log.h"

/* Shut down c's socket (any thread): a send or poll blocked on it fails
 * at once.  Under c->lock, so the broker thread cannot have closed the
 * descriptor (and the number been reused) meanwhile. */
bool br_kick(br_conn *c, const char *why)
{
    bool done = false;
    g_mutex_lock(&c->lock);
    if (c->sockfd >= 0 && !c->kick_reason[0]) {
        g_strlcpy(c->kick_reason, why, sizeof c->kick_reason);
        done = shutdown(c->sockfd, SHUT_RDWR) == 0;
    }
    g_mutex_unlock(&c->lock);
    return done;
}

/* c, the consuming connection, was lost: the publishing connection to the
 * same node most likely shares the fault (a silent link, a node gone) and
 * would otherwise hold a send for send_timeout before finding out.  Its
 * socket is shut down, so its own thread drops it and sends fail at once
 * (ECOMM: nothing published) while it reconnects. */
void br_kick_sibling(br_conn *c, const char *why)
{
    char mine[300], theirs[300], reason[400];
    if (c->pub == NULL)
        return;
    g_mutex_lock(&c->lock);
    g_strlcpy(mine, c->st.node, sizeof mine);
    g_mutex_unlock(&c->lock);
    g_mutex_lock(&c->pub->lock);
    g_strlcpy(theirs, c->pub->st.node, sizeof theirs);
    g_mutex_unlock(&c->pub->lock);
    if (!mine[0] || strcmp(mine, theirs) != 0)
        return;
    snprintf(reason, sizeof reason, "the consuming connection to the same node lost it: %s", why);
    br_kick(c->pub, reason);
}

/* See STUCK_MS. */
static void watch_one(br_conn *c)
{
    int64_t quiet = br_now_ms() - atomic_load(&c->progress_ms);
    char why[320], node[300];
    if (quiet < STUCK_MS)
        return;
    g_mutex_lock(&c->lock);
    g_strlcpy(node, c->st.node, sizeof node);
    g_mutex_unlock(&c->lock);
    snprintf(why, sizeof why,
             "the broker at %s has neither read what fleetfs sent nor answered for %lld s (a "
             "frozen broker or a stuck link); dropped the %sconnection",
             node, (long long)quiet / 1000, c->publisher ? "publishing " : "");
    if (br_kick(c, why))
        log_warn("broker: %s", why);
}

gpointer br_watchdog_main(gpointer data)
{
    br_conn *c = data;
    g_mutex_lock(&c->lock);
    while (!c->wd_stop) {
        gint64 until = g_get_monotonic_time() + WATCHDOG_TICK_MS * 1000;
        if (g_cond_wait_until(&c->state_cv, &c->lock, until) || c->wd_stop)
            continue;
        g_mutex_unlock(&c->lock);
        watch_one(c);
        if (c->pub) {
            watch_one(c->pub);
            /* the backstop of send_timeout: a publishing thread that is
             * turning its loop tells each deadline itself, at once; one
             * that is not (stuck in a send(2) until watch_one's kick) is
             * told for here, a second late at most */
            br_timed_tick(c->pub, WATCHDOG_TICK_MS);
        }
        g_mutex_lock(&c->lock);
    }
    g_mutex_unlock(&c->lock);
    return NULL;
}
