/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/claim.c — claims through the mounted files (claim.h): the
 * CLI `fleetfs claim` and the tools fleet_claim, fleet_release and
 * fleet_claims.  Like the rest of mcp/, it never speaks to the broker: a
 * mkdir, an rmdir, a write of the note and reads of claims/ are the whole
 * interface, and what they answer is what the daemon was granted. */
#include "fleetfs/mcp/claim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/base/duration.h"
#include "fleetfs/os/os.h"
#include "fleetfs/mcp/mount.h"
#include "fleetfs/mcp/tools_int.h"

#define CLAIMS_LIST_MAX 1000

/* The claims directory a caller acts in: the lead's <mnt>/claims, or an
 * agent's own <mnt>/agents/<gid>/claims (its takes name it as holder;
 * doc/claims.md, "Agents as holders"). g_free. */
static char *claims_dir(const char *mnt, const char *as)
{
    return as ? g_strdup_printf("%s/agents/%s/claims", mnt, as) : g_strdup_printf("%s/claims", mnt);
}

static json_t *read_holder(const char *dir, const char *name)
{
    char *path = g_strdup_printf("%s/%s/holder", dir, name);
    json_t *j = json_load_file(path, 0, NULL);
    g_free(path);
    return j;
}

int mcp_claim_take(const char *dir, const char *name, int wait_ms, const char *note, int lease_s,
                   json_t **holder)
{
    char *path = g_strdup_printf("%s/%s", dir, name);
    gint64 until = g_get_monotonic_time() + (gint64)wait_ms * 1000;
    os_dirwatch *w = NULL;
    bool watched = false;
    int err;

    *holder = NULL;
    for (;;) {
        gint64 left, next;
        if (mkdir(path, 0700) == 0) {
            err = 0;
            break;
        }
        err = errno;
        if (err == EEXIST && lease_s > 0) { /* ours: renewed below, not waited for */
            json_t *h = read_holder(dir, name);
            bool mine = json_is_true(json_object_get(h, "mine"));
            json_decref(h);
            if (mine)
                break;
        }
        left = (until - g_get_monotonic_time()) / 1000;
        if (err != EEXIST || left <= 0)
            break;
        if (!watched) { /* watch first, then try again: no release is missed */
            watched = true;
            if ((w = os_dirwatch_open(dir, "")))
                continue;
        }
        /* try again on a change in claims/ (a release: inotify on Linux,
         * kqueue on macOS), seen within 50 ms, and once a second anyway;
         * without a watch (the portable build), once a second */
        next = g_get_monotonic_time() + MIN(left, 1000) * 1000;
        while (g_get_monotonic_time() < next) {
            bool ended = false;
            g_usleep(w ? 50000 : (gulong)MIN(left, 1000) * 1000);
            if (!w || os_dirwatch_read(w, &ended) > 0)
                break;
            if (ended) {
                os_dirwatch_close(w);
                w = NULL;
                watched = false;
                break;
            }
        }
    }
    os_dirwatch_close(w);
    if (err == EEXIST && lease_s > 0) { /* ours already: a renewal */
        json_t *h = read_holder(dir, name);
        if (json_is_true(json_object_get(h, "mine")))
            err = 0;
        json_decref(h);
    }
    if (!err && lease_s > 0) {
        char *lp = g_strdup_printf("%s/lease", path), secs[24];
        snprintf(secs, sizeof secs, "%d", lease_s);
        if (mt_write_once(lp, secs, strlen(secs)) != 0)
            err = errno; /* lost meanwhile (ENOENT), or not ours to renew (EPERM) */
        g_free(lp);
    }
    if (!err && note && *note) {
        char *np = g_strdup_printf("%s/note", path);
        if (mt_write_once(np, note, strlen(note)) != 0)
            fprintf(stderr, "fleetfs claim: the note was not written (%s)\n", g_strerror(errno));
        g_free(np);
    }
    if (!err || err == EEXIST)
        *holder = read_holder(dir, name);
    g_free(path);
    return err;
}

/* ---- the tools ---------------------------------------------------------- */

static const char *why_not(int err)
{
    switch (err) {
    case EEXIST:
        return "held by another (see holder)";
    case EINVAL:
        return "not a valid claim name";
    case ENOTCONN:
        return "the mount has no connection to the broker now: nothing was taken; try again "
               "later";
    case EAGAIN:
        return "the broker did not answer in time: nothing is held; try again";
    case ENOSPC:
        return "this host holds too many claims; release some";
    case ENOENT:
        return "no such claim (or no claims/ in this mount: is fleetfs mounted there?)";
    case EPERM:
        return "the claim is not yours: only its holder releases it (and the lead of its host "
               "releases its agents' claims)";
    default:
        return g_strerror(err);
    }
}

json_t *mt_claim(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"name", "wait", "note", "lease", NULL};
    json_t *bad = mt_only_keys(args, "fleet_claim", keys), *holder = NULL, *res;
    const char *name = json_string_value(json_object_get(args, "name"));
    const char *note = json_string_value(json_object_get(args, "note"));
    json_t *jw = json_object_get(args, "wait"), *jl = json_object_get(args, "lease");
    int wait = jw ? (int)json_integer_value(jw) : 0, err;
    json_int_t lease = jl ? json_integer_value(jl) : 0;
    char *dir;

    if (bad)
        return bad;
    if (!name || !name_valid(name))
        return mt_fail("fleet_claim: name must match [a-z0-9][a-z0-9_-]{0,62}");
    if ((jw && !json_is_integer(jw)) || wait < 0 || wait > MCP_CLAIM_MAX_WAIT)
        return mt_fail("fleet_claim: wait is whole seconds, 0 to %d", MCP_CLAIM_MAX_WAIT);
    if (jl && (!json_is_integer(jl) || lease < 1 || lease > 86400))
        return mt_fail("fleet_claim: lease is whole seconds, 1 to 86400");
    dir = claims_dir(w->mnt, w->as);
    err = mcp_claim_take(dir, name, wait * 1000, note, (int)lease, &holder);
    g_free(dir);
    if (!err)
        return mt_ok_json(holder ? holder : json_pack("{s:s}", "name", name));
    res = mt_fail("fleet_claim %s: %s%s%s", name, why_not(err),
                  holder && json_string_value(json_object_get(holder, "holder")) ? ": " : "",
                  holder ? json_string_value(json_object_get(holder, "holder")) ?: "" : "");
    if (holder)
        json_object_set_new(res, "structuredContent", holder);
    return res;
}

json_t *mt_release(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"name", NULL};
    json_t *bad = mt_only_keys(args, "fleet_release", keys);
    const char *name = json_string_value(json_object_get(args, "name"));
    char *path, *dir;
    int err;

    if (bad)
        return bad;
    if (!name || !name_valid(name))
        return mt_fail("fleet_release: name must match [a-z0-9][a-z0-9_-]{0,62}");
    dir = claims_dir(w->mnt, w->as);
    path = g_strdup_printf("%s/%s", dir, name);
    g_free(dir);
    err = rmdir(path) == 0 ? 0 : errno;
    g_free(path);
    if (err)
        return mt_fail("fleet_release %s: %s", name, why_not(err));
    return mt_ok_json(json_pack("{s:s,s:b}", "name", name, "released", 1));
}

json_t *mt_claims(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {NULL};
    json_t *bad = mt_only_keys(args, "fleet_claims", keys), *list;
    char *dir;
    GDir *d;
    const char *n;
    unsigned count = 0;
    bool more = false;

    if (bad)
        return bad;
    dir = claims_dir(w->mnt, w->as);
    d = g_dir_open(dir, 0, NULL);
    if (!d) {
        json_t *res = mt_fail("fleet_claims: cannot list %s: is fleetfs mounted there?", dir);
        g_free(dir);
        return res;
    }
    list = json_array();
    while ((n = g_dir_read_name(d))) {
        json_t *h;
        if (count == CLAIMS_LIST_MAX) {
            more = true;
            break;
        }
        h = read_holder(dir, n);
        if (h) { /* gone since the listing: left out */
            json_array_append_new(list, h);
            count++;
        }
    }
    g_dir_close(d);
    g_free(dir);
    return mt_ok_json(json_pack("{s:o,s:i,s:b}", "claims", list, "count", count, "more", more));
}

/* ---- fleetfs claim ------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to, "usage: fleetfs claim [MOUNTPOINT] NAME [--wait SECONDS] [--note TEXT] [--as GID]\n"
                "                    [--lease SECONDS]\n"
                "\n"
                "Takes NAME for this host across the fleet (mkdir MOUNTPOINT/claims/NAME) and\n"
                "prints its fencing token, a number that grows with every grant of NAME.\n"
                "--wait: when another holds it, wait up to SECONDS for its release and try\n"
                "again. --note: what it is taken for, shown to every host. Release it with\n"
                "rmdir MOUNTPOINT/claims/NAME. Without MOUNTPOINT: $FLEET, else your only\n"
                "fleetfs mount. Exit status: 0 taken, 3 held by another (its holder on\n"
                "stderr), 4 the broker unreachable or not answering (nothing taken), 2 usage\n"
                "or a bad name, 1 any other failure. --as GID: take it for that local agent\n"
                "(mkdir MOUNTPOINT/agents/GID/claims/NAME; the holder record names it).\n"
                "--lease SECONDS: the claim is given up unless renewed within SECONDS (run\n"
                "the same command again, or write SECONDS to .../claims/NAME/lease); a\n"
                "claim this mount holds already is renewed.\n");
}

int mcp_claim_main(int argc, char **argv)
{
    const char *pos[2], *wait = NULL, *note = NULL, *as = NULL, *lease = NULL;
    int npos = 0, err, secs = 0, lease_s = 0;
    char *mnt, *end, *dir;
    json_t *holder = NULL;

    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--wait") && i + 1 < argc && !wait) {
            wait = argv[++i];
        } else if (!strcmp(argv[i], "--note") && i + 1 < argc && !note) {
            note = argv[++i];
        } else if (!strcmp(argv[i], "--as") && i + 1 < argc && !as) {
            as = argv[++i];
        } else if (!strcmp(argv[i], "--lease") && i + 1 < argc && !lease) {
            lease = argv[++i];
        } else if ((argv[i][0] == '-' && argv[i][1]) || npos == 2) {
            fprintf(stderr, "fleetfs claim: unexpected '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos < 1) {
        usage(stderr);
        return 2;
    }
    if (wait) {
        long v = strtol(wait, &end, 10);
        if (*end || v < 0 || v > 86400) {
            fprintf(stderr, "fleetfs claim: --wait %s: give whole seconds, 0 to 86400\n", wait);
            return 2;
        }
        secs = (int)v;
    }
    if (lease) {
        long v = strtol(lease, &end, 10);
        if (*end || v < 1 || v > 86400) {
            fprintf(stderr, "fleetfs claim: --lease %s: give whole seconds, 1 to 86400\n", lease);
            return 2;
        }
        lease_s = (int)v;
    }
    if (!name_valid(pos[npos - 1])) {
        fprintf(stderr,
                "fleetfs claim: '%s' is not a claim name ([a-z0-9] then up to 62 of "
                "[a-z0-9_-])\n",
                pos[npos - 1]);
        return 2;
    }
    mnt = mcp_pick_mount(npos == 2 ? pos[0] : NULL, "claim");
    if (!mnt)
        return 2;
    if (as && !gid_valid(as)) {
        fprintf(stderr, "fleetfs claim: --as %s: not an agent's gid (name@host)\n", as);
        g_free(mnt);
        return 2;
    }
    dir = claims_dir(mnt, as);
    err = mcp_claim_take(dir, pos[npos - 1], secs * 1000, note, lease_s, &holder);
    g_free(dir);
    if (!err) {
        printf("%lld\n", (long long)json_integer_value(json_object_get(holder, "token")));
    } else if (err == EEXIST) {
        const char *h = json_string_value(json_object_get(holder, "holder"));
        fprintf(stderr, "fleetfs claim: %s is held by %s%s\n", pos[npos - 1],
                h ? h : "another host (not heard from yet)",
                secs ? " and was not released in time" : "");
    } else {
        fprintf(stderr, "fleetfs claim: %s: %s\n", pos[npos - 1], why_not(err));
    }
    json_decref(holder);
    g_free(mnt);
    return !err                                               ? 0
           : err == EEXIST                                    ? 3
           : err == ENOTCONN || err == EAGAIN                 ? 4
           : err == EINVAL || err == ENOENT || err == ENOTDIR ? 2
                                                              : 1;
}
