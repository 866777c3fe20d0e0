/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/fuseopen.h — open flags that libfuse 3.14 cannot pass on.
 *
 * Four writers on one `send` were no faster than one: the kernel holds a
 * FUSE inode's lock across a whole direct write (until the confirm), so
 * writes to one file queue in the kernel, one at a time.  It lets them in
 * together when the open's reply carries FOPEN_PARALLEL_DIRECT_WRITES and
 * the write does not reach past the end of the file (as the kernel knows
 * it); FOPEN_STREAM puts every write at offset 0, so only a message longer
 * than any before it (since the last stat) reaches past it.  libfuse 3.14
 * (Debian bookworm) has no field for either flag, so fleetfs answers the
 * open itself (fuseopen.c).  See doc/benchmarks.md, "One send, taken apart".
 * In the platform seam (fleetfs/os/) because the reply is Linux's FUSE
 * protocol (linux/fuse.h): on macOS, macFUSE's kernel side has neither
 * flag, libfuse answers the open, and fo_mark_shared_writes does nothing.
 */
#ifndef FLEETFS_OS_FUSEOPEN_H
#define FLEETFS_OS_FUSEOPEN_H

#include <fuse.h>

/* Mark fi (in tree_open) as a message file that writers share: its open
 * reply asks for parallel direct writes at no file position. */
void fo_mark_shared_writes(struct fuse_file_info *fi);

#endif
