/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/cmdline.h — the command line (see cmdline.c). */
#ifndef FLEETFS_CMDLINE_H
#define FLEETFS_CMDLINE_H

#include <stdbool.h>
#include <stdio.h>

#include <glib.h>

#include "fleetfs/config/options.h"

typedef struct {
    char *source; /* mount.fuse3's first argument, unused */
    char *mountpoint;
    bool foreground;
    bool debug;
    bool single;
    unsigned max_idle_threads; /* -o max_idle_threads=N; 0: the default */
    GPtrArray *ours;           /* "key=value" of fleetfs options, in order */
    GPtrArray *fuse_opts;      /* "-o", "x" pairs for libfuse */
} cmdline;

void cl_usage(FILE *to);
/* 0 to go on, 1 when done (help or version printed), -1 on error (said). */
int cl_parse(int argc, char **argv, cmdline *cl);
/* The config file (-o config=, else the per-user one, else /etc), then
 * the -o options, then the derived defaults.  -1 on error (said). */
int cl_load_options(cmdline *cl, fs_opts *o);

#endif
