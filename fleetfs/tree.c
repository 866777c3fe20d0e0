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
#include "fleetfs/status.h"

typedef enum {
    N_NONE,
    N_ROOT,
    N_README,
    N_STATUS,
    N_SELF,
    N_LEADS,
    N_LEAD,
    N_INBOX,
    N_ACK,
    N_HISTORY,
    N_SENT,
    N_LSTATUS,
    N_PEERS,
    N_PEER,
    N_SEND,
    N_PSTATUS,
    N_REPLYDIR, /* peers/<id>/reply/ */
    N_REPLY,    /* peers/<id>/reply/<msgId>: a send that answers msgId */
    N_RESEND,   /* leads/<me>/resend */
    N_ROSTER,
} node_kind;

typedef struct {
    node_kind kind;
    char name[64];            /* the peer of N_PEER / N_SEND / N_PSTATUS / N_REPLY */
    char ref[ENV_ID_LEN + 1]; /* the msgId N_REPLY answers */
    GString *snap;            /* readable snapshot files */
    mb_view *view;            /* inbox */
} handle;

static fleet *F(void)
{
    return fuse_get_context()->private_data;
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

static node_kind lead_file(const char *s)
{
    static const struct {
        const char *name;
        node_kind kind;
    } files[] = {{"inbox", N_INBOX}, {"ack", N_ACK},        {"history", N_HISTORY},
                 {"sent", N_SENT},   {"status", N_LSTATUS}, {"resend", N_RESEND}};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
        if (strcmp(s, files[i].name) == 0)
            return files[i].kind;
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

/* path -> node; name receives the peer where there is one, ref the msgId
 * a reply answers. */
static node_kind resolve2(const fleet *f, const char *path, char name[64], char ref[ENV_ID_LEN + 1])
{
    gchar **c = g_strsplit(path + 1, "/", 0);
    guint n = g_strv_length(c);
    node_kind k = N_NONE;

    name[0] = '\0';
    ref[0] = '\0';
    if (n == 0 || (n == 1 && !c[0][0]))
        k = N_ROOT;
    else if (n == 1)
        k = !strcmp(c[0], "README")   ? N_README
            : !strcmp(c[0], "status") ? N_STATUS
            : !strcmp(c[0], "self")   ? N_SELF
            : !strcmp(c[0], "leads")  ? N_LEADS
            : !strcmp(c[0], "peers")  ? N_PEERS
            : !strcmp(c[0], "roster") ? N_ROSTER
                                      : N_NONE;
    else if (!strcmp(c[0], "leads") && !strcmp(c[1], f->opts->coord_id))
        k = n == 2 ? N_LEAD : n == 3 ? lead_file(c[2]) : N_NONE;
    else if (!strcmp(c[0], "peers") && fleet_is_peer(f, c[1])) {
        g_strlcpy(name, c[1], 64);
        k = n == 2 ? N_PEER : peer_file(f, c, n, ref);
    }
    g_strfreev(c);
    return k;
}

static node_kind resolve(const fleet *f, const char *path, char name[64])
{
    char ref[ENV_ID_LEN + 1];
    return resolve2(f, path, name, ref);
}

static bool is_dir(node_kind k)
{
    return k == N_ROOT || k == N_LEADS || k == N_LEAD || k == N_PEERS || k == N_PEER ||
           k == N_REPLYDIR;
}

static bool is_writable(node_kind k)
{
    return k == N_ACK || k == N_SEND || k == N_REPLY || k == N_RESEND;
}

/* A snapshot of a readable file; fresh: may ask the broker. */
static GString *render(fleet *f, node_kind k, const char *name, bool fresh)
{
    switch (k) {
    case N_README:
        return g_string_new(st_readme());
    case N_STATUS:
        return st_root(f);
    case N_SENT:
        return mb_render(f->mb, MB_SENT);
    case N_HISTORY:
        return mb_render(f->mb, MB_HISTORY);
    case N_LSTATUS:
        return st_lead(f, fresh);
    case N_PSTATUS:
        return st_peer(f, name, fresh);
    case N_ROSTER:
        return st_roster(f);
    default:
        return g_string_new(NULL);
    }
}

static int64_t mtime_of(fleet *f, node_kind k)
{
    switch (k) {
    case N_INBOX:
        return mb_mtime(f->mb, MB_INBOX);
    case N_SENT:
        return mb_mtime(f->mb, MB_SENT);
    case N_HISTORY:
        return mb_mtime(f->mb, MB_HISTORY);
    default:
        return env_now_ms();
    }
}

static int tree_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    fleet *f = F();
    char name[64];
    node_kind k = resolve(f, path, name);
    int64_t mt;
    (void)fi;

    /* presence: the poker announcing peers/<id> coming or going */
    if (k == N_PEER || k == N_NONE) {
        int pretend = nt_pretend(g_atomic_pointer_get(&f->nt), fuse_get_context()->pid, path + 1);
        if (pretend == 1)
            return -ENOENT;
        if (pretend == 2)
            k = N_PEER;
    }
    if (k == N_NONE)
        return -ENOENT;
    if (k != N_ROOT && outsider())
        return -EACCES;
    memset(st, 0, sizeof *st);
    st->st_uid = f->uid;
    st->st_gid = f->gid;
    if (is_dir(k)) {
        st->st_mode = S_IFDIR | 0500;
        st->st_nlink = 2;
    } else if (k == N_SELF) {
        st->st_mode = S_IFLNK | 0777;
        st->st_nlink = 1;
        st->st_size = (off_t)strlen(f->opts->coord_id) + 6;
    } else {
        st->st_mode = S_IFREG | (is_writable(k) ? 0200 : 0400);
        st->st_nlink = 1;
        if (k == N_INBOX) {
            st->st_size = (off_t)mb_inbox_size(f->mb, fuse_get_context()->pid);
        } else if (k == N_SENT || k == N_HISTORY) {
            st->st_size = (off_t)mb_size(f->mb, k == N_SENT ? MB_SENT : MB_HISTORY);
        } else if (!is_writable(k)) {
            GString *s = render(f, k, name, false);
            st->st_size = (off_t)s->len;
            g_string_free(s, TRUE);
        }
    }
    mt = mtime_of(f, k);
    st->st_mtim.tv_sec = mt / 1000;
    st->st_mtim.tv_nsec = (mt % 1000) * 1000000;
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
    /* stdio sizes its buffer from st_blksize: a big one keeps a message
     * written by printf(1) or cat(1) in one write(2), so one message */
    st->st_blksize = is_writable(k) ? 1024 * 1024 : 4096;
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int tree_readlink(const char *path, char *buf, size_t size)
{
    fleet *f = F();
    char name[64];
    if (outsider())
        return -EACCES;
    if (resolve(f, path, name) != N_SELF)
        return -EINVAL;
    snprintf(buf, size, "leads/%s", f->opts->coord_id);
    return 0;
}

static int tree_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                        struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    fleet *f = F();
    char name[64];
    node_kind k = resolve(f, path, name);
    (void)off;
    (void)fi;
    (void)flags;

    if (!is_dir(k))
        return k == N_NONE ? -ENOENT : -ENOTDIR;
    if (outsider())
        return -EACCES;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    switch (k) {
    case N_ROOT: {
        static const char *top[] = {"README", "status", "self", "leads", "peers", "roster"};
        for (size_t i = 0; i < G_N_ELEMENTS(top); i++)
            fill(buf, top[i], NULL, 0, 0);
        break;
    }
    case N_LEADS:
        fill(buf, f->opts->coord_id, NULL, 0, 0);
        break;
    case N_LEAD: {
        static const char *files[] = {"inbox", "ack", "history", "sent", "status", "resend"};
        for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
            fill(buf, files[i], NULL, 0, 0);
        break;
    }
    case N_PEERS: {
        /* presence: configured peers plus the discovered ones */
        char **peers = f->pr ? pr_peers(f->pr) : g_strdupv(f->opts->peers);
        for (char **p = peers; *p; p++)
            fill(buf, *p, NULL, 0, 0);
        g_strfreev(peers);
        break;
    }
    case N_PEER:
        fill(buf, "send", NULL, 0, 0);
        fill(buf, "status", NULL, 0, 0);
        fill(buf, "reply", NULL, 0, 0);
        break;
    case N_REPLYDIR: {
        GPtrArray *ids = mb_ids_from(f->mb, name);
        for (guint i = 0; i < ids->len; i++)
            fill(buf, ids->pdata[i], NULL, 0, 0);
        g_ptr_array_free(ids, TRUE);
        break;
    }
    default:
        break;
    }
    return 0;
}

static int tree_open(const char *path, struct fuse_file_info *fi)
{
    fleet *f = F();
    char name[64], ref[ENV_ID_LEN + 1];
    node_kind k = resolve2(f, path, name, ref);
    int acc = fi->flags & O_ACCMODE;
    handle *h;

    if (k == N_NONE)
        return -ENOENT;
    if (outsider())
        return -EACCES;
    if (is_dir(k))
        return -EISDIR;
    if (is_writable(k) ? acc != O_WRONLY : acc != O_RDONLY)
        return -EACCES;
    h = g_new0(handle, 1);
    h->kind = k;
    g_strlcpy(h->name, name, sizeof h->name);
    g_strlcpy(h->ref, ref, sizeof h->ref);
    if (k == N_INBOX)
        h->view = mb_view_open(f->mb, fuse_get_context()->pid);
    else if (!is_writable(k))
        h->snap = render(f, k, name, true);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

static int tree_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    handle *h = (handle *)(uintptr_t)fi->fh;
    (void)path;
    if (h->view)
        return (int)mb_view_read(F()->mb, h->view, buf, size, off);
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
    char detail[512];
    fe_code r;
    (void)path;
    (void)off;

    if (h->kind == N_SEND || h->kind == N_REPLY)
        r = mb_send(f->mb, h->name, h->kind == N_REPLY ? h->ref : NULL, buf, size, detail,
                    sizeof detail);
    else if (h->kind == N_RESEND)
        r = mb_resend(f->mb, buf, size, detail, sizeof detail);
    else if (h->kind == N_ACK)
        r = mb_ack(f->mb, buf, size, detail, sizeof detail);
    else
        return -EBADF;
    return r == FE_OK ? (int)size : -fe_errno(r);
}

static int tree_release(const char *path, struct fuse_file_info *fi)
{
    handle *h = (handle *)(uintptr_t)fi->fh;
    (void)path;
    if (h->view)
        mb_view_close(F()->mb, h->view);
    if (h->snap)
        g_string_free(h->snap, TRUE);
    g_free(h);
    return 0;
}

static int tree_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    fleet *f = F();
    char name[64];
    node_kind k = resolve(f, path, name);
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
        *reventsp = mb_view_poll(F()->mb, h->view, ph);
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
    (void)mode;
    if (resolve(F(), path, (char[64]){0}) != N_NONE)
        return -EEXIST;
    /* echo > peers/x/reply/<unknown msgId> creates: there is no such
     * message to answer */
    snprintf(parent, sizeof parent, "%.*s", (int)(slash ? slash - path : 0), path);
    return resolve(F(), parent, (char[64]){0}) == N_REPLYDIR ? -ENOENT : -EACCES;
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

static int tree_mkdir(const char *path, mode_t mode)
{
    if (entry_poke(path, true) == 0)
        return 0;
    return deny_path(path, mode);
}

static int tree_rmdir(const char *path)
{
    if (entry_poke(path, false) == 0)
        return 0;
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
    return resolve(F(), path, (char[64]){0}) == N_NONE ? -ENOENT : 0;
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
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
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
