/* fleetfs/startup.h — what is checked before fleetfs touches the broker
 * (startup.c). */
#ifndef FLEETFS_STARTUP_H
#define FLEETFS_STARTUP_H

#include <stdbool.h>

#include "fleetfs/options.h"

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
/* Say on stderr that dir is a FUSE mount whose daemon is gone (every
 * access gives ENOTCONN), and what to run. */
void su_say_dead_mount(const char *dir);

#endif
