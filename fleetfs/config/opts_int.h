/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/config/opts_int.h — inside the option set; for fleetfs/config/ only.
 *
 * What options.c (the option table, its setters, --help) shares with
 * conffile.c (the config file's sections) and optset.c (an option set's
 * defaults, its checks across options, its free): the
 * table's entry type, the look-up, and the few checks and helpers a
 * section's value goes through, so that a value from fleetfs.conf is
 * checked, refused and quoted exactly as the same value from -o.
 */
#ifndef FLEETFS_CONFIG_OPTS_INT_H
#define FLEETFS_CONFIG_OPTS_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/config/options.h"

#define OPTS_AGENT_FORM "[a-z][a-z0-9_-]{0,31}"
#define OPTS_NAME_FORM "[a-z0-9][a-z0-9_-]{0,62}"
#define OPTS_DAY_MS (24LL * 3600 * 1000)

struct opts_def;
typedef int (*opts_setter)(fs_opts *o, const struct opts_def *d, const char *value, char **err);

struct opts_def {
    const char *key;
    opts_setter set;
    size_t off;          /* field offset, for the generic setters */
    const char *choices; /* '|'-separated, for opts_set_choice */
    const char *defval;  /* for --help */
    const char *help;
};

/* The table's entry for key, or NULL. */
const struct opts_def *opts_find(const char *key);
/* The setter of every path option (a config file resolves a relative path
 * against its own directory before it). */
int opts_set_path(fs_opts *o, const struct opts_def *d, const char *value, char **err);
/* Printable UTF-8 without control characters, 1..255 bytes. */
bool opts_text_ok(const char *s);
/* The value quoted for an error message, anything unprintable escaped
 * (g_free it). */
char *opts_quote(const char *value);
/* A group list: group names, at most OPTS_MAX_GROUPS, never "all"; 0 and
 * *out (g_strfreev), or -1 and *err. */
int opts_parse_groups(const char *key, const char *value, char ***out, char **err);
/* Local agent name in o, added (at the end) when it is not there yet. */
fs_agent *opts_agent_add(fs_opts *o, const char *name);
/* What an fs_agent owns, freed (optset.c's opts_free). */
void opts_agent_clear(fs_agent *a);

#endif
