/* SPDX-License-Identifier: Apache-2.0 */
/* nullfs — the floor under fleetfs's send: a FUSE filesystem with one file,
 * `sink`, whose write(2) is answered at once with the size written, and
 * nothing else done.  `fdwrite MNT/sink N SIZE` against it measures what
 * one write costs through the kernel and libfuse on this machine (the
 * writer's system call, the request read by a FUSE thread, the reply, the
 * writer woken), which every fleetfs send pays before the broker is asked.
 * It mounts like fleetfs: libfuse's low-level API, the multi-threaded loop
 * with 16 idle threads, the open answered with direct_io.
 *
 *   nullfs MOUNTPOINT        serves in the foreground until unmounted
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#define SINK_INO 2

static void stat_of(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    } else {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = 65536;
    }
}

static void nf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;
    if (parent != FUSE_ROOT_ID || strcmp(name, "sink") != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    memset(&e, 0, sizeof e);
    e.ino = SINK_INO;
    e.attr_timeout = 1.0;
    e.entry_timeout = 1.0;
    stat_of(SINK_INO, &e.attr);
    fuse_reply_entry(req, &e);
}

static void nf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct stat st;
    (void)fi;
    if (ino != FUSE_ROOT_ID && ino != SINK_INO) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    stat_of(ino, &st);
    fuse_reply_attr(req, &st, 1.0);
}

static void nf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino != SINK_INO) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void nf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    (void)buf;
    (void)off;
    (void)fi;
    fuse_reply_write(req, size);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = nf_lookup,
    .getattr = nf_getattr,
    .open = nf_open,
    .write = nf_write,
};

int main(int argc, char **argv)
{
    char *fargv[] = {argv[0], NULL};
    struct fuse_args args = FUSE_ARGS_INIT(1, fargv);
    struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = 16};
    struct fuse_session *se;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: nullfs MOUNTPOINT\n");
        return 2;
    }
    se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) {
        fprintf(stderr, "nullfs: cannot mount %s\n", argv[1]);
        return 1;
    }
    rc = fuse_session_loop_mt(se, &lc);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}
