/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/gone.h — an unmount the kernel's FUSE connection outlives.
 *
 * fusermount3 -u (or umount) takes the mount out of this mount namespace;
 * the kernel ends the FUSE connection, and with it libfuse's loop, only
 * once no mount of it is left in any namespace.  A mount namespace made
 * while fleetfs was mounted (unshare -m, a bwrap sandbox, ip netns exec)
 * holds a copy of the mount, and where mounts are private (no propagation)
 * the unmount does not reach that copy: the daemon served on, unseen here,
 * and did not exit until that namespace ended.  So once a second the
 * mount table is asked whether this namespace still has a mount of our
 * connection (its device number); when it has had none for two rounds
 * while the connection lives, the loop is ended here, and the copy left
 * elsewhere answers ENOTCONN once the daemon lets go of /dev/fuse.
 * Linux only (the mount table's device numbers); elsewhere nothing is
 * watched. */
#ifndef FLEETFS_START_GONE_H
#define FLEETFS_START_GONE_H

#include <stdbool.h>

#include <fuse_lowlevel.h>

/* after the mount, on the thread that will run the FUSE loop */
void mg_arm(struct fuse_session *se, const char *mountpoint);
/* once a second (each_second) */
void mg_check(void);
/* once the loop has returned, before its signal handlers are removed:
 * no signal is sent after this */
void mg_disarm(void);
/* fuse_session_unmount, except after mg_check ended the loop: then the
 * mount point is not ours any more (it may hold a new mount), so libfuse
 * is only told the connection is over and lets go of /dev/fuse */
void mg_unmount(struct fuse_session *se);

#endif
