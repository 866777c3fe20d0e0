/* fleetfs/tree.h — the FUSE operations of the mounted tree. */
#ifndef FLEETFS_TREE_H
#define FLEETFS_TREE_H

#include <fuse.h>

#include "fleetfs/fleet.h"

extern const struct fuse_operations tree_ops;

#endif
