/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/wire/trustwatch.h — whether the trust directory changed, without
 * a stat of every key in it each time (sign.c's sig_trust_stamp).
 *
 * A fleet of N hosts has N keys in every host's trusted_keys, and each
 * daemon asked every second whether the directory changed (presence for
 * heartbeats, the mailbox for messages and its status): N stats a second
 * per asker, most of one daemon's CPU at 2000 hosts (doc/scaling.md).
 * Here a watch on the directory answers instead (inotify on Linux,
 * kqueue on macOS: fleetfs/os/os.h; none in the portable build): a stamp that
 * changes whenever anything in the directory may have changed (a file
 * created, removed, renamed, written, or its mode or owner changed; the
 * directory itself changed, replaced or moved).  Only where inotify sees
 * every such change: a local filesystem (ext2/3/4, xfs, btrfs, tmpfs, zfs,
 * f2fs; not NFS or FUSE, whose changes made elsewhere it misses), and no
 * .pub that is a symlink or has another hard link (a change through the
 * other name is not reported here).  Anywhere else, and when no inotify
 * instance can be had, the full stamp is used as before.  As a safety net
 * the full stamp is also taken every TW_FULL_MS and compared.
 */
#ifndef FLEETFS_WIRE_TRUSTWATCH_H
#define FLEETFS_WIRE_TRUSTWATCH_H

#include <stdbool.h>
#include <stdint.h>

#define TW_FULL_MS 30000 /* the full stamp, compared at least this often */

/* A stamp of dir like sig_trust_stamp's (full is that function): equal
 * stamps, nothing changed; -1 when dir cannot be looked at. */
int64_t tw_stamp(const char *dir, int64_t (*full)(const char *dir));
/* Whether tw_stamp answers for dir by its watch now (for tests). */
bool tw_watching(const char *dir);

#endif
