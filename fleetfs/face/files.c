/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/files.c — an open file of the tree: what opening, reading,
 * writing and polling each kind of node does (tree.c answers the kernel,
 * keeps the inode table and hands an open file's requests here).
 *
 * Readable files are snapshots taken at open(); the inbox is a view that
 * keeps growing (mailbox.c); ask and ask.json are askfile.c's.  A write
 * that sends a message is signed and encoded by the handler, handed to the
 * broker's publishing thread, and answered by that thread once the
 * confirm came and `sent` has its line, or with ETIMEDOUT at send_timeout
 * (sent_answered): no FUSE thread waits for the broker.
 */
#include "fleetfs/face/files.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "fleetfs/agents/agents.h"
#include "fleetfs/base/log.h"
#include "fleetfs/face/askfile.h"
#include "fleetfs/face/claims.h"
#include "fleetfs/face/hosts.h"
#include "fleetfs/face/status.h"
#include "fleetfs/os/fuseopen.h"
#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/names.h"

struct tr_file {
    node_kind kind;
    char name[ADDR_MAX_LEN + 8]; /* as node.name */
    char ref[ENV_ID_LEN + 1];    /* the msgId N_REPLY / N_HREPLY answers */
    mailbox *home;               /* a ref, as node.home */
    GString *snap;               /* readable snapshot files */
    mb_view *view;               /* inbox */
    askf *ask;                   /* ask, ask.json */
};

int tr_file_open(const rq *r, const char *path, struct fuse_file_info *fi)
{
    fleet *f = r->f;
    node n;
    int acc = fi->flags & O_ACCMODE;
    tr_file *h;

    tr_resolve_node(f, path, &n);
    if (n.k == N_NONE)
        return -ENOENT;
    /* O_TRUNC comes here (atomic_o_trunc, ll_init): fine on what one
     * writes to, refused on the rest as truncate(2) is */
    if (tr_outsider(r) ||
        (tr_is_ask(n.k)        ? acc != O_RDWR
         : n.k == N_CENSUS     ? acc == O_RDWR
         : tr_is_writable(n.k) ? acc != O_WRONLY
                               : acc != O_RDONLY) ||
        ((fi->flags & O_TRUNC) && !tr_is_writable(n.k))) {
        tr_node_clear(&n);
        return -EACCES;
    }
    if (tr_is_dir(n.k)) {
        tr_node_clear(&n);
        return -EISDIR;
    }
    h = g_new0(tr_file, 1);
    h->kind = n.k;
    g_strlcpy(h->name, n.name, sizeof h->name);
    g_strlcpy(h->ref, n.ref, sizeof h->ref);
    h->home = n.home; /* the node's ref moves to the handle */
    if (n.k == N_INBOX)
        h->view = mb_view_open(h->home, r->cx->pid);
    else if (tr_is_ask(n.k)) /* the lead asks; through to/, that agent */
        h->ask = askf_open(n.k == N_TOASK || n.k == N_TOASKJ ? h->home : f->mb);
    else if (!tr_is_writable(n.k) || (n.k == N_CENSUS && acc == O_RDONLY))
        h->snap = tr_render(f, &n, true);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    if (tr_sends_message(n.k)) /* concurrent writers publish side by side */
        fo_mark_shared_writes(fi);
    return 0;
}

void tr_file_free(tr_file *h)
{
    if (h->view)
        mb_view_close(h->home, h->view);
    if (h->ask)
        askf_release(h->ask);
    if (h->snap)
        g_string_free(h->snap, TRUE);
    mb_unref(h->home);
    g_free(h);
}
/* The reply is a copy, not the handle's snapshot: the moment the kernel
 * has the reply the reader may close the file, and its release (another
 * thread) frees the snapshot while our writev is still returning (ASan
 * caught that). */
void tr_file_read(tr_file *h, fuse_req_t req, size_t size, off_t off, int flags)
{
    char *buf;
    size_t n = 0;
    if (h->ask) {
        askf_read(h->ask, req, size, flags); /* replies now or once answered */
        return;
    }
    if (!h->view && !h->snap) {
        fuse_reply_err(req, EBADF);
        return;
    }
    buf = g_malloc(size ? size : 1);
    if (h->view) {
        n = mb_view_read(h->home, h->view, buf, size, off);
    } else if (off >= 0 && (size_t)off < h->snap->len) {
        n = MIN(size, h->snap->len - (size_t)off);
        memcpy(buf, h->snap->str + off, n);
    }
    fuse_reply_buf(req, buf, n);
    g_free(buf);
}

/* A write to a file one sends messages to, handed over: answered by
 * whoever learns its outcome (sent_answered), not by the handler. */
typedef struct {
    fuse_req_t req;
    size_t size;
} pending_write;

/* The outcome of a send (mb_send_done): on the broker's publishing thread,
 * once the confirm (or send_timeout) came and its `sent` line is recorded;
 * the low-level API lets any thread reply to a request.  No FUSE thread
 * waited for it. */
/* census: a write takes one (presence/census.c: the whole fleet heard for
 * one interval and two seconds, or the roster at once where we hear it
 * all already) and returns once it has ended, its lines in the file.
 * EAGAIN: census_every refused it; ENOTCONN: no roster connection (both
 * logged); a write while one runs waits for that one. */
static int tr_census(fleet *f)
{
    int64_t win, until;
    GString *roster;
    int rc;

    if (!f->pr || !pr_link_up(f->pr)) {
        log_warn("census: refused: this host's roster connection is not up (see presence: in "
                 "status), so the fleet cannot be heard; try again once it is");
        return ENOTCONN;
    }
    rc = pr_census_begin(f->pr, &win);
    if (rc < 0)
        return -rc;
    if (rc == 2) {
        while (pr_census_running(f->pr))
            g_usleep(50 * 1000);
        return 0;
    }
    until = g_get_monotonic_time() / 1000 + win;
    while (rc == 0 && g_get_monotonic_time() / 1000 < until)
        g_usleep(50 * 1000);
    roster = st_roster(f);
    pr_census_end(f->pr, roster->str);
    g_string_free(roster, TRUE);
    return 0;
}

static void sent_answered(void *ud, fe_code res, const char *detail)
{
    pending_write *w = ud;
    (void)detail; /* logged by the model */
    if (res == FE_OK)
        fuse_reply_write(w->req, w->size);
    else
        fuse_reply_err(w->req, fe_errno(res));
    g_free(w);
}

/* One write(2) is one message (max_write, ll_init in tree.c).  size, -errno, or
 * TR_WRITE_PENDING: a message handed to the broker, req answered later. */
int tr_file_write(const rq *r, fuse_req_t req, tr_file *h, const char *buf, size_t size, off_t off,
                  int flags)
{
    fleet *f = r->f;
    char detail[512], to[ADDR_MAX_LEN + 16];
    pending_write *w = NULL;
    fe_code res;

    /* A message file has no position (FOPEN_STREAM, fuseopen.h): every
     * write(2) reaches us at offset 0.  A piece at another offset is the
     * rest of one write the kernel cut into requests (a writev of more
     * than 256 pages of segments): its first `off` bytes went out as a
     * message already; the rest is refused, never a message of its own,
     * and the writer's writev returns `off`, a short count.  Not under
     * O_APPEND (`echo >> send`): the kernel puts each such write at the
     * size it knows, which the write before moved, so a cut write cannot
     * be told from the next one there. */
    if (off != 0 && tr_sends_message(h->kind) && !(flags & O_APPEND)) {
        log_warn("send to %s: one write was cut by the kernel into pieces (a writev of more than "
                 "256 pages of segments?): its first %lld bytes went out as one message, the "
                 "other %zu bytes are refused (EMSGSIZE) and the write returns short; gather a "
                 "message into one buffer before writing it",
                 h->name, (long long)off, size);
        return -EMSGSIZE;
    }
    if (tr_sends_message(h->kind) || h->kind == N_RESEND) {
        w = g_new0(pending_write, 1);
        w->req = req;
        w->size = size;
    }
    switch (h->kind) {
    case N_SEND:
    case N_REPLY:
    case N_ASEND:
        res = mb_send_start(f->mb, h->name, h->kind == N_REPLY ? h->ref : NULL, buf, size,
                            sent_answered, w, detail, sizeof detail);
        break;
    case N_HREPLY:
        res = mb_send_start(h->home, h->name, h->ref, buf, size, sent_answered, w, detail,
                            sizeof detail);
        break;
    case N_TO:
        res = mb_send_start(h->home, h->name, NULL, buf, size, sent_answered, w, detail,
                            sizeof detail);
        break;
    case N_GSEND:
        snprintf(to, sizeof to, "%s%s", GROUP_PREFIX, h->name);
        res = mb_send_start(f->mb, to, NULL, buf, size, sent_answered, w, detail, sizeof detail);
        break;
    case N_SENDJ:
    case N_ASENDJ:
        res =
            mb_send_json_start(f->mb, h->name, buf, size, sent_answered, w, detail, sizeof detail);
        break;
    case N_GSENDJ:
        snprintf(to, sizeof to, "%s%s", GROUP_PREFIX, h->name);
        res = mb_send_json_start(f->mb, to, buf, size, sent_answered, w, detail, sizeof detail);
        break;
    case N_TOJ:
        res = mb_send_json_start(h->home, h->name, buf, size, sent_answered, w, detail,
                                 sizeof detail);
        break;
    case N_ASK:
    case N_ASKJ:
    case N_TOASK:
    case N_TOASKJ: {
        /* answered like a send, by the publishing thread, once the broker
         * has the question and it is registered (model/ask.c): the read
         * that follows finds it */
        int e = askf_write(h->ask, h->name, h->kind == N_ASKJ || h->kind == N_TOASKJ, buf, size,
                           sent_answered, w);
        if (!e) /* w is sent_answered's now (maybe freed already) */
            return TR_WRITE_PENDING;
        g_free(w);
        return -e;
    }
    case N_RESEND:
        res = mb_resend_start(h->home, buf, size, sent_answered, w, detail, sizeof detail);
        break;
    case N_ACK:
        res = mb_ack(h->home, buf, size, detail, sizeof detail);
        break;
    case N_SUBMITTED: /* the prompt hook's report: always its own answer */
        return inj_submitted(f->inj, h->home, buf, size) ? -ENOENT : (int)size;
    case N_HSPAWN: {
        int e = hs_spawn(f, h->name, buf, size);
        return e ? -e : (int)size;
    }
    case N_HSTOP: {
        int e = hs_stop(f, h->name, buf, size);
        return e ? -e : (int)size;
    }
    case N_CENSUS: {
        int e = tr_census(f);
        return e ? -e : (int)size;
    }
    case N_CNOTE:
    case N_CLEASE: {
        const char *as = h->home ? mb_id(h->home) : NULL;
        int e = h->kind == N_CNOTE ? cl_note(f->cl, h->name, as, buf, size)
                                   : cl_lease(f->cl, h->name, as, buf, size);
        return e ? -e : (int)size;
    }
    default:
        g_free(w);
        return -EBADF;
    }
    if (w && res == FE_OK) /* w is sent_answered's now (maybe freed already) */
        return TR_WRITE_PENDING;
    g_free(w);
    return res == FE_OK ? (int)size : -fe_errno(res);
}
unsigned tr_file_poll(tr_file *h, struct fuse_pollhandle *ph)
{
    unsigned revents;
    if (h->view) {
        revents = mb_view_poll(h->home, h->view, ph);
    } else if (h->ask) {
        revents = askf_poll(h->ask, ph);
    } else {
        if (ph)
            fuse_pollhandle_destroy(ph);
        revents = tr_is_writable(h->kind) ? POLLOUT | POLLWRNORM : POLLIN | POLLRDNORM;
    }
    return revents;
}
