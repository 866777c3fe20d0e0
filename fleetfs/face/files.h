/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/files.h — an open file of the tree (files.c): tree.c's
 * open, read, write, poll and release of a file end here.  The handle is
 * what the kernel keeps in fuse_file_info.fh.
 */
#ifndef FLEETFS_FACE_FILES_H
#define FLEETFS_FACE_FILES_H

#include <limits.h>

#include "fleetfs/face/tree_int.h"

typedef struct tr_file tr_file;

/* Opens path for r (fi->flags): 0 with fi->fh set, or -errno. */
int tr_file_open(const rq *r, const char *path, struct fuse_file_info *fi);
/* The release (or an open the kernel never saw answered). */
void tr_file_free(tr_file *h);
/* Replies to req: now, or for ask files once answered. */
void tr_file_read(tr_file *h, fuse_req_t req, size_t size, off_t off, int flags);
/* tr_file_write's "answered later": the broker's publishing thread
 * replies to req. */
#define TR_WRITE_PENDING INT_MIN
/* One write(2): size, -errno, or TR_WRITE_PENDING. */
int tr_file_write(const rq *r, fuse_req_t req, tr_file *h, const char *buf, size_t size, off_t off,
                  int flags);
/* The poll events of h now (ph: woken later, or destroyed). */
unsigned tr_file_poll(tr_file *h, struct fuse_pollhandle *ph);

#endif
