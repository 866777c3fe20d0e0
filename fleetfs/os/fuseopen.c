/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/fuseopen.c — the reply to an open, with the flags of fuseopen.h.
 *
 * tree.c answers an open (and an opendir) by calling fuse_reply_open with
 * its fuse_file_info; the definition here takes that call (an executable's
 * own symbol comes before the library's, for libfuse's internal calls too)
 * and sends the same answer libfuse would, fuse_open_out built from the
 * same fields, plus FOPEN_PARALLEL_DIRECT_WRITES | FOPEN_STREAM for a
 * handle marked by fo_mark_shared_writes.  The mark is a bit of the
 * structure's reserved padding, which libfuse 3.14 zeroes for every open
 * and never reads.  Moving to the low-level API did not make this a
 * plain reply: 3.14's fuse_reply_open has no way to carry these flags
 * either (its fuse_file_info has no field for them, and fuse_req_t keeps
 * the channel to itself).  A libfuse with fields of its own for these flags
 * (3.15 and later have parallel_direct_writes) must not be overridden
 * this way: the build refuses (below), and the mark then goes in its field.
 */
#include "fleetfs/os/fuseopen.h"

#ifdef __linux__

#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <string.h>

#if FUSE_MAJOR_VERSION != 3 || FUSE_MINOR_VERSION != 14
#error \
    "fuseopen.c answers opens for libfuse 3.14 only: use the fuse_file_info fields of this version"
#endif

#define FO_SHARED_WRITES 1u /* in fuse_file_info.padding */

void fo_mark_shared_writes(struct fuse_file_info *fi)
{
    fi->padding |= FO_SHARED_WRITES;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
    struct fuse_open_out out;
    memset(&out, 0, sizeof out);
    out.fh = fi->fh;
    if (fi->direct_io)
        out.open_flags |= FOPEN_DIRECT_IO;
    if (fi->keep_cache)
        out.open_flags |= FOPEN_KEEP_CACHE;
    if (fi->cache_readdir)
        out.open_flags |= FOPEN_CACHE_DIR;
    if (fi->nonseekable)
        out.open_flags |= FOPEN_NONSEEKABLE;
    if (fi->noflush)
        out.open_flags |= FOPEN_NOFLUSH;
    if (fi->padding & FO_SHARED_WRITES)
        out.open_flags |= FOPEN_PARALLEL_DIRECT_WRITES | FOPEN_STREAM;
    return fuse_reply_buf(req, (const char *)&out, sizeof out);
}

#else

/* macFUSE (libfuse3 on macOS): its kernel extension speaks its own FUSE
 * protocol, with no parallel direct writes and no stream opens; libfuse's
 * own fuse_reply_open answers, and writers of one file take turns, as
 * they did on Linux before these flags (not yet run on a Mac). */
void fo_mark_shared_writes(struct fuse_file_info *fi)
{
    (void)fi;
}

#endif
