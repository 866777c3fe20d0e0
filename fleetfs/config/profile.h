/* SPDX-License-Identifier: Apache-2.0 */
/* profile.h — what this host is willing to start for a remote lead
 * (SPEC section 11): `[profile NAME]` sections of the local config file.
 *
 *   [profile worker]
 *   kind = claude                     # herdr: the agent kind for agent.start
 *   args = --model opus               # herdr: its arguments (split like a shell would, no shell)
 *   command = /usr/bin/claude --model opus   # tmux: the program and arguments
 *   dir_root = /srv/work              # a request's dir must resolve inside it
 *   max = 2                           # instances of this profile at once (default 1)
 *   ready_timeout = 30s               # how long the agent may take to be ready (>3 s, <=5 min)
 *   sandbox = bwrap                   # bwrap (default) | none: started unconfined
 *
 * Profiles live only in the local configuration: a request names one and
 * nothing else of what runs. Everything is checked when the file is read,
 * so a bad profile stops the daemon at start (exit 2) instead of failing a
 * remote request later: the program must be found (its absolute path is
 * kept), must not be a shell or a bare interpreter (fleetfs never types
 * into one), and for tmux must be a program the injector will type into
 * (inject_commands); dir_root must be an existing directory (kept
 * resolved, with no symlink left in it).
 *
 * A prof_set is built at start and read-only afterwards (any thread may
 * read it). Strings are g_malloc'd. */
#ifndef FLEETFS_SPAWN_PROFILE_H
#define FLEETFS_SPAWN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#define PROF_GROUP_PREFIX "profile "
#define PROF_TIMEOUT_MIN_MS 3001 /* herdr: timeout_ms must be > 3000 */
#define PROF_TIMEOUT_MAX_MS 300000

typedef struct {
    char *name;     /* [a-z][a-z0-9_-]{0,31} */
    char *kind;     /* herdr agent kind, NULL = not offered through herdr */
    char **args;    /* herdr args (NULL-terminated, maybe empty); NULL when no kind */
    char **command; /* tmux argv, argv[0] absolute; NULL = not offered through tmux */
    char *program;  /* the name the injector knows the command by (herdr/foreground.h) */
    char *dir_root; /* resolved; NULL: a request carrying dir is refused */
    unsigned max;   /* >= 1 */
    int64_t ready_timeout_ms;
    /* sandbox = none: started unconfined (said at every start); else in a
     * sandbox (fleetfs/spawn/sandbox.h), and refused where none can be made */
    bool unconfined;
} prof;

typedef struct {
    prof *v;
    size_t n;
} prof_set;

/* True for a config group named "profile NAME" (any NAME: a bad one is
 * refused by prof_load_group with its reason). */
bool prof_is_group(const char *group);
/* Reads group "profile NAME" of kf (path: for the messages) into set.
 * 0, or -1 and *err (g_free) naming the file, the profile, the key and
 * what is accepted. */
int prof_load_group(prof_set *set, GKeyFile *kf, const char *group, const char *path, char **err);
/* Checks the profiles against the rest of the configuration once every
 * option is known: inject (herdr | tmux | auto | none) decides which half
 * a profile needs; inject_commands (':'-separated) must hold each tmux
 * program. 0, or -1 and *err. */
int prof_check(const prof_set *set, const char *inject, const char *inject_commands, char **err);
const prof *prof_find(const prof_set *set, const char *name);
void prof_set_free(prof_set *set);

#endif
