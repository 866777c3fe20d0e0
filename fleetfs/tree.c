/* fleetfs/tree.c — the mounted tree (SPEC section 2), libfuse's high-level
 * path API on the multi-threaded loop.
 *
 * Every file is opened direct_io: contents are generated, sizes change
 * under the kernel's feet, and one write(2) to `send` must reach us as one
 * write (no page cache, no merging).  Attributes are never cached
 * (attr_timeout 0) so `tail -f` sees the size we report now.
 *
 * Readable files are snapshots taken at open(); the inbox is a view that
 * keeps growing (mailbox.c).  No handler here waits on the broker except
 * send/ack writes (bounded by send_timeout) and status opens (bounded by
 * probe_timeout).  Nothing here sends a notification: the notifier thread
 * does, outside any FUSE handler.
 */
#include "fleetfs/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/agents.h"
#include "fleetfs/fuseopen.h"
#include "fleetfs/hosts.h"
#include "fleetfs/log.h"
#include "fleetfs/status.h"

typedef enum {
    N_NONE,
    N_ROOT,
    N_README,
    N_STATUS,
    N_SELF,
    N_LEADS,
    N_LEAD,
    N_INBOX,   /* <home>/inbox: a home is leads/<me>/ or a local agent's agents/<gid>/ */
    N_ACK,     /* <home>/ack */
    N_HISTORY, /* <home>/history */
    N_SENT,    /* <home>/sent */
    N_LSTATUS, /* leads/<me>/status */
    N_PEERS,
    N_PEER,
    N_SEND,
    N_PSTATUS,
    N_REPLYDIR, /* peers/<id>/reply/ */
    N_REPLY,    /* peers/<id>/reply/<msgId>: a send that answers msgId */
    N_RESEND,   /* <home>/resend */
    N_ROSTER,
    N_HREPLYDIR, /* <home>/reply/ */
    N_HREPLY,    /* <home>/reply/<msgId>: answers whoever sent msgId here */
    N_AGENTS,    /* agents/ */
    N_AGENT,     /* agents/<gid>/ */
    N_ASEND,     /* agents/<gid>/send: the lead to that agent */
    N_ASTATUS,   /* agents/<gid>/status */
    N_TODIR,     /* agents/<local gid>/to/ */
    N_TO,        /* agents/<local gid>/to/<target>: send as that agent */
    N_GROUPS,    /* groups/ */
    N_GROUP,     /* groups/<g>/ */
    N_GSEND,     /* groups/<g>/send: the lead to every member */
    N_GMEMBERS,  /* groups/<g>/members */
    N_HOSTS,     /* hosts/ */
    N_HOST,      /* hosts/<h>/ */
    N_HSTATUS,   /* hosts/<h>/status */
    N_HSPAWN,    /* hosts/<h>/spawn: ask h to start an agent */
    N_HSPAWNS,   /* hosts/<h>/spawns: what became of the requests to h */
    N_HSTOP,     /* hosts/<h>/stop: ask h to stop an agent */
} node_kind;

/* A resolved path.  name: the peer, agent gid, group or target the node is
 * about; ref: the msgId a reply answers; home: the entity whose home the
 * file is in (a ref, node_clear drops it), NULL outside homes. */
typedef struct {
    node_kind k;
    char name[ADDR_MAX_LEN + 8];
    char ref[ENV_ID_LEN + 1];
    mailbox *home;
} node;

typedef struct {
    node_kind kind;
    char name[ADDR_MAX_LEN + 8]; /* as node.name */
    char ref[ENV_ID_LEN + 1];    /* the msgId N_REPLY / N_HREPLY answers */
    mailbox *home;               /* a ref, as node.home */
    GString *snap;               /* readable snapshot files */
    mb_view *view;               /* inbox */
} handle;

static fleet *F(void)
{
    return fuse_get_context()->private_data;
}

static void node_clear(node *n)
{
    mb_unref(n->home);
    n->home = NULL;
}

/* The tree belongs to the mounting user (modes 0600/0400/0200, dirs
 * 0500, nothing for group and others).  Without allow_other the kernel
 * already keeps everyone else out; with it, these modes are enforced
 * here: another user may see that the mount point is a directory, and
 * gets EACCES for everything else. */
static bool outsider(void)
{
    uid_t uid = fuse_get_context()->uid;
    return uid != F()->uid && uid != 0;
}

bool fleet_is_peer(const fleet *f, const char *name)
{
    if (!name_valid(name))
        return false;
    for (char **p = f->opts->peers; p && *p; p++)
        if (strcmp(*p, name) == 0)
            return true;
    /* presence: a discovered lead is a peer while it is listed */
    return f->pr && pr_is_peer(f->pr, name);
}

/* The files of a home (the lead's or a local agent's). */
static node_kind home_file(const char *s, bool lead)
{
    static const struct {
        const char *name;
        node_kind kind;
    } files[] = {{"inbox", N_INBOX},     {"ack", N_ACK},       {"history", N_HISTORY},
                 {"sent", N_SENT},       {"resend", N_RESEND}, {"reply", N_HREPLYDIR}};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
        if (strcmp(s, files[i].name) == 0)
            return files[i].kind;
    if (!strcmp(s, "status"))
        return lead ? N_LSTATUS : N_ASTATUS;
    if (!lead && !strcmp(s, "to"))
        return N_TODIR;
    if (!lead && !strcmp(s, "send"))
        return N_ASEND;
    return N_NONE;
}

static node_kind peer_file(const fleet *f, gchar **c, guint n, char ref[ENV_ID_LEN + 1])
{
    if (n == 3)
        return !strcmp(c[2], "send")     ? N_SEND
               : !strcmp(c[2], "status") ? N_PSTATUS
               : !strcmp(c[2], "reply")  ? N_REPLYDIR
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
    return N_NONE;
}

/* agents/<gid>/...: a local agent's home, or a remote agent's send and
 * status.  The model is asked once (mb_find), presence only for a gid the
 * model does not have. */
static node_kind agent_path(const fleet *f, node *out, gchar **c, guint n)
{
    mailbox *home = gid_valid(c[1]) ? mb_find(f->mb, c[1]) : NULL;
    if (!home && !ag_heard(f, c[1]))
        return N_NONE;
    g_strlcpy(out->name, c[1], sizeof out->name);
    out->home = home; /* NULL for a remote agent */
    if (n == 2)
        return N_AGENT;
    if (!home)
        return n == 3 && !strcmp(c[2], "send")     ? N_ASEND
               : n == 3 && !strcmp(c[2], "status") ? N_ASTATUS
                                                   : N_NONE;
    return home_path(out, c, n, false);
}

/* path -> node (node_clear it). */
static void resolve_node(const fleet *f, const char *path, node *out)
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
            : !strcmp(c[0], "agents") ? N_AGENTS
            : !strcmp(c[0], "groups") ? N_GROUPS
            : !strcmp(c[0], "hosts")  ? N_HOSTS
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
        k = n == 2                                  ? N_HOST
            : n == 3 && !strcmp(c[2], "status") ? N_HSTATUS
            : n == 3 && !strcmp(c[2], "spawn")  ? N_HSPAWN
            : n == 3 && !strcmp(c[2], "spawns") ? N_HSPAWNS
            : n == 3 && !strcmp(c[2], "stop")   ? N_HSTOP
                                                : N_NONE;
    } else if (!strcmp(c[0], "groups") && group_valid(c[1]) && ag_group_known(f, c[1])) {
        g_strlcpy(out->name, c[1], sizeof out->name);
        k = n == 2                                   ? N_GROUP
            : n == 3 && !strcmp(c[2], "send")    ? N_GSEND
            : n == 3 && !strcmp(c[2], "members") ? N_GMEMBERS
                                                 : N_NONE;
    }
    g_strfreev(c);
    out->k = k;
    if (k == N_NONE)
        node_clear(out);
}

/* The kind alone (no name, no home). */
static node_kind resolve(const fleet *f, const char *path)
{
    node n;
    resolve_node(f, path, &n);
    node_clear(&n);
    return n.k;
}

static bool is_dir(node_kind k)
{
    return k == N_ROOT || k == N_LEADS || k == N_LEAD || k == N_PEERS || k == N_PEER ||
           k == N_REPLYDIR || k == N_HREPLYDIR || k == N_AGENTS || k == N_AGENT ||
           k == N_TODIR || k == N_GROUPS || k == N_GROUP || k == N_HOSTS || k == N_HOST;
}

static bool is_writable(node_kind k)
{
    return k == N_ACK || k == N_SEND || k == N_REPLY || k == N_RESEND || k == N_HREPLY ||
           k == N_ASEND || k == N_TO || k == N_GSEND || k == N_HSPAWN || k == N_HSTOP;
}

/* A write to it is a message (mb_send): writers share these files. */
static bool sends_message(node_kind k)
{
    return k == N_SEND || k == N_REPLY || k == N_HREPLY || k == N_ASEND || k == N_TO ||
           k == N_GSEND;
}

/* A snapshot of a readable file; fresh: may ask the broker. */
static GString *render(fleet *f, const node *n, bool fresh)
{
    switch (n->k) {
    case N_README:
        return g_string_new(st_readme());
    case N_STATUS:
        return st_root(f);
    case N_SENT:
        return mb_render(n->home, MB_SENT);
    case N_HISTORY:
        return mb_render(n->home, MB_HISTORY);
    case N_LSTATUS:
        return st_lead(f, fresh);
    case N_PSTATUS:
        return st_peer(f, n->name, fresh);
    case N_ASTATUS:
        return st_agent(f, n->name, fresh);
    case N_GMEMBERS:
        return ag_members_text(f, n->name);
    case N_ROSTER:
        return st_roster(f);
    case N_HSTATUS:
        return hs_status(f, n->name);
    case N_HSPAWNS:
        return hs_spawns(f, n->name);
    default:
        return g_string_new(NULL);
    }
}

static int64_t mtime_of(const node *n)
{
    switch (n->k) {
    case N_INBOX:
        return mb_mtime(n->home, MB_INBOX);
    case N_SENT:
        return mb_mtime(n->home, MB_SENT);
    case N_HISTORY:
        return mb_mtime(n->home, MB_HISTORY);
    default:
        return env_now_ms();
    }
}

static int tree_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    fleet *f = F();
    node n;
    int64_t mt;
    (void)fi;

    resolve_node(f, path, &n);
    /* presence: the poker announcing peers/<id> (agents/<gid>, groups/<g>)
     * coming or going */
    if (n.k == N_PEER || n.k == N_AGENT || n.k == N_GROUP || n.k == N_HOST || n.k == N_NONE) {
        int pretend = nt_pretend(g_atomic_pointer_get(&f->nt), fuse_get_context()->pid, path + 1);
        if (pretend == 1) {
            node_clear(&n);
            return -ENOENT;
        }
        if (pretend == 2 && n.k == N_NONE)
            n.k = g_str_has_prefix(path, "/agents/")   ? N_AGENT
                  : g_str_has_prefix(path, "/groups/") ? N_GROUP
                  : g_str_has_prefix(path, "/hosts/")  ? N_HOST
                                                       : N_PEER;
    }
    if (n.k == N_NONE)
        return -ENOENT;
    if (n.k != N_ROOT && outsider()) {
        node_clear(&n);
        return -EACCES;
    }
    memset(st, 0, sizeof *st);
    st->st_uid = f->uid;
    st->st_gid = f->gid;
    if (is_dir(n.k)) {
        st->st_mode = S_IFDIR | 0500;
        st->st_nlink = 2;
    } else if (n.k == N_SELF) {
        st->st_mode = S_IFLNK | 0777;
        st->st_nlink = 1;
        st->st_size = (off_t)strlen(f->opts->coord_id) + 6;
    } else {
        st->st_mode = S_IFREG | (is_writable(n.k) ? 0200 : 0400);
        st->st_nlink = 1;
        if (n.k == N_INBOX) {
            st->st_size = (off_t)mb_inbox_size(n.home, fuse_get_context()->pid);
        } else if (n.k == N_SENT || n.k == N_HISTORY) {
            st->st_size = (off_t)mb_size(n.home, n.k == N_SENT ? MB_SENT : MB_HISTORY);
        } else if (sends_message(n.k)) {
            /* the largest message it takes: as the kernel knows it, no
             * write reaches past the end, so writers share it (fuseopen.h) */
            st->st_size = (off_t)f->opts->max_message;
        } else if (!is_writable(n.k)) {
            GString *g = render(f, &n, false);
            st->st_size = (off_t)g->len;
            g_string_free(g, TRUE);
        }
    }
    mt = mtime_of(&n);
    st->st_mtim.tv_sec = mt / 1000;
    st->st_mtim.tv_nsec = (mt % 1000) * 1000000;
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
    /* stdio sizes its buffer from st_blksize: a big one keeps a message
     * written by printf(1) or cat(1) in one write(2), so one message */
    st->st_blksize = is_writable(n.k) ? 1024 * 1024 : 4096;
    st->st_blocks = (st->st_size + 511) / 512;
    node_clear(&n);
    return 0;
}

static int tree_readlink(const char *path, char *buf, size_t size)
{
    fleet *f = F();
    if (outsider())
        return -EACCES;
    if (resolve(f, path) != N_SELF)
        return -EINVAL;
    snprintf(buf, size, "leads/%s", f->opts->coord_id);
    return 0;
}

static void fill_strv(void *buf, fuse_fill_dir_t fill, char **names, const char *prefix)
{
    for (char **p = names; p && *p; p++) {
        char *name = g_strconcat(prefix, *p, NULL);
        fill(buf, name, NULL, 0, 0);
        g_free(name);
    }
}

static int tree_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                        struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    fleet *f = F();
    node n;
    (void)off;
    (void)fi;
    (void)flags;

    resolve_node(f, path, &n);
    if (!is_dir(n.k)) {
        node_clear(&n);
        return n.k == N_NONE ? -ENOENT : -ENOTDIR;
    }
    if (outsider()) {
        node_clear(&n);
        return -EACCES;
    }
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    switch (n.k) {
    case N_ROOT: {
        static const char *top[] = {"README", "status", "self",   "leads", "peers",
                                    "roster", "agents", "groups", "hosts"};
        for (size_t i = 0; i < G_N_ELEMENTS(top); i++)
            fill(buf, top[i], NULL, 0, 0);
        break;
    }
    case N_LEADS:
        fill(buf, f->opts->coord_id, NULL, 0, 0);
        break;
    case N_LEAD: {
        static const char *files[] = {"inbox", "ack",    "history", "sent",
                                      "status", "resend", "reply"};
        for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
            fill(buf, files[i], NULL, 0, 0);
        break;
    }
    case N_PEERS: {
        /* presence: configured peers plus the discovered ones */
        char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
        fill_strv(buf, fill, peers, "");
        g_strfreev(peers);
        break;
    }
    case N_PEER:
        fill(buf, "send", NULL, 0, 0);
        fill(buf, "status", NULL, 0, 0);
        fill(buf, "reply", NULL, 0, 0);
        break;
    case N_REPLYDIR: {
        GPtrArray *ids = mb_ids_from(f->mb, n.name);
        for (guint i = 0; i < ids->len; i++)
            fill(buf, ids->pdata[i], NULL, 0, 0);
        g_ptr_array_free(ids, TRUE);
        break;
    }
    case N_HREPLYDIR: {
        GPtrArray *ids = mb_ids_from(n.home, NULL);
        for (guint i = 0; i < ids->len; i++)
            fill(buf, ids->pdata[i], NULL, 0, 0);
        g_ptr_array_free(ids, TRUE);
        break;
    }
    case N_AGENTS: {
        char **all = ag_list(f);
        fill_strv(buf, fill, all, "");
        g_strfreev(all);
        break;
    }
    case N_AGENT:
        if (n.home) {
            static const char *files[] = {"inbox",  "ack",   "history", "sent", "status",
                                          "resend", "reply", "to",      "send"};
            for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
                fill(buf, files[i], NULL, 0, 0);
        } else {
            fill(buf, "send", NULL, 0, 0);
            fill(buf, "status", NULL, 0, 0);
        }
        break;
    case N_TODIR: {
        char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
        char **agents = ag_list(f), **groups = ag_groups(f);
        fill(buf, f->opts->coord_id, NULL, 0, 0);
        fill_strv(buf, fill, peers, "");
        for (char **p = agents; p && *p; p++)
            if (strcmp(*p, n.name) != 0)
                fill(buf, *p, NULL, 0, 0);
        fill_strv(buf, fill, groups, GROUP_PREFIX);
        g_strfreev(peers);
        g_strfreev(agents);
        g_strfreev(groups);
        break;
    }
    case N_GROUPS: {
        char **groups = ag_groups(f);
        fill_strv(buf, fill, groups, "");
        g_strfreev(groups);
        break;
    }
    case N_GROUP:
        fill(buf, "send", NULL, 0, 0);
        fill(buf, "members", NULL, 0, 0);
        break;
    case N_HOSTS: {
        char **hosts = hs_list(f);
        fill_strv(buf, fill, hosts, "");
        g_strfreev(hosts);
        break;
    }
    case N_HOST: {
        static const char *files[] = {"status", "spawn", "spawns", "stop"};
        for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
            fill(buf, files[i], NULL, 0, 0);
        break;
    }
    default:
        break;
    }
    node_clear(&n);
    return 0;
}

static int tree_open(const char *path, struct fuse_file_info *fi)
{
    fleet *f = F();
    node n;
    int acc = fi->flags & O_ACCMODE;
    handle *h;

    resolve_node(f, path, &n);
    if (n.k == N_NONE)
        return -ENOENT;
    /* O_TRUNC comes here (atomic_o_trunc, tree_init): fine on what one
     * writes to, refused on the rest as truncate(2) is */
    if (outsider() || (is_writable(n.k) ? acc != O_WRONLY : acc != O_RDONLY) ||
        ((fi->flags & O_TRUNC) && !is_writable(n.k))) {
        node_clear(&n);
        return -EACCES;
    }
    if (is_dir(n.k)) {
        node_clear(&n);
        return -EISDIR;
    }
    h = g_new0(handle, 1);
    h->kind = n.k;
    g_strlcpy(h->name, n.name, sizeof h->name);
    g_strlcpy(h->ref, n.ref, sizeof h->ref);
    h->home = n.home; /* the node's ref moves to the handle */
    if (n.k == N_INBOX)
        h->view = mb_view_open(h->home, fuse_get_context()->pid);
    else if (!is_writable(n.k))
        h->snap = render(f, &n, true);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    if (sends_message(n.k)) /* concurrent writers publish side by side */
        fo_mark_shared_writes(fi);
    return 0;
}

static int tree_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    handle *h = (handle *)(uintptr_t)fi->fh;
    (void)path;
    if (h->view)
        return (int)mb_view_read(h->home, h->view, buf, size, off);
    if (!h->snap)
        return -EBADF;
    if (off < 0 || (size_t)off >= h->snap->len)
        return 0;
    size = MIN(size, h->snap->len - (size_t)off);
    memcpy(buf, h->snap->str + off, size);
    return (int)size;
}

static int tree_write(const char *path, const char *buf, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    fleet *f = F();
    handle *h = (handle *)(uintptr_t)fi->fh;
    char detail[512], to[ADDR_MAX_LEN + 16];
    fe_code r;
    (void)path;

    /* A message file has no position (FOPEN_STREAM, fuseopen.h): every
     * write(2) reaches us at offset 0.  A piece at another offset is the
     * rest of one write the kernel cut into requests (a writev of more
     * than 256 pages of segments): its first `off` bytes went out as a
     * message already; the rest is refused, never a message of its own,
     * and the writer's writev returns `off`, a short count.  Not under
     * O_APPEND (`echo >> send`): the kernel puts each such write at the
     * size it knows, which the write before moved, so a cut write cannot
     * be told from the next one there. */
    if (off != 0 && sends_message(h->kind) && !(fi->flags & O_APPEND)) {
        log_warn("send to %s: one write was cut by the kernel into pieces (a writev of more than "
                 "256 pages of segments?): its first %lld bytes went out as one message, the "
                 "other %zu bytes are refused (EMSGSIZE) and the write returns short; gather a "
                 "message into one buffer before writing it",
                 h->name, (long long)off, size);
        return -EMSGSIZE;
    }
    switch (h->kind) {
    case N_SEND:
    case N_REPLY:
    case N_ASEND:
        r = mb_send(f->mb, h->name, h->kind == N_REPLY ? h->ref : NULL, buf, size, detail,
                    sizeof detail);
        break;
    case N_HREPLY:
        r = mb_send(h->home, h->name, h->ref, buf, size, detail, sizeof detail);
        break;
    case N_TO:
        r = mb_send(h->home, h->name, NULL, buf, size, detail, sizeof detail);
        break;
    case N_GSEND:
        snprintf(to, sizeof to, "%s%s", GROUP_PREFIX, h->name);
        r = mb_send(f->mb, to, NULL, buf, size, detail, sizeof detail);
        break;
    case N_RESEND:
        r = mb_resend(h->home, buf, size, detail, sizeof detail);
        break;
    case N_ACK:
        r = mb_ack(h->home, buf, size, detail, sizeof detail);
        break;
    case N_HSPAWN: {
        int e = hs_spawn(f, h->name, buf, size);
        return e ? -e : (int)size;
    }
    case N_HSTOP: {
        int e = hs_stop(f, h->name, buf, size);
        return e ? -e : (int)size;
    }
    default:
        return -EBADF;
    }
    return r == FE_OK ? (int)size : -fe_errno(r);
}

static int tree_release(const char *path, struct fuse_file_info *fi)
{
    handle *h = (handle *)(uintptr_t)fi->fh;
    (void)path;
    if (h->view)
        mb_view_close(h->home, h->view);
    if (h->snap)
        g_string_free(h->snap, TRUE);
    mb_unref(h->home);
    g_free(h);
    return 0;
}

static int tree_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    fleet *f = F();
    node_kind k = resolve(f, path);
    (void)size;
    (void)fi;
    if (k == N_NONE)
        return -ENOENT;
    if (outsider())
        return -EACCES;
    /* the notifier's own poke: the event is all it wanted */
    if (nt_is_self(g_atomic_pointer_get(&f->nt), fuse_get_context()->pid))
        return 0;
    /* `echo x > send` opens with O_TRUNC: nothing to truncate, fine */
    if (is_writable(k))
        return 0;
    return -EACCES;
}

static int tree_poll(const char *path, struct fuse_file_info *fi, struct fuse_pollhandle *ph,
                     unsigned *reventsp)
{
    handle *h = (handle *)(uintptr_t)fi->fh;
    (void)path;
    if (h->view) {
        *reventsp = mb_view_poll(h->home, h->view, ph);
        return 0;
    }
    if (ph)
        fuse_pollhandle_destroy(ph);
    *reventsp = is_writable(h->kind) ? POLLOUT | POLLWRNORM : POLLIN | POLLRDNORM;
    return 0;
}

static int deny_path(const char *path, mode_t mode)
{
    char parent[PATH_MAX];
    const char *slash = strrchr(path, '/');
    node_kind pk;
    (void)mode;
    if (resolve(F(), path) != N_NONE)
        return -EEXIST;
    /* echo > peers/x/reply/<unknown msgId> creates: there is no such
     * message to answer; nor is there such a target under to/ */
    snprintf(parent, sizeof parent, "%.*s", (int)(slash ? slash - path : 0), path);
    pk = resolve(F(), parent);
    return pk == N_REPLYDIR || pk == N_HREPLYDIR || pk == N_TODIR ? -ENOENT : -EACCES;
}

static int deny_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    (void)fi;
    return deny_path(path, mode);
}

static int deny_unlink(const char *path)
{
    (void)path;
    return -EACCES;
}

/* presence: the poker's mkdir / rmdir of peers/<id> is a notification
 * (notify.c, nt_entry); everyone else's is refused. */
static int entry_poke(const char *path, bool added)
{
    fleet *f = F();
    notifier *nt = g_atomic_pointer_get(&f->nt);
    if (nt_pretend(nt, fuse_get_context()->pid, path + 1) != (added ? 1 : 2))
        return 1;
    nt_entry_done(nt, path + 1, added);
    return 0;
}

/* agents/<x> for mkdir/rmdir: the name after "/agents/", or NULL. */
static const char *agents_child(const char *path)
{
    const char *name = g_str_has_prefix(path, "/agents/") ? path + strlen("/agents/") : NULL;
    return name && *name && !strchr(name, '/') ? name : NULL;
}

static int tree_mkdir(const char *path, mode_t mode)
{
    const char *gid;
    if (entry_poke(path, true) == 0)
        return 0;
    if ((gid = agents_child(path)) && !outsider() && resolve(F(), path) == N_NONE)
        return -ag_mkdir(F(), gid);
    return deny_path(path, mode);
}

static int tree_rmdir(const char *path)
{
    const char *gid;
    if (entry_poke(path, false) == 0)
        return 0;
    if ((gid = agents_child(path)) && !outsider())
        return -ag_rmdir(F(), gid);
    return -EACCES;
}

static int deny_rename(const char *from, const char *to, unsigned int flags)
{
    (void)from;
    (void)to;
    (void)flags;
    return -EACCES;
}

static int deny_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    (void)path;
    (void)mode;
    (void)fi;
    return -EPERM;
}

static int deny_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    (void)path;
    (void)uid;
    (void)gid;
    (void)fi;
    return -EPERM;
}

static int ignore_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    (void)tv;
    (void)fi;
    return resolve(F(), path) == N_NONE ? -ENOENT : 0;
}

static void *tree_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    fleet *f = fuse_get_context()->private_data;
    cfg->attr_timeout = 0;
    cfg->entry_timeout = 1;
    cfg->negative_timeout = 0;
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->auto_cache = 0;
    /* a message arrives as one write: let the kernel pass up to 1 MiB */
    conn->max_write = 1024 * 1024;
    /* `echo x > send` opens with O_TRUNC: handled in the open itself, the
     * kernel sends no truncate (SETATTR) and no getattr after it, so one
     * request fewer per message (doc/benchmarks.md) */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    return f;
}

const struct fuse_operations tree_ops = {
    .init = tree_init,
    .getattr = tree_getattr,
    .readlink = tree_readlink,
    .readdir = tree_readdir,
    .open = tree_open,
    .read = tree_read,
    .write = tree_write,
    .release = tree_release,
    .truncate = tree_truncate,
    .poll = tree_poll,
    .create = deny_create,
    .mkdir = tree_mkdir,
    .unlink = deny_unlink,
    .rmdir = tree_rmdir,
    .rename = deny_rename,
    .chmod = deny_chmod,
    .chown = deny_chown,
    .utimens = ignore_utimens,
};
