/* SPDX-License-Identifier: Apache-2.0 */
/* check.h — may this host do what a control request asks? (SPEC section 11)
 *
 * A pure decision over what the caller tells it: the local profiles and
 * spawn_from (configuration), which names are taken and how many agents
 * of each profile run (the host's present state), and a request already
 * decoded and accepted by fleetfs/wire/control.h (signature, to, expiry,
 * replay). It reads the file system only to resolve a requested directory
 * (realpath), and changes nothing.
 *
 * What comes out of an approved spawn is all that may reach a command
 * line, an environment variable or a path: the profile (local), the
 * validated name and the resolved directory. The brief is not part of it:
 * it is typed into the started agent like a message, through the same
 * sanitiser. Every refusal has one reason, answered to the requester
 * (`spawned: refused`) and logged. */
#ifndef FLEETFS_SPAWN_CHECK_H
#define FLEETFS_SPAWN_CHECK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/config/profile.h"
#include "fleetfs/wire/control.h"

typedef enum {
    SC_OK = 0,
    SC_NOT_ALLOWED,     /* the requester is not in spawn_from */
    SC_MALFORMED,       /* not a spawn/stop, or a field that cannot be one */
    SC_UNKNOWN_PROFILE, /* no such [profile] here */
    SC_BAD_NAME,        /* not [a-z][a-z0-9_-]{0,31}, or this host's own name */
    SC_NAME_TAKEN,      /* an agent of that name lives here already */
    SC_BAD_DIR,         /* dir outside dir_root after resolving, missing, not a directory */
    SC_OVER_MAX,        /* the profile's max instances run already */
    SC_NOT_OURS,        /* stop: not an agent this fleetfs started */
    SC_NO_SANDBOX,      /* the profile's sandbox cannot be made here (spawn/run.c) */
} sc_verdict;

/* The host as the check needs it. The callbacks may be NULL (nothing
 * taken, nothing running, nothing started). */
typedef struct {
    const char *coord_id;          /* this host */
    const char *const *spawn_from; /* NULL-terminated; NULL or empty: nobody */
    const prof_set *profiles;
    bool (*name_taken)(const char *name, void *arg);  /* a local agent named so */
    unsigned (*running)(const prof *p, void *arg);    /* live agents of p */
    bool (*spawned_here)(const char *gid, void *arg); /* started by this fleetfs */
    void *arg;
} sc_host;

typedef struct {
    const prof *profile;
    char name[CTL_NAME_MAX + 1];
    char gid[CTL_GID_MAX + 1];
    char dir[PATH_MAX]; /* resolved; "" = the profile's dir_root, or the backend's default */
} sc_spawn;

/* The words of a verdict for the log and the answer: "requester not in
 * spawn_from", ... Static storage. */
const char *sc_verdict_name(sc_verdict v);

/* A spawn request e from requester (e->from, already verified). SC_OK and
 * *out, or the verdict and why (a sentence for the answer's detail). */
sc_verdict sc_check_spawn(const sc_host *h, const ctl_env *e, sc_spawn *out, char *why, size_t n);
/* A stop request: the requester may stop, and e->gid is an agent this
 * fleetfs started. */
sc_verdict sc_check_stop(const sc_host *h, const ctl_env *e, char *why, size_t n);

#endif
