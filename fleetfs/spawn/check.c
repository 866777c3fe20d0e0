/* SPDX-License-Identifier: Apache-2.0 */
/* check.c — the far host's decision on a spawn or stop request.
 *
 * The order of the checks is the order of what a requester may learn:
 * one not in spawn_from learns nothing but that (not which profiles
 * exist, nor which names are taken); the shape of the request next; then
 * the profile, the name, the directory and the count.
 *
 * The directory is the one path a request may carry. It is taken relative
 * to dir_root (an absolute one must lie inside it anyway), resolved with
 * realpath — every symlink and every `..` followed — and the result must
 * be dir_root itself or below it, and a directory. Comparing the resolved
 * path, never the text, is what defeats `..`, a symlink planted inside
 * dir_root that points out, and a dir_root reached through a symlink
 * (dir_root itself is resolved at start, profile.c). What is resolved is
 * what is used: the caller passes out->dir on, never the request's text.
 * Someone who can write inside dir_root can still swap a directory for a
 * symlink between this check and the start (doc/security.md says so). */
#include "fleetfs/spawn/check.h"
#include "fleetfs/wire/names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *sc_verdict_name(sc_verdict v)
{
    switch (v) {
    case SC_OK:
        return "ok";
    case SC_NOT_ALLOWED:
        return "requester not in spawn_from";
    case SC_MALFORMED:
        return "malformed request";
    case SC_UNKNOWN_PROFILE:
        return "unknown profile";
    case SC_BAD_NAME:
        return "invalid name";
    case SC_NAME_TAKEN:
        return "name taken";
    case SC_BAD_DIR:
        return "dir not allowed";
    case SC_OVER_MAX:
        return "over max";
    case SC_NOT_OURS:
        return "not an agent this host started";
    case SC_NO_SANDBOX:
        return "no sandbox";
    }
    return "?";
}

static sc_verdict sc_say(sc_verdict v, char *why, size_t n, const char *fmt, const char *arg)
{
    char detail[512];

    snprintf(detail, sizeof detail, fmt, arg);
    snprintf(why, n, "%s: %s", sc_verdict_name(v), detail);
    return v;
}

static bool sc_allowed(const sc_host *h, const char *requester)
{
    for (const char *const *p = h->spawn_from; p && *p; p++)
        if (!strcmp(*p, requester))
            return true;
    return false;
}

/* dir (relative to root, or absolute) resolved into out; SC_OK or why. */
static sc_verdict sc_dir(const prof *p, const char *dir, char out[PATH_MAX], char *why, size_t n)
{
    char joined[PATH_MAX * 2];
    size_t rl;
    struct stat st;

    out[0] = '\0';
    if (!dir[0])
        return SC_OK;
    if (!p->dir_root)
        return sc_say(SC_BAD_DIR, why, n, "profile %s has no dir_root, so no dir is accepted",
                      p->name);
    if (dir[0] == '/')
        snprintf(joined, sizeof joined, "%s", dir);
    else
        snprintf(joined, sizeof joined, "%s/%s", p->dir_root, dir);
    errno = 0;
    if (!realpath(joined, out) || stat(out, &st) != 0) {
        out[0] = '\0';
        return sc_say(SC_BAD_DIR, why, n, "%s does not exist here", dir);
    }
    rl = strlen(p->dir_root);
    if (strncmp(out, p->dir_root, rl) != 0 ||
        (out[rl] != '\0' && out[rl] != '/' && strcmp(p->dir_root, "/") != 0)) {
        out[0] = '\0';
        return sc_say(SC_BAD_DIR, why, n, "%s resolves outside the profile's dir_root", dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        out[0] = '\0';
        return sc_say(SC_BAD_DIR, why, n, "%s is not a directory", dir);
    }
    return SC_OK;
}

sc_verdict sc_check_spawn(const sc_host *h, const ctl_env *e, sc_spawn *out, char *why, size_t n)
{
    const prof *p;
    sc_verdict v;

    memset(out, 0, sizeof *out);
    why[0] = '\0';
    if (!sc_allowed(h, e->from))
        return sc_say(SC_NOT_ALLOWED, why, n, "%s may not start agents here", e->from);
    if (strcmp(e->type, CTL_TYPE_SPAWN) != 0)
        return sc_say(SC_MALFORMED, why, n, "a %s is not a spawn request", e->type);
    if (!(p = prof_find(h->profiles, e->profile)))
        return sc_say(SC_UNKNOWN_PROFILE, why, n, "no profile %s here", e->profile);
    if (!agent_name_valid(e->name))
        return sc_say(SC_BAD_NAME, why, n, "%s is not [a-z][a-z0-9_-]{0,31}", e->name);
    if (!strcmp(e->name, h->coord_id) || (h->name_taken && h->name_taken(e->name, h->arg)))
        return sc_say(SC_NAME_TAKEN, why, n, "%s is in use on this host", e->name);
    if ((v = sc_dir(p, e->dir, out->dir, why, n)) != SC_OK)
        return v;
    if (h->running && h->running(p, h->arg) >= p->max) {
        char max[64];

        snprintf(max, sizeof max, "%u of profile %s", p->max, p->name);
        out->dir[0] = '\0';
        return sc_say(SC_OVER_MAX, why, n, "%s run already", max);
    }
    out->profile = p;
    snprintf(out->name, sizeof out->name, "%s", e->name);
    snprintf(out->gid, sizeof out->gid, "%s@%s", e->name, h->coord_id);
    return SC_OK;
}

sc_verdict sc_check_stop(const sc_host *h, const ctl_env *e, char *why, size_t n)
{
    char host[NAME_MAX_LEN + 1];

    why[0] = '\0';
    if (!sc_allowed(h, e->from))
        return sc_say(SC_NOT_ALLOWED, why, n, "%s may not stop agents here", e->from);
    if (strcmp(e->type, CTL_TYPE_STOP) != 0)
        return sc_say(SC_MALFORMED, why, n, "a %s is not a stop request", e->type);
    if (!gid_valid(e->gid) || !id_host(e->gid, host))
        return sc_say(SC_MALFORMED, why, n, "%s is not an agent id (name@host)", e->gid);
    if (strcmp(host, h->coord_id) != 0 || !h->spawned_here || !h->spawned_here(e->gid, h->arg))
        return sc_say(SC_NOT_OURS, why, n, "%s was not started by this fleetfs", e->gid);
    return SC_OK;
}
