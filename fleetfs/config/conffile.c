/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/config/conffile.c — the config file (SPEC section 8; fleetfs(1),
 * FILES): its [fleetfs] section, one [agent NAME] section per local agent
 * and the [profile NAME] sections (parsed by profile.c), read with
 * GKeyFile onto the same fs_opts and through the same setters as -o.
 *
 * A value from the file is checked exactly as from -o (options.c's table,
 * shared through opts_int.h); a refusal names the file, the section and
 * the key.  Unknown sections and keys are errors, and `config` cannot be
 * set inside a config file.  A relative path in the file is taken as the
 * file's neighbour.  [agent NAME] sections are read after [fleetfs], so an
 * agent named in agents= keeps its place in the list. */
#include "fleetfs/config/options.h"
#include "fleetfs/config/opts_int.h"
#include "fleetfs/config/profile.h"
#include "fleetfs/wire/names.h"

#include <glib.h>
#include <string.h>

/* ---- config file -------------------------------------------------------- */

static int opts_load_group(fs_opts *o, GKeyFile *kf, const char *path, char **err)
{
    char **keys = g_key_file_get_keys(kf, "fleetfs", NULL, NULL);
    int rc = 0;
    size_t i;

    for (i = 0; rc == 0 && keys != NULL && keys[i] != NULL; i++) {
        GError *ge = NULL;
        char *value, *sub = NULL;

        if (strcmp(keys[i], "config") == 0 || !opts_known(keys[i])) {
            char *q = opts_quote(keys[i]);

            *err = g_strdup_printf(strcmp(keys[i], "config") == 0
                                       ? "%s: option '%s' cannot be set inside a config file"
                                       : "%s: unknown option '%s' (see fleetfs --help)",
                                   path, q);
            g_free(q);
            rc = -1;
            break;
        }
        value = g_key_file_get_string(kf, "fleetfs", keys[i], &ge);
        if (value != NULL && opts_find(keys[i])->set == opts_set_path && value[0] != '/' &&
            value[0] != '~' && value[0] != '\0') {
            /* a relative path in a config file is the file's neighbour, not
             * something under whatever directory fleetfs was started in (/
             * under systemd) */
            char *rel = g_path_get_dirname(path);
            char *dir = g_canonicalize_filename(rel, NULL);
            char *abs = g_canonicalize_filename(value, dir);
            g_free(value);
            g_free(rel);
            g_free(dir);
            value = abs;
        }
        if (value == NULL) {
            *err = g_strdup_printf("%s: %s: %s", path, keys[i], ge->message);
            g_error_free(ge);
            rc = -1;
        } else if (opts_set(o, keys[i], value, &sub) < 0) {
            *err = g_strdup_printf("%s: %s", path, sub);
            g_free(sub);
            rc = -1;
        }
        g_free(value);
    }
    g_strfreev(keys);
    return rc;
}

#define OPTS_AGENT_SECTION "agent "

/* One value of an [agent NAME] section onto a (not yet in o). */
static int opts_agent_key(fs_agent *a, const char *key, const char *value, char **err)
{
    if (strcmp(key, "groups") == 0) {
        char **g;

        if (opts_parse_groups(key, value, &g, err) < 0)
            return -1;
        g_strfreev(a->groups);
        a->groups = g;
    } else if (strcmp(key, "target") == 0) {
        char *q = opts_quote(value);

        if (!opts_text_ok(value)) {
            *err = g_strdup_printf("target: expected 1..255 printable characters, got '%s'", q);
            g_free(q);
            return -1;
        }
        g_free(q);
        g_free(a->target);
        a->target = g_strdup(value);
    } else {
        char *q = opts_quote(key);

        *err = g_strdup_printf("unknown key '%s' (an [agent NAME] section takes groups and "
                               "target)",
                               q);
        g_free(q);
        return -1;
    }
    return 0;
}

/* [agent NAME]: declares local agent NAME, with its own groups and target. */
static int opts_load_agent(fs_opts *o, GKeyFile *kf, const char *path, const char *group,
                           char **err)
{
    const char *name = group + strlen(OPTS_AGENT_SECTION);
    char **keys = g_key_file_get_keys(kf, group, NULL, NULL);
    char *gq = opts_quote(group), *sub = NULL;
    fs_agent a;
    int rc = 0;

    memset(&a, 0, sizeof(a));
    if (!agent_name_valid(name)) {
        char *q = opts_quote(name);
        sub = g_strdup_printf("'%s' is not an agent name (expected " OPTS_AGENT_FORM ")", q);
        g_free(q);
    }
    for (size_t i = 0; sub == NULL && keys != NULL && keys[i] != NULL; i++) {
        GError *ge = NULL;
        char *value = g_key_file_get_string(kf, group, keys[i], &ge);

        if (value == NULL) {
            sub = g_strdup_printf("%s: %s", keys[i], ge->message);
            g_error_free(ge);
        } else
            opts_agent_key(&a, keys[i], value, &sub);
        g_free(value);
    }
    if (sub != NULL) {
        *err = g_strdup_printf("%s: [%s]: %s", path, gq, sub);
        rc = -1;
    } else {
        fs_agent *t = opts_agent_add(o, name);

        t->section = true;
        if (a.groups != NULL) {
            g_strfreev(t->groups);
            t->groups = g_steal_pointer(&a.groups);
        }
        if (a.target != NULL) {
            g_free(t->target);
            t->target = g_steal_pointer(&a.target);
        }
    }
    g_strfreev(a.groups);
    g_free(a.target);
    g_free(sub);
    g_free(gq);
    g_strfreev(keys);
    return rc;
}

int opts_load_file(fs_opts *o, const char *path, bool must_exist, char **err)
{
    GKeyFile *kf = g_key_file_new();
    GError *ge = NULL;
    char **groups;
    size_t i;
    int rc = 0;

    *err = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &ge)) {
        if (!must_exist && g_error_matches(ge, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            rc = 0;
        else {
            *err = g_strdup_printf("%s: %s", path, ge->message);
            rc = -1;
        }
        g_error_free(ge);
        g_key_file_free(kf);
        return rc;
    }
    groups = g_key_file_get_groups(kf, NULL);
    for (i = 0; rc == 0 && groups[i] != NULL; i++) {
        if (prof_is_group(groups[i])) {
            rc = prof_load_group(&o->profiles, kf, groups[i], path, err);
        } else if (strcmp(groups[i], "fleetfs") != 0 &&
                   !g_str_has_prefix(groups[i], OPTS_AGENT_SECTION)) {
            char *q = opts_quote(groups[i]);

            *err = g_strdup_printf("%s: unknown group [%s] (known: [fleetfs], [agent NAME], "
                                   "[profile NAME])",
                                   path, q);
            g_free(q);
            rc = -1;
        }
    }
    if (rc == 0 && g_key_file_has_group(kf, "fleetfs"))
        rc = opts_load_group(o, kf, path, err);
    /* sections after [fleetfs]: an agent named in agents= keeps its place */
    for (i = 0; rc == 0 && groups[i] != NULL; i++)
        if (g_str_has_prefix(groups[i], OPTS_AGENT_SECTION))
            rc = opts_load_agent(o, kf, path, groups[i], err);
    g_strfreev(groups);
    g_key_file_free(kf);
    return rc;
}
