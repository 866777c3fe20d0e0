/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/startup.h — what is checked before fleetfs touches the broker
 * (startup.c). */
#ifndef FLEETFS_STARTUP_H
#define FLEETFS_STARTUP_H

#include <stdbool.h>

#include "fleetfs/config/options.h"

/* The broker URIs to use: the variable broker_uri_env names, else
 * broker_uri, else amqp://localhost:5672 (*defaulted set).  g_strfreev. */
char **su_broker_uris(const fs_opts *o, bool *defaulted);
/* Every URI parses, is amqp:// or amqps://, and amqps:// has a ca=.  0, or
 * -1 after saying on stderr what is wrong (a configuration error: exit 2).
 * Also warns, in the log, when no URI was given and the default is tried. */
int su_check_uris(const fs_opts *o);
/* The mount point (absolute, resolved) is a directory, empty, and not
 * already a FUSE mount; then /dev/fuse can be opened (or a setuid
 * fusermount3 will open it for us).  0, or -1 after saying why on stderr
 * (the mount cannot come up: exit 1). */
int su_check_mountpoint(const char *dir);
int su_check_dev_fuse(void);
/* The bytes this kernel passes in one FUSE write request: max_write
 * (1 MiB, tree_init) or its page limit, whichever is less.  The page
 * limit is 256 pages from Linux 4.20 on (FUSE_MAX_PAGES), at most
 * max_pages_limit (the fs.fuse.max_pages_limit sysctl, 6.13 on; <= 0:
 * none), and 32 pages before 4.20.  release is uname's; 0 when it does
 * not parse (treated as old: the smaller limit). */
size_t su_write_request_bytes(const char *release, long max_pages_limit, long page);
/* max_message fits in one write request of this kernel, less a page (a
 * write that is not page-aligned is cut up to a page earlier).  0, or -1
 * after saying on stderr what to set (a configuration error: exit 2).
 * FLEETFS_TEST_KERNEL_RELEASE stands in for uname's release (tests). */
int su_check_max_message(const fs_opts *o);
/* Say on stderr that dir is a FUSE mount whose daemon is gone (every
 * access gives ENOTCONN), and what to run. */
void su_say_dead_mount(const char *dir);

#endif
