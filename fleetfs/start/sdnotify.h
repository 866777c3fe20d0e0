/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/sdnotify.h — telling a service manager (systemd, Type=notify)
 * how the daemon is doing, over the sd_notify datagram protocol.
 *
 * Everything here is a no-op when NOTIFY_SOCKET was not set at start, so
 * the calls can sit on the daemon's normal path.  One notifier per
 * process (the protocol has one socket per service): module state, no
 * handle.
 *
 *   sdn_init()            main(), before any thread: read and unset
 *                         NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID
 *   sdn_status(text)      "STATUS=text", only when it differs from the last
 *   sdn_start(mnt)        after the mount: READY=1 once a probe has opened
 *                         MNT/README through the kernel, then WATCHDOG=1
 *                         at half of WATCHDOG_USEC after each probe that
 *                         came back
 *   sdn_stopping()        leaving the FUSE loop: stop the probes, STOPPING=1
 * Thread-safe. */
#ifndef FLEETFS_SDNOTIFY_H
#define FLEETFS_SDNOTIFY_H

#include <stdbool.h>

/* Returns true when a notify socket is in use. A malformed NOTIFY_SOCKET
 * is logged and ignored (the service then times out in systemd, which
 * says why; the daemon itself works). */
bool sdn_init(void);
bool sdn_enabled(void);
void sdn_status(const char *text);
/* Sends text as one datagram as it is ("READY=1\nSTATUS=..."). */
void sdn_send(const char *text);
void sdn_start(const char *mountpoint);
void sdn_stopping(void);

#endif
