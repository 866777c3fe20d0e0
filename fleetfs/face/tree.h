/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/tree.h — the FUSE operations of the mounted tree (libfuse's
 * low-level API; the design is in tree.c). */
#ifndef FLEETFS_TREE_H
#define FLEETFS_TREE_H

#include <stdbool.h>

#include <fuse_lowlevel.h>

#include "fleetfs/face/fleet.h"

/* The tree's own state (its node ids), the session's userdata.
 * shared: mounted allow_other (the kernel then keeps no attributes). */
typedef struct tree tree;
tree *tree_new(fleet *f, bool shared);
void tree_free(tree *t);

extern const struct fuse_lowlevel_ops tree_ops;

#endif
