/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/tree.c — the mounted tree (SPEC section 2), on libfuse's
 * low-level API and its multi-threaded loop.
 *
 * The tree is still resolved by path (tr_resolve_node, paths.c): a small inode table
 * maps the kernel's node ids to paths and keeps the kernel's lookup
 * counts (a lookup, a readdirplus entry or a mkdir adds one, a forget
 * takes them away).  Ids are never reused, so an id whose path went away
 * answers ENOENT, and a path that comes back gets its old id while the
 * kernel still holds it.  Who asks comes with each request
 * (fuse_req_ctx): the uid for `outsider`, the pid for the per-reader
 * inbox view and for the notifier's poker (nt_pretend, nt_is_self).
 *
 * Why not libfuse's high-level path API (used until issue 19): it sets
 * one attribute timeout for every node.  Files whose size changes must
 * be asked every time (attr_timeout 0): the inbox is a per-reader view
 * (its size depends on the pid asking), and `tail -f` and `stat` need
 * the size of now.  Directories, the `self` link and the files one
 * writes to (size 0) have attributes that never change but for their
 * mtime (always "now"), so the kernel keeps those as long as it keeps
 * names (TTL, 1 s; tree_ttl has the exceptions): `ls -l peers/` with
 * 1000 peers costs READDIRPLUS and no GETATTR per peer
 * (doc/benchmarks.md).  With allow_other every
 * attribute is asked afresh (timeout 0), so another user's stat still
 * reaches `outsider` and gets EACCES instead of what the kernel kept for
 * the owner.  Nothing is invalidated explicitly: what the kernel keeps
 * lapses within the second, as names always did.
 *
 * Every file is opened direct_io: contents are generated, sizes change
 * under the kernel's feet, and one write(2) to `send` must reach us as one
 * write (no page cache, no merging).  What an open file reads and what a
 * write to it does is files.c's; this file answers the kernel.
 *
 * No handler here waits on the broker except
 * ack writes (bounded by send_timeout), status opens (bounded by
 * probe_timeout) and a claim's mkdir and rmdir (claims.c, 5 s).  A write
 * that sends a message is answered by the broker's publishing thread
 * (files.c): the handler returns at once,
 * and no FUSE thread waits for the broker (SPEC section 6, revised).
 * Nothing here sends a notification: the notifier thread does, outside any
 * FUSE handler.
 */
#include "fleetfs/face/tree_int.h"

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
#include "fleetfs/agents/agents.h"
#include "fleetfs/face/files.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"
#include "fleetfs/face/status.h"

/* How long the kernel keeps names, and the attributes that do not change
 * (tree_ttl). */
#define TTL 1.0
/* d_ino of a plain readdir entry: "ask lookup" (what libfuse's path API
 * gave too) */
#define INO_UNKNOWN 0xffffffffu

typedef struct {
    fuse_ino_t ino;
    uint64_t nlookup; /* the kernel's references */
    char *path;
} inode;

struct tree {
    fleet *f;
    bool shared;         /* allow_other: the kernel keeps no attributes */
    GMutex lock;         /* guards the table */
    GHashTable *by_ino;  /* &inode.ino -> inode (owns it) */
    GHashTable *by_path; /* inode.path -> inode */
    fuse_ino_t next;     /* the next id given out; never reused */
};

/* A directory being listed: its entries, taken at the first read. */
typedef struct {
    char *path;
    GPtrArray *names;
} dirh;

static rq rq_of(fuse_req_t req)
{
    tree *t = fuse_req_userdata(req);
    return (rq){t, t->f, fuse_req_ctx(req)};
}

static void inode_free(gpointer p)
{
    inode *in = p;
    g_free(in->path);
    g_free(in);
}

tree *tree_new(fleet *f, bool shared)
{
    tree *t = g_new0(tree, 1);
    inode *root = g_new0(inode, 1);
    t->f = f;
    t->shared = shared;
    g_mutex_init(&t->lock);
    t->by_ino = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, inode_free);
    t->by_path = g_hash_table_new(g_str_hash, g_str_equal);
    root->ino = FUSE_ROOT_ID;
    root->nlookup = 1; /* the kernel holds the root without a lookup */
    root->path = g_strdup("/");
    g_hash_table_insert(t->by_ino, &root->ino, root);
    g_hash_table_insert(t->by_path, root->path, root);
    t->next = FUSE_ROOT_ID + 1;
    return t;
}

void tree_free(tree *t)
{
    if (!t)
        return;
    g_hash_table_destroy(t->by_path);
    g_hash_table_destroy(t->by_ino);
    g_mutex_clear(&t->lock);
    g_free(t);
}

/* The path of a node id (g_free it), NULL for an id the kernel forgot. */
static char *ino_path(tree *t, fuse_ino_t ino)
{
    inode *in;
    char *path = NULL;
    g_mutex_lock(&t->lock);
    in = g_hash_table_lookup(t->by_ino, &ino);
    if (in)
        path = g_strdup(in->path);
    g_mutex_unlock(&t->lock);
    return path;
}

/* The id of path, one more kernel reference to it. */
static fuse_ino_t ino_ref(tree *t, const char *path)
{
    inode *in;
    fuse_ino_t ino;
    g_mutex_lock(&t->lock);
    in = g_hash_table_lookup(t->by_path, path);
    if (!in) {
        in = g_new0(inode, 1);
        in->ino = t->next++;
        in->path = g_strdup(path);
        g_hash_table_insert(t->by_ino, &in->ino, in);
        g_hash_table_insert(t->by_path, in->path, in);
    }
    in->nlookup++;
    ino = in->ino;
    g_mutex_unlock(&t->lock);
    return ino;
}

static void ino_forget(tree *t, fuse_ino_t ino, uint64_t n)
{
    inode *in;
    g_mutex_lock(&t->lock);
    in = g_hash_table_lookup(t->by_ino, &ino);
    if (in && ino != FUSE_ROOT_ID) {
        in->nlookup -= MIN(n, in->nlookup);
        if (in->nlookup == 0) {
            g_hash_table_remove(t->by_path, in->path);
            g_hash_table_remove(t->by_ino, &ino); /* frees it */
        }
    }
    g_mutex_unlock(&t->lock);
}

/* dir/name as a tree path (g_free it). */
static char *child_path(const char *dir, const char *name)
{
    return strcmp(dir, "/") == 0 ? g_strconcat("/", name, NULL) : g_strconcat(dir, "/", name, NULL);
}

/* A snapshot of a readable file; fresh: may ask the broker. */
/* A directory's attributes (mtime: now). */
static void dir_stat(const fleet *f, struct stat *st)
{
    int64_t now = env_now_ms();
    memset(st, 0, sizeof *st);
    st->st_uid = f->uid;
    st->st_gid = f->gid;
    st->st_mode = S_IFDIR | 0500;
    st->st_nlink = 2;
    os_st_set_times_ms(st, now);
    st->st_blksize = 4096;
}

/* path's attributes, and its kind; *pretended: the answer is the
 * notifier's announcement (nt_pretend), not the tree.  0 or -errno. */
static int node_stat(const rq *r, const char *path, struct stat *st, node_kind *kind,
                     bool *pretended)
{
    fleet *f = r->f;
    node n;
    int64_t mt;

    *pretended = false;
    tr_resolve_node(f, path, &n);
    /* fleet_view=groups: a lead is reachable by name though we do not hear
     * it; never for the poker, whose lookups are announcements */
    if (n.k == N_NONE && !nt_is_self(g_atomic_pointer_get(&f->nt), r->cx->pid) &&
        tr_address_peer(f, path))
        tr_resolve_node(f, path, &n);
    /* presence: the poker announcing peers/<id> (agents/<gid>, groups/<g>)
     * coming or going */
    if (n.k == N_PEER || n.k == N_AGENT || n.k == N_GROUP || n.k == N_HOST || n.k == N_CLAIM ||
        n.k == N_NONE) {
        int pretend = nt_pretend(g_atomic_pointer_get(&f->nt), r->cx->pid, path + 1);
        if (pretend == 1) {
            tr_node_clear(&n);
            return -ENOENT;
        }
        if (pretend == 2 && n.k == N_NONE) {
            n.k = g_str_has_prefix(path, "/agents/")   ? N_AGENT
                  : g_str_has_prefix(path, "/groups/") ? N_GROUP
                  : g_str_has_prefix(path, "/hosts/")  ? N_HOST
                  : g_str_has_prefix(path, "/claims/") ? N_CLAIM
                                                       : N_PEER;
            *pretended = true;
        }
    }
    if (n.k == N_NONE)
        return -ENOENT;
    if (n.k != N_ROOT && tr_outsider(r)) {
        tr_node_clear(&n);
        return -EACCES;
    }
    *kind = n.k;
    if (tr_is_dir(n.k)) {
        dir_stat(f, st);
        tr_node_clear(&n);
        return 0;
    }
    memset(st, 0, sizeof *st);
    st->st_uid = f->uid;
    st->st_gid = f->gid;
    if (n.k == N_SELF) {
        st->st_mode = S_IFLNK | 0777;
        st->st_nlink = 1;
        st->st_size = (off_t)strlen(f->opts->coord_id) + 6;
    } else {
        st->st_mode = S_IFREG | (tr_is_ask(n.k) || n.k == N_CENSUS ? 0600
                                 : tr_is_writable(n.k)             ? 0200
                                                                   : 0400);
        st->st_nlink = 1;
        if (n.k == N_INBOX) {
            st->st_size = (off_t)mb_inbox_size(n.home, r->cx->pid);
        } else if (n.k == N_SENT || n.k == N_HISTORY) {
            st->st_size = (off_t)mb_size(n.home, n.k == N_SENT ? MB_SENT : MB_HISTORY);
        } else if (tr_sends_message(n.k)) {
            /* the largest message it takes: as the kernel knows it, no
             * write reaches past the end, so writers share it (fuseopen.h) */
            st->st_size = (off_t)f->opts->max_message;
        } else if (!tr_is_writable(n.k) || n.k == N_CENSUS) {
            GString *g = tr_render(f, &n, false);
            st->st_size = (off_t)g->len;
            g_string_free(g, TRUE);
        }
    }
    mt = tr_mtime(&n);
    os_st_set_times_ms(st, mt);
    /* stdio sizes its buffer from st_blksize: a big one keeps a message
     * written by printf(1) or cat(1) in one write(2), so one message */
    st->st_blksize = tr_is_writable(n.k) ? 1024 * 1024 : 4096;
    st->st_blocks = (st->st_size + 511) / 512;
    tr_node_clear(&n);
    return 0;
}

/* How long the kernel may keep a node's attributes: never for what
 * changes per reader or per message (readable files), TTL for the rest
 * (their attributes are constant but for an mtime of "now").  Not kept
 * either: the root, so a stat of the mount point always reaches the
 * daemon (a dead one answers ENOTCONN at once, which startup.c's check of
 * the mount point relies on), and reply/<msgId>, which goes away with
 * its message. */
static double tree_ttl(const tree *t, node_kind k, bool pretended)
{
    if (t->shared || pretended || k == N_ROOT || k == N_REPLY || k == N_HREPLY || k == N_CENSUS)
        return 0;
    return tr_is_dir(k) || k == N_SELF || tr_is_writable(k) ? TTL : 0;
}

/* path as a lookup answers it: attributes, an id, one kernel reference
 * (taken only on success).  0 or -errno. */
static int node_entry(const rq *r, const char *path, struct fuse_entry_param *e)
{
    node_kind k = N_NONE;
    bool pretended;
    int err = node_stat(r, path, &e->attr, &k, &pretended);
    if (err)
        return err;
    e->ino = ino_ref(r->t, path);
    e->generation = 0;
    e->attr.st_ino = (ino_t)e->ino;
    e->attr_timeout = tree_ttl(r->t, k, pretended);
    e->entry_timeout = pretended ? 0 : TTL;
    return 0;
}

/* Reply with an entry; a reference the kernel never got (the request
 * was interrupted) is given back. */
static void reply_entry(fuse_req_t req, tree *t, const struct fuse_entry_param *e)
{
    if (fuse_reply_entry(req, e) == -ENOENT)
        ino_forget(t, e->ino, 1);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    rq r = rq_of(req);
    struct fuse_entry_param e;
    char *dir = ino_path(r.t, parent), *path = dir ? child_path(dir, name) : NULL;
    int err = path ? node_entry(&r, path, &e) : -ENOENT;
    g_free(dir);
    g_free(path);
    if (err)
        fuse_reply_err(req, -err);
    else
        reply_entry(req, r.t, &e);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    ino_forget(fuse_req_userdata(req), ino, nlookup);
    fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    tree *t = fuse_req_userdata(req);
    for (size_t i = 0; i < count; i++)
        ino_forget(t, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* Reply with the attributes of ino (at path, NULL: forgotten). */
static void reply_attr(fuse_req_t req, const rq *r, fuse_ino_t ino, const char *path)
{
    struct stat st;
    node_kind k = N_NONE;
    bool pretended = false;
    int err = path ? node_stat(r, path, &st, &k, &pretended) : -ENOENT;
    if (err) {
        fuse_reply_err(req, -err);
        return;
    }
    st.st_ino = (ino_t)ino;
    fuse_reply_attr(req, &st, tree_ttl(r->t, k, pretended));
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    rq r = rq_of(req);
    char *path = ino_path(r.t, ino);
    (void)fi;
    reply_attr(req, &r, ino, path);
    g_free(path);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
    rq r = rq_of(req);
    char *path = ino_path(r.t, ino), buf[ADDR_MAX_LEN + 16];
    int err = !path                             ? ENOENT
              : tr_outsider(&r)                 ? EACCES
              : tr_resolve(r.f, path) != N_SELF ? EINVAL
                                                : 0;
    g_free(path);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    snprintf(buf, sizeof buf, "leads/%s", r.f->opts->coord_id);
    fuse_reply_readlink(req, buf);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    dirh *d = g_new0(dirh, 1);
    (void)ino;
    fi->fh = (uint64_t)(uintptr_t)d;
    if (fuse_reply_open(req, fi) == -ENOENT)
        g_free(d);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    dirh *d = (dirh *)(uintptr_t)fi->fh;
    (void)ino;
    if (d->names)
        g_ptr_array_free(d->names, TRUE);
    g_free(d->path);
    g_free(d);
    fuse_reply_err(req, 0);
}

/* readdir and readdirplus: the listing is taken when reading starts at
 * offset 0 (as libfuse's path API did); entry i continues at offset
 * i + 1.  A readdirplus entry is a lookup: it carries the attributes and
 * timeouts a lookup would, and the kernel takes a reference to it. */
static void dir_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi, bool plus)
{
    rq r = rq_of(req);
    dirh *d = (dirh *)(uintptr_t)fi->fh;
    char *buf;
    size_t used = 0;

    if (off == 0 || !d->names) {
        int err;
        if (d->names)
            g_ptr_array_free(d->names, TRUE);
        g_free(d->path);
        d->names = g_ptr_array_new_with_free_func(g_free);
        d->path = ino_path(r.t, ino);
        err = d->path ? tr_dir_list(&r, d->path, d->names) : -ENOENT;
        if (err) {
            g_ptr_array_set_size(d->names, 0);
            fuse_reply_err(req, -err);
            return;
        }
    }
    buf = g_malloc(size);
    for (guint i = (guint)MAX(off, 0); i < d->names->len; i++) {
        const char *name = d->names->pdata[i];
        size_t need, room = size - used;
        if (!plus) {
            struct stat st = {.st_ino = INO_UNKNOWN};
            need = fuse_add_direntry(req, buf + used, room, name, &st, (off_t)i + 1);
        } else {
            struct fuse_entry_param e = {.attr.st_ino = INO_UNKNOWN};
            if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                char *path = child_path(d->path, name);
                /* gone since the listing: a name without attributes */
                if (node_entry(&r, path, &e) != 0)
                    e = (struct fuse_entry_param){.attr.st_ino = INO_UNKNOWN};
                g_free(path);
            }
            need = fuse_add_direntry_plus(req, buf + used, room, name, &e, (off_t)i + 1);
            if (need > room && e.ino)
                ino_forget(r.t, e.ino, 1);
        }
        if (need > room)
            break;
        used += need;
    }
    /* an interrupted readdirplus leaves its entries' references here (the
     * table keeps a few paths longer; nothing answers wrong) */
    fuse_reply_buf(req, buf, used);
    g_free(buf);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    dir_read(req, ino, size, off, fi, false);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    dir_read(req, ino, size, off, fi, true);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    rq r = rq_of(req);
    char *path = ino_path(r.t, ino);
    int err = path ? tr_file_open(&r, path, fi) : -ENOENT;
    g_free(path);
    if (err)
        fuse_reply_err(req, -err);
    else if (fuse_reply_open(req, fi) == -ENOENT) /* interrupted: no release will come */
        tr_file_free((tr_file *)(uintptr_t)fi->fh);
}

/* The reply is a copy, not the handle's snapshot (files.c). */
static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    tr_file_read((tr_file *)(uintptr_t)fi->fh, req, size, off, fi->flags);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    rq r = rq_of(req);
    int n = tr_file_write(&r, req, (tr_file *)(uintptr_t)fi->fh, buf, size, off, fi->flags);
    (void)ino;
    if (n == TR_WRITE_PENDING)
        return; /* the broker's publishing thread answers it */
    if (n < 0)
        fuse_reply_err(req, -n);
    else
        fuse_reply_write(req, (size_t)n);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    tr_file_free((tr_file *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static int node_truncate(const rq *r, const char *path)
{
    fleet *f = r->f;
    node_kind k = tr_resolve(f, path);
    if (k == N_NONE)
        return -ENOENT;
    if (tr_outsider(r))
        return -EACCES;
    /* the notifier's own poke: the event is all it wanted */
    if (nt_is_self(g_atomic_pointer_get(&f->nt), r->cx->pid)) {
        nt_poked(g_atomic_pointer_get(&f->nt), path + 1);
        return 0;
    }
    /* `echo x > send` opens with O_TRUNC: nothing to truncate, fine */
    if (tr_is_writable(k))
        return 0;
    return -EACCES;
}

/* chmod and chown are refused, times ignored (the poker's touch of a
 * directory is a notification), truncate as node_truncate says; then the
 * attributes, as libfuse's path API answered a setattr. */
static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    rq r = rq_of(req);
    char *path = ino_path(r.t, ino);
    int err = path ? 0 : -ENOENT;
    (void)attr;
    (void)fi;
    if (!err && (to_set & FUSE_SET_ATTR_MODE))
        err = -EPERM;
    if (!err && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
        err = -EPERM;
    if (!err && (to_set & FUSE_SET_ATTR_SIZE))
        err = node_truncate(&r, path);
    if (!err && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) &&
        tr_resolve(r.f, path) == N_NONE)
        err = -ENOENT;
    if (err)
        fuse_reply_err(req, -err);
    else
        reply_attr(req, &r, ino, path);
    g_free(path);
}

static void ll_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct fuse_pollhandle *ph)
{
    (void)ino;
    fuse_reply_poll(req, tr_file_poll((tr_file *)(uintptr_t)fi->fh, ph));
}

/* Nothing is created but agents/<gid>/ (and the poker's announcements):
 * EEXIST for what is there, ENOENT under reply/ and to/ (no such message
 * to answer, no such target), EACCES elsewhere. */
static int deny_path(const rq *r, const char *path)
{
    char parent[PATH_MAX];
    const char *slash = strrchr(path, '/');
    node_kind pk;
    if (tr_resolve(r->f, path) != N_NONE)
        return -EEXIST;
    snprintf(parent, sizeof parent, "%.*s", (int)(slash ? slash - path : 0), path);
    pk = tr_resolve(r->f, parent);
    return pk == N_REPLYDIR || pk == N_HREPLYDIR || pk == N_TODIR ? -ENOENT : -EACCES;
}

/* parent/name as a tree path, or NULL (reply ENOENT) for a forgotten
 * parent. */
static char *req_child(const rq *r, fuse_ino_t parent, const char *name)
{
    char *dir = ino_path(r->t, parent), *path = dir ? child_path(dir, name) : NULL;
    g_free(dir);
    return path;
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    rq r = rq_of(req);
    char *path = req_child(&r, parent, name);
    int err = path ? deny_path(&r, path) : -ENOENT;
    (void)mode;
    (void)fi;
    g_free(path);
    fuse_reply_err(req, -err);
}

/* The poker's mkdir / rmdir (of peers/<id>, claims/NAME) is a notification
 * (notify.c, nt_entry): 0.  Its mkdir that comes after the announcement was
 * replaced (a claim taken and released at once) is refused, never carried
 * out: it once took the claim for this host (t1110).  1: not the poker. */
static int entry_poke(const rq *r, const char *path, bool added)
{
    notifier *nt = g_atomic_pointer_get(&r->f->nt);
    if (!nt_is_self(nt, r->cx->pid))
        return 1;
    if (nt_pretend(nt, r->cx->pid, path + 1) != (added ? 1 : 2))
        return added ? -EEXIST : -ENOENT;
    nt_entry_done(nt, path + 1, added);
    return 0;
}

/* agents/<x> for mkdir/rmdir: the name after "/agents/", or NULL. */
static const char *agents_child(const char *path)
{
    const char *name = g_str_has_prefix(path, "/agents/") ? path + strlen("/agents/") : NULL;
    return name && *name && !strchr(name, '/') ? name : NULL;
}

static int node_mkdir(const rq *r, const char *path)
{
    const char *gid;
    int rc;
    if ((rc = entry_poke(r, path, true)) <= 0)
        return rc;
    if ((gid = agents_child(path)) && !tr_outsider(r) && tr_resolve(r->f, path) == N_NONE)
        return -ag_mkdir(r->f->ag, gid);
    if ((rc = tr_claim_op(r, path, true)) <= 0)
        return rc;
    return deny_path(r, path);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    rq r = rq_of(req);
    struct fuse_entry_param e;
    char *path = req_child(&r, parent, name);
    int err = path ? node_mkdir(&r, path) : -ENOENT;
    (void)mode;
    if (!err && node_entry(&r, path, &e) != 0) {
        /* made, and gone again already (a lead that left at once): a
         * directory the kernel keeps for no time */
        e = (struct fuse_entry_param){.ino = ino_ref(r.t, path)};
        dir_stat(r.f, &e.attr);
        e.attr.st_ino = (ino_t)e.ino;
    }
    g_free(path);
    if (err)
        fuse_reply_err(req, -err);
    else
        reply_entry(req, r.t, &e);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    rq r = rq_of(req);
    char *path = req_child(&r, parent, name);
    const char *gid;
    int rc;
    int err = !path                                            ? -ENOENT
              : (rc = entry_poke(&r, path, false)) <= 0        ? rc
              : (gid = agents_child(path)) && !tr_outsider(&r) ? -ag_rmdir(r.f->ag, gid)
              : (rc = tr_claim_op(&r, path, false)) <= 0       ? rc
                                                               : -EACCES;
    g_free(path);
    fuse_reply_err(req, -err);
}

static void deny_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    (void)parent;
    (void)name;
    fuse_reply_err(req, EACCES);
}

static void deny_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                        const char *newname, unsigned int flags)
{
    (void)parent;
    (void)name;
    (void)newparent;
    (void)newname;
    (void)flags;
    fuse_reply_err(req, EACCES);
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* a message arrives as one write: let the kernel pass up to 1 MiB */
    conn->max_write = 1024 * 1024;
    /* `echo x > send` opens with O_TRUNC: handled in the open itself, the
     * kernel sends no truncate (SETATTR) and no getattr after it, so one
     * request fewer per message (doc/benchmarks.md) */
    /* (a capability Linux's FUSE offers; where macFUSE does not, no want) */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
}

const struct fuse_lowlevel_ops tree_ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .setattr = ll_setattr,
    .readlink = ll_readlink,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .readdirplus = ll_readdirplus,
    .releasedir = ll_releasedir,
    .open = ll_open,
    .read = ll_read,
    .write = ll_write,
    .release = ll_release,
    .poll = ll_poll,
    .create = ll_create,
    .mkdir = ll_mkdir,
    .unlink = deny_unlink,
    .rmdir = ll_rmdir,
    .rename = deny_rename,
};
