/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/paths.c — the tree's names (SPEC section 2): which path is
 * which node (tr_resolve_node: the lead's home, peers, agents, groups,
 * hosts, replies), what kind of node takes writes or sends, and what each
 * directory lists (tr_dir_list).  Nothing here answers the kernel: tree.c
 * does, with these.
 */
#include "fleetfs/face/tree_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/agents/agents.h"
#include "fleetfs/face/claims.h"
#include "fleetfs/face/hosts.h"
#include "fleetfs/face/status.h"

void tr_node_clear(node *n)
{
    mb_unref(n->home);
    n->home = NULL;
}

/* The tree belongs to the mounting user (modes 0600/0400/0200, dirs
 * 0500, nothing for group and others).  Without allow_other the kernel
 * already keeps everyone else out; with it, these modes are enforced
 * here: another user may see that the mount point is a directory, and
 * gets EACCES for everything else. */
bool tr_outsider(const rq *r)
{
    return r->cx->uid != r->f->uid && r->cx->uid != 0;
}

/* fleet_view=groups (and auto narrowed): a lead we do not hear is still
 * reachable by name (while we hear the whole fleet, one not heard is not
 * there, as with fleet_view=all).
 * Its mailbox is probed (one passive declare, bounded by probe_timeout);
 * when it is there the lead is addressed: listed in peers/, its heartbeats
 * bound, and asked for one now (doc/presence.md).  An absent mailbox is
 * not probed again for 2 s. */
static bool address_by_name(const fleet *f, const char *name)
{
    char queue[128];
    br_probe p;

    if (!pr_scoped(f->pr) || pr_wide(f->pr) || !f->opts->discovery ||
        !strcmp(name, f->opts->coord_id) || pr_absent_recent(f->pr, name))
        return false;
    br_inbox_queue(name, queue, sizeof queue);
    memset(&p, 0, sizeof p);
    if (br_probe_queue(f->br, queue, 1000, f->opts->probe_timeout_ms, &p) != FE_OK || !p.valid ||
        !p.present) {
        if (p.valid && !p.present)
            pr_absent(f->pr, name);
        return false;
    }
    pr_address(f->pr, name);
    return pr_is_peer(f->pr, name);
}

bool fleet_is_peer(const fleet *f, const char *name)
{
    if (!name_valid(name))
        return false;
    for (char **p = f->opts->peers; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return true;
    /* presence: a discovered (or addressed) lead is a peer while it is listed */
    return f->pr && pr_is_peer(f->pr, name);
}

static bool local_gid(const fleet *f, const char *gid)
{
    mailbox *m = mb_find(f->mb, gid);
    mb_unref(m);
    return m != NULL;
}

/* agents/<gid> of a host we did not hear: its host is addressed (asked for
 * its heartbeat, which lists its agents); wait for that heartbeat, at most
 * probe_timeout. */
static bool address_agent(const fleet *f, const char *gid)
{
    char host[NAME_MAX_LEN + 1];
    pr_info i;
    int64_t until;

    if (!id_host(gid, host) || local_gid(f, gid) || (pr_get(f->pr, host, &i) && i.age_ms >= 0))
        return false; /* ours, or its host is heard: no such agent */
    address_by_name(f, host);
    if (!pr_get(f->pr, host, &i))
        return false; /* no mailbox of that host */
    until = g_get_monotonic_time() / 1000 + f->opts->probe_timeout_ms;
    while (!ag_heard(f->ag, gid) && g_get_monotonic_time() / 1000 < until &&
           !(pr_get(f->pr, host, &i) && i.age_ms >= 0))
        g_usleep(5000);
    return ag_heard(f->ag, gid);
}

bool tr_address_peer(const fleet *f, const char *path)
{
    gchar **c = g_strsplit(path + 1, "/", 3);
    bool ok = false;
    if (f->pr && c[0] && c[1] && !strcmp(c[0], "peers") && name_valid(c[1]))
        ok = address_by_name(f, c[1]);
    else if (f->pr && c[0] && c[1] && !strcmp(c[0], "hosts") && name_valid(c[1]))
        ok = (address_by_name(f, c[1]), hs_known(f, c[1]));
    else if (f->pr && c[0] && c[1] && !strcmp(c[0], "agents") && gid_valid(c[1]) &&
             pr_scoped(f->pr) && f->opts->discovery)
        ok = address_agent(f, c[1]);
    g_strfreev(c);
    return ok;
}

/* The files of a home (the lead's or a local agent's). */
static node_kind home_file(const char *s, bool lead)
{
    static const struct {
        const char *name;
        node_kind kind;
    } files[] = {{"inbox", N_INBOX},        {"ack", N_ACK},       {"history", N_HISTORY},
                 {"sent", N_SENT},          {"resend", N_RESEND}, {"reply", N_HREPLYDIR},
                 {"submitted", N_SUBMITTED}};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
        if (strcmp(s, files[i].name) == 0)
            return files[i].kind;
    if (!strcmp(s, "status"))
        return lead ? N_LSTATUS : N_ASTATUS;
    if (!lead && !strcmp(s, "to"))
        return N_TODIR;
    if (!lead && !strcmp(s, "send"))
        return N_ASEND;
    if (!lead && !strcmp(s, "send.json"))
        return N_ASENDJ;
    if (!lead && !strcmp(s, "ask"))
        return N_ASK;
    if (!lead && !strcmp(s, "ask.json"))
        return N_ASKJ;
    return N_NONE;
}

static node_kind peer_file(const fleet *f, gchar **c, guint n, char ref[ENV_ID_LEN + 1])
{
    if (n == 3)
        return !strcmp(c[2], "send")        ? N_SEND
               : !strcmp(c[2], "send.json") ? N_SENDJ
               : !strcmp(c[2], "ask")       ? N_ASK
               : !strcmp(c[2], "ask.json")  ? N_ASKJ
               : !strcmp(c[2], "status")    ? N_PSTATUS
               : !strcmp(c[2], "reply")     ? N_REPLYDIR
                                            : N_NONE;
    /* only a message this peer sent us can be answered */
    if (n == 4 && !strcmp(c[2], "reply") && mb_known_from(f->mb, c[3], c[1])) {
        g_strlcpy(ref, c[3], ENV_ID_LEN + 1);
        return N_REPLY;
    }
    return N_NONE;
}

/* c[2..] under a home: its files, reply/<msgId> (a message someone sent
 * it), to/<target> (local agents: any address). */
static node_kind home_path(node *out, gchar **c, guint n, bool lead)
{
    node_kind k = home_file(c[2], lead);
    if (n == 3)
        return k;
    if (n == 4 && k == N_HREPLYDIR && mb_sender_of(out->home, c[3], out->name, sizeof out->name)) {
        g_strlcpy(out->ref, c[3], sizeof out->ref);
        return N_HREPLY;
    }
    if (n == 4 && k == N_TODIR && addr_parse(c[3], &(addr){0})) {
        g_strlcpy(out->name, c[3], sizeof out->name);
        return N_TO;
    }
    /* to/<target>.json, .ask, .ask.json: no address has a '.', so what
     * follows the first one is the form */
    if (n == 4 && k == N_TODIR && strchr(c[3], '.')) {
        const char *form = strchr(c[3], '.');
        node_kind fk = !strcmp(form, ".json")       ? N_TOJ
                       : !strcmp(form, ".ask")      ? N_TOASK
                       : !strcmp(form, ".ask.json") ? N_TOASKJ
                                                    : N_NONE;
        g_strlcpy(out->name, c[3], MIN(sizeof out->name, (size_t)(form - c[3]) + 1));
        if (fk != N_NONE && addr_parse(out->name, &(addr){0}))
            return fk;
        out->name[0] = '\0';
    }
    return N_NONE;
}

/* c[0] is "claims" (the lead's claims/, or claims/ in a local agent's
 * home: the same listing, taken and released as that agent): claims/,
 * claims/NAME/, its holder and note. */
static node_kind claim_path(const fleet *f, node *out, gchar **c, guint n)
{
    if (n == 1)
        return N_CLAIMS;
    if (!cl_known(f->cl, c[1]))
        return N_NONE;
    g_strlcpy(out->name, c[1], sizeof out->name);
    return n == 2                              ? N_CLAIM
           : n == 3 && !strcmp(c[2], "holder") ? N_CHOLDER
           : n == 3 && !strcmp(c[2], "note")   ? N_CNOTE
           : n == 3 && !strcmp(c[2], "lease")  ? N_CLEASE
                                               : N_NONE;
}

/* mkdir (take) or rmdir (release) of claims/NAME, for the lead, or of
 * agents/<local gid>/claims/NAME, for that agent (face/claims.h has the
 * rule of who releases what): 0 or -errno; 1: path is neither. */
int tr_claim_op(const rq *r, const char *path, bool take)
{
    gchar **c = g_strsplit(path + 1, "/", 0);
    guint n = g_strv_length(c);
    mailbox *home = NULL;
    const char *name = NULL, *agent;
    int rc = 1;

    if (n == 2 && !strcmp(c[0], "claims"))
        name = c[1];
    else if (n == 4 && !strcmp(c[0], "agents") && !strcmp(c[2], "claims") && gid_valid(c[1]) &&
             (home = mb_find(r->f->mb, c[1])))
        name = c[3];
    if (name && tr_outsider(r)) {
        rc = -EACCES;
    } else if (name) {
        agent = home ? mb_id(home) : NULL;
        rc = -(take ? cl_mkdir(r->f->cl, name, agent) : cl_release(r->f->cl, name, agent));
    }
    mb_unref(home);
    g_strfreev(c);
    return rc;
}

/* agents/<gid>/...: a local agent's home, or a remote agent's send and
 * status.  The model is asked once (mb_find), presence only for a gid the
 * model does not have. */
static node_kind agent_path(const fleet *f, node *out, gchar **c, guint n)
{
    mailbox *home = gid_valid(c[1]) ? mb_find(f->mb, c[1]) : NULL;
    if (!home && !ag_heard(f->ag, c[1]))
        return N_NONE;
    g_strlcpy(out->name, c[1], sizeof out->name);
    out->home = home; /* NULL for a remote agent */
    if (n == 2)
        return N_AGENT;
    if (!home)
        return n == 3 && !strcmp(c[2], "send")        ? N_ASEND
               : n == 3 && !strcmp(c[2], "send.json") ? N_ASENDJ
               : n == 3 && !strcmp(c[2], "ask")       ? N_ASK
               : n == 3 && !strcmp(c[2], "ask.json")  ? N_ASKJ
               : n == 3 && !strcmp(c[2], "status")    ? N_ASTATUS
                                                      : N_NONE;
    if (!strcmp(c[2], "claims"))
        return claim_path(f, out, c + 2, n - 2);
    return home_path(out, c, n, false);
}

/* path -> node (node_clear it). */
void tr_resolve_node(const fleet *f, const char *path, node *out)
{
    gchar **c = g_strsplit(path + 1, "/", 0);
    guint n = g_strv_length(c);
    node_kind k = N_NONE;

    memset(out, 0, sizeof *out);
    if (n == 0 || (n == 1 && !c[0][0]))
        k = N_ROOT;
    else if (n == 1)
        k = !strcmp(c[0], "README")   ? N_README
            : !strcmp(c[0], "status") ? N_STATUS
            : !strcmp(c[0], "self")   ? N_SELF
            : !strcmp(c[0], "leads")  ? N_LEADS
            : !strcmp(c[0], "peers")  ? N_PEERS
            : !strcmp(c[0], "roster") ? N_ROSTER
            : !strcmp(c[0], "census") ? N_CENSUS
            : !strcmp(c[0], "agents") ? N_AGENTS
            : !strcmp(c[0], "groups") ? N_GROUPS
            : !strcmp(c[0], "hosts")  ? N_HOSTS
            : !strcmp(c[0], "claims") ? N_CLAIMS
                                      : N_NONE;
    else if (!strcmp(c[0], "leads") && !strcmp(c[1], f->opts->coord_id)) {
        out->home = mb_ref(f->mb);
        k = n == 2 ? N_LEAD : home_path(out, c, n, true);
    } else if (!strcmp(c[0], "peers") && fleet_is_peer(f, c[1])) {
        g_strlcpy(out->name, c[1], sizeof out->name);
        k = n == 2 ? N_PEER : peer_file(f, c, n, out->ref);
    } else if (!strcmp(c[0], "agents")) {
        k = agent_path(f, out, c, n);
    } else if (!strcmp(c[0], "hosts") && hs_known(f, c[1])) {
        g_strlcpy(out->name, c[1], sizeof out->name);
        k = n == 2                              ? N_HOST
            : n == 3 && !strcmp(c[2], "status") ? N_HSTATUS
            : n == 3 && !strcmp(c[2], "spawn")  ? N_HSPAWN
            : n == 3 && !strcmp(c[2], "spawns") ? N_HSPAWNS
            : n == 3 && !strcmp(c[2], "stop")   ? N_HSTOP
                                                : N_NONE;
    } else if (!strcmp(c[0], "claims")) {
        k = claim_path(f, out, c, n);
    } else if (!strcmp(c[0], "groups") && group_valid(c[1]) && ag_group_known(f->ag, c[1])) {
        g_strlcpy(out->name, c[1], sizeof out->name);
        k = n == 2                                 ? N_GROUP
            : n == 3 && !strcmp(c[2], "send")      ? N_GSEND
            : n == 3 && !strcmp(c[2], "send.json") ? N_GSENDJ
            : n == 3 && !strcmp(c[2], "members")   ? N_GMEMBERS
                                                   : N_NONE;
    }
    g_strfreev(c);
    out->k = k;
    if (k == N_NONE)
        tr_node_clear(out);
}

/* The kind alone (no name, no home). */
node_kind tr_resolve(const fleet *f, const char *path)
{
    node n;
    tr_resolve_node(f, path, &n);
    tr_node_clear(&n);
    return n.k;
}

bool tr_is_dir(node_kind k)
{
    return k == N_ROOT || k == N_LEADS || k == N_LEAD || k == N_PEERS || k == N_PEER ||
           k == N_REPLYDIR || k == N_HREPLYDIR || k == N_AGENTS || k == N_AGENT || k == N_TODIR ||
           k == N_GROUPS || k == N_GROUP || k == N_HOSTS || k == N_HOST || k == N_CLAIMS ||
           k == N_CLAIM;
}

bool tr_is_writable(node_kind k)
{
    return k == N_ACK || k == N_SUBMITTED || k == N_SEND || k == N_REPLY || k == N_RESEND ||
           k == N_HREPLY || k == N_ASEND || k == N_TO || k == N_GSEND || k == N_HSPAWN ||
           k == N_HSTOP || k == N_SENDJ || k == N_ASENDJ || k == N_GSENDJ || k == N_ASK ||
           k == N_ASKJ || k == N_TOJ || k == N_TOASK || k == N_TOASKJ || k == N_CNOTE ||
           k == N_CLEASE || k == N_CENSUS;
}

/* A write to it is a message (mb_send): writers share these files. */
bool tr_sends_message(node_kind k)
{
    return k == N_SEND || k == N_REPLY || k == N_HREPLY || k == N_ASEND || k == N_TO ||
           k == N_GSEND || k == N_SENDJ || k == N_ASENDJ || k == N_GSENDJ || k == N_ASK ||
           k == N_ASKJ || k == N_TOJ || k == N_TOASK || k == N_TOASKJ;
}

/* Opened read-write: the write asks, the read answers. */
bool tr_is_ask(node_kind k)
{
    return k == N_ASK || k == N_ASKJ || k == N_TOASK || k == N_TOASKJ;
}

static void list_strv(GPtrArray *out, char **names, const char *prefix)
{
    for (char **p = names; p && *p; p++)
        g_ptr_array_add(out, g_strconcat(prefix, *p, NULL));
}

static void list_const(GPtrArray *out, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g_ptr_array_add(out, g_strdup(names[i]));
}

/* The entries of the directory at path, "." and ".." first.  0 or
 * -errno. */
int tr_dir_list(const rq *r, const char *path, GPtrArray *out)
{
    fleet *f = r->f;
    node n;

    tr_resolve_node(f, path, &n);
    if (!tr_is_dir(n.k)) {
        tr_node_clear(&n);
        return n.k == N_NONE ? -ENOENT : -ENOTDIR;
    }
    if (tr_outsider(r)) {
        tr_node_clear(&n);
        return -EACCES;
    }
    g_ptr_array_add(out, g_strdup("."));
    g_ptr_array_add(out, g_strdup(".."));
    switch (n.k) {
    case N_ROOT: {
        static const char *const top[] = {"README", "status", "self",   "leads", "peers", "roster",
                                          "census", "agents", "groups", "hosts", "claims"};
        list_const(out, top, G_N_ELEMENTS(top));
        break;
    }
    case N_LEADS:
        g_ptr_array_add(out, g_strdup(f->opts->coord_id));
        break;
    case N_LEAD: {
        static const char *const files[] = {"inbox",  "ack",    "history", "sent",
                                            "status", "resend", "reply",   "submitted"};
        list_const(out, files, G_N_ELEMENTS(files));
        break;
    }
    case N_PEERS: {
        /* presence: configured peers plus the discovered ones */
        char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
        list_strv(out, peers, "");
        g_strfreev(peers);
        break;
    }
    case N_PEER: {
        static const char *const files[] = {"ask",       "ask.json", "send",
                                            "send.json", "status",   "reply"};
        list_const(out, files, G_N_ELEMENTS(files));
        break;
    }
    case N_REPLYDIR:
    case N_HREPLYDIR: {
        GPtrArray *ids = n.k == N_REPLYDIR ? mb_ids_from(f->mb, n.name) : mb_ids_from(n.home, NULL);
        for (guint i = 0; i < ids->len; i++)
            g_ptr_array_add(out, g_strdup(ids->pdata[i]));
        g_ptr_array_free(ids, TRUE);
        break;
    }
    case N_AGENTS: {
        char **all = ag_list(f->ag);
        list_strv(out, all, "");
        g_strfreev(all);
        break;
    }
    case N_AGENT:
        if (n.home) {
            static const char *const files[] = {
                "inbox", "ack",  "history",   "sent", "status",   "resend",    "reply",
                "to",    "send", "send.json", "ask",  "ask.json", "submitted", "claims"};
            list_const(out, files, G_N_ELEMENTS(files));
        } else {
            static const char *const files[] = {"send", "send.json", "ask", "ask.json", "status"};
            list_const(out, files, G_N_ELEMENTS(files));
        }
        break;
    case N_TODIR: {
        char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
        char **agents = ag_list(f->ag), **groups = ag_groups(f->ag);
        g_ptr_array_add(out, g_strdup(f->opts->coord_id));
        list_strv(out, peers, "");
        for (char **p = agents; p && *p; p++)
            if (strcmp(*p, n.name) != 0)
                g_ptr_array_add(out, g_strdup(*p));
        list_strv(out, groups, GROUP_PREFIX);
        g_strfreev(peers);
        g_strfreev(agents);
        g_strfreev(groups);
        break;
    }
    case N_GROUPS: {
        char **groups = ag_groups(f->ag);
        list_strv(out, groups, "");
        g_strfreev(groups);
        break;
    }
    case N_GROUP: {
        static const char *const files[] = {"send", "send.json", "members"};
        list_const(out, files, G_N_ELEMENTS(files));
        break;
    }
    case N_HOSTS: {
        char **hosts = hs_list(f);
        list_strv(out, hosts, "");
        g_strfreev(hosts);
        break;
    }
    case N_HOST: {
        static const char *const files[] = {"status", "spawn", "spawns", "stop"};
        list_const(out, files, G_N_ELEMENTS(files));
        break;
    }
    case N_CLAIMS: {
        char **names = cl_list(f->cl);
        list_strv(out, names, "");
        g_strfreev(names);
        break;
    }
    case N_CLAIM: {
        static const char *const files[] = {"holder", "note", "lease"};
        list_const(out, files, G_N_ELEMENTS(files));
        break;
    }
    default:
        break;
    }
    tr_node_clear(&n);
    return 0;
}
