/* SPDX-License-Identifier: Apache-2.0 */
/* profile.c — `[profile NAME]` sections of the config file, read and
 * checked at start (see profile.h for the format and the rules).
 *
 * Why so strict at start: a profile is what a remote request can make
 * this host run. A typo found when the first request arrives becomes a
 * `failed` answer on another host, hours later, read by someone who cannot
 * fix it; found at start it is a line on the operator's own terminal.
 * So every key is validated completely, unknown keys are errors (as in
 * [fleetfs]), and the command's program is resolved to an absolute path
 * once: a PATH change later cannot swap what a profile runs.
 *
 * Command lines are split with g_shell_parse_argv: shell-like quoting, but
 * no shell ever runs them (no expansion, no redirection, no `;`), and the
 * result is an argv handed to exec. */
#include "fleetfs/config/profile.h"
#include "fleetfs/base/duration.h"
#include "fleetfs/wire/names.h"
#include "herdr/foreground.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const prof_keys[] = {"kind", "args",          "command", "dir_root",
                                        "max",  "ready_timeout", "sandbox", NULL};

bool prof_is_group(const char *group)
{
    return g_str_has_prefix(group, PROF_GROUP_PREFIX);
}

static int prof_fail(char **err, const char *path, const char *name, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

static int prof_fail(char **err, const char *path, const char *name, const char *fmt, ...)
{
    va_list ap;
    char *msg, *q = g_strescape(name, NULL);

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    *err = g_strdup_printf("%s: [profile %s]: %s", path, q, msg);
    g_free(msg);
    g_free(q);
    return -1;
}

/* A command line into an argv; NULL and *why on a quoting error. */
static char **prof_split(const char *line, char **why)
{
    GError *ge = NULL;
    char **argv = NULL;
    int argc = 0;

    if (!g_shell_parse_argv(line, &argc, &argv, &ge)) {
        *why = g_strdup(ge->message);
        g_error_free(ge);
        return NULL;
    }
    return argv;
}

/* command = ...: split, argv[0] resolved, not a shell or a bare
 * interpreter, and the name the injector will see kept in p->program. */
static int prof_command(prof *p, const char *line, const char *path, char **err)
{
    char *why = NULL, *abs;
    char name[FG_NAME_MAX];
    fg_verdict v;
    fg_proc self = {.pid = 1, .ppid = 0, .pgrp = 1};

    p->command = prof_split(line, &why);
    if (!p->command) {
        prof_fail(err, path, p->name, "command: %s", why);
        g_free(why);
        return -1;
    }
    abs = strchr(p->command[0], '/') ? g_canonicalize_filename(p->command[0], NULL)
                                     : g_find_program_in_path(p->command[0]);
    if (!abs || access(abs, X_OK) != 0 || g_file_test(abs, G_FILE_TEST_IS_DIR)) {
        g_free(abs);
        return prof_fail(err, path, p->name,
                         "command: '%s' is not an executable program (give an absolute path, "
                         "or one found in PATH when fleetfs starts)",
                         p->command[0]);
    }
    g_free(p->command[0]);
    p->command[0] = abs;
    /* judge the argv as the injector will judge the running program */
    self.argv = p->command;
    v = fg_judge("", &self, 1, 1, NULL);
    if (v.kind == FG_SHELL || v.kind == FG_INTERPRETER || v.kind == FG_NOTHING)
        return prof_fail(err, path, p->name,
                         "command: %s is %s; fleetfs never types into one, so it cannot be "
                         "an agent: name the agent program itself",
                         v.name[0] ? v.name : p->command[0],
                         v.kind == FG_SHELL ? "a shell" : "an interpreter's prompt");
    g_strlcpy(name, v.name, sizeof name);
    p->program = g_strdup(name);
    return 0;
}

static int prof_dir_root(prof *p, const char *value, const char *path, char **err)
{
    char real[PATH_MAX];
    struct stat st;

    if (value[0] != '/')
        return prof_fail(err, path, p->name, "dir_root: expected an absolute path, got '%s'",
                         value);
    errno = 0;
    if (!realpath(value, real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return prof_fail(err, path, p->name, "dir_root: %s is not an existing directory (%s)",
                         value, errno ? g_strerror(errno) : "not a directory");
    p->dir_root = g_strdup(real);
    return 0;
}

static int prof_number(prof *p, const char *key, const char *value, const char *path, char **err)
{
    if (!strcmp(key, "max")) {
        char *end;
        long n;

        errno = 0;
        n = strtol(value, &end, 10);
        if (errno || end == value || *end || n < 1 || n > 1000)
            return prof_fail(err, path, p->name, "max: expected a number 1..1000, got '%s'", value);
        p->max = (unsigned)n;
        return 0;
    }
    if (parse_duration(value, &p->ready_timeout_ms) < 0 ||
        p->ready_timeout_ms < PROF_TIMEOUT_MIN_MS || p->ready_timeout_ms > PROF_TIMEOUT_MAX_MS)
        return prof_fail(err, path, p->name,
                         "ready_timeout: expected a duration over 3s and at most 5m, got '%s'",
                         value);
    return 0;
}

static int prof_key(prof *p, const char *key, const char *value, const char *path, char **err)
{
    char *why = NULL;

    if (!strcmp(key, "kind")) {
        if (!agent_name_valid(value))
            return prof_fail(err, path, p->name,
                             "kind: expected a herdr agent kind ([a-z][a-z0-9_-]{0,31}, e.g. "
                             "claude), got '%s'",
                             value);
        p->kind = g_strdup(value);
    } else if (!strcmp(key, "args")) {
        p->args = value[0] ? prof_split(value, &why) : g_new0(char *, 1);
        if (!p->args) {
            prof_fail(err, path, p->name, "args: %s", why);
            g_free(why);
            return -1;
        }
    } else if (!strcmp(key, "command")) {
        return prof_command(p, value, path, err);
    } else if (!strcmp(key, "dir_root")) {
        return prof_dir_root(p, value, path, err);
    } else if (!strcmp(key, "sandbox")) {
        if (strcmp(value, "bwrap") && strcmp(value, "none"))
            return prof_fail(err, path, p->name,
                             "sandbox: expected bwrap (the default) or none (the agent runs "
                             "unconfined, with this daemon's reach), got '%s'",
                             value);
        p->unconfined = !strcmp(value, "none");
    } else {
        return prof_number(p, key, value, path, err);
    }
    return 0;
}

static bool prof_known(const char *key)
{
    for (const char *const *k = prof_keys; *k; k++)
        if (!strcmp(*k, key))
            return true;
    return false;
}

static void prof_clear(prof *p)
{
    g_free(p->name);
    g_free(p->kind);
    g_strfreev(p->args);
    g_strfreev(p->command);
    g_free(p->program);
    g_free(p->dir_root);
    memset(p, 0, sizeof *p);
}

static int prof_read(prof *p, GKeyFile *kf, const char *group, const char *path, char **err)
{
    char **keys = g_key_file_get_keys(kf, group, NULL, NULL);
    int rc = 0;

    for (size_t i = 0; rc == 0 && keys && keys[i]; i++) {
        char *value;

        if (!prof_known(keys[i])) {
            rc = prof_fail(err, path, p->name,
                           "unknown key '%s' (a profile has kind, args, command, dir_root, "
                           "max, ready_timeout, sandbox)",
                           keys[i]);
            break;
        }
        value = g_key_file_get_string(kf, group, keys[i], NULL);
        rc = value ? prof_key(p, keys[i], g_strstrip(value), path, err)
                   : prof_fail(err, path, p->name, "%s: not a string", keys[i]);
        g_free(value);
    }
    g_strfreev(keys);
    if (rc == 0 && p->args && !p->kind)
        rc = prof_fail(err, path, p->name, "args without kind (args are for herdr's agent.start)");
    if (rc == 0 && !p->kind && !p->command)
        rc = prof_fail(err, path, p->name,
                       "neither kind (herdr) nor command (tmux): nothing to start");
    if (rc == 0 && p->kind && !p->args)
        p->args = g_new0(char *, 1);
    return rc;
}

int prof_load_group(prof_set *set, GKeyFile *kf, const char *group, const char *path, char **err)
{
    const char *name = group + strlen(PROF_GROUP_PREFIX);
    prof p = {.max = 1, .ready_timeout_ms = 30000};

    *err = NULL;
    p.name = g_strdup(name);
    if (!prof_is_group(group) || !agent_name_valid(name)) {
        prof_fail(err, path, name, "a profile name is [a-z][a-z0-9_-]{0,31}");
        prof_clear(&p);
        return -1;
    }
    if (prof_find(set, name)) {
        prof_fail(err, path, name, "given twice");
        prof_clear(&p);
        return -1;
    }
    if (prof_read(&p, kf, group, path, err) < 0) {
        prof_clear(&p);
        return -1;
    }
    set->v = g_renew(prof, set->v, set->n + 1);
    set->v[set->n++] = p;
    return 0;
}

static bool prof_listed(const char *name, const char *list)
{
    char **v = g_strsplit(list ? list : "", ":", -1);
    bool hit = g_strv_contains((const char *const *)v, name);

    g_strfreev(v);
    return hit;
}

int prof_check(const prof_set *set, const char *inject, const char *inject_commands, char **err)
{
    *err = NULL;
    for (size_t i = 0; i < set->n; i++) {
        const prof *p = &set->v[i];
        bool herdr = !strcmp(inject, "herdr") || !strcmp(inject, "auto");

        if (!strcmp(inject, "none"))
            *err = g_strdup_printf("[profile %s]: inject=none: there is no terminal to start an "
                                   "agent in (set inject=herdr or tmux, or remove the profile)",
                                   p->name);
        else if (herdr && !p->kind)
            *err = g_strdup_printf("[profile %s]: inject=%s starts agents through herdr, and "
                                   "this profile has no kind",
                                   p->name, inject);
        else if (!strcmp(inject, "tmux") && !p->command)
            *err = g_strdup_printf("[profile %s]: inject=tmux starts a command, and this "
                                   "profile has none",
                                   p->name);
        else if (!strcmp(inject, "tmux") && !prof_listed(p->program, inject_commands))
            *err = g_strdup_printf("[profile %s]: command runs %s, which is not in "
                                   "inject_commands: fleetfs would never type into it (add it "
                                   "to inject_commands if it is an agent)",
                                   p->name, p->program);
        if (*err)
            return -1;
    }
    return 0;
}

const prof *prof_find(const prof_set *set, const char *name)
{
    for (size_t i = 0; set && name && i < set->n; i++)
        if (!strcmp(set->v[i].name, name))
            return &set->v[i];
    return NULL;
}

void prof_set_free(prof_set *set)
{
    for (size_t i = 0; set && i < set->n; i++)
        prof_clear(&set->v[i]);
    if (set) {
        g_free(set->v);
        set->v = NULL;
        set->n = 0;
    }
}
