/* SPDX-License-Identifier: Apache-2.0 */
/* broker/watchdog.h — the watchdog and the kick (watchdog.c).  For
 * broker/ only. */
#ifndef FLEETFS_BROKER_WATCHDOG_H
#define FLEETFS_BROKER_WATCHDOG_H

#include "broker/conn_int.h"

/* Shut down c's socket (any thread): a send or poll blocked on it fails
 * at once.  Whether it was shut down now. */
bool br_kick(br_conn *c, const char *why);
/* c (the consuming connection) was lost: drop its sibling too when it is
 * to the same node (any thread) */
void br_kick_sibling(br_conn *c, const char *why);
/* The watchdog thread of c and its publishing connection (g_thread_new). */
gpointer br_watchdog_main(gpointer data);

#endif
