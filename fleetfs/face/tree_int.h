/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/tree_int.h — what the tree's files share: the kinds of
 * node a path can be, a resolved path, and one request.  tree.c answers
 * the kernel (the inode table and the low-level handlers); files.c is an
 * open file (files.h); paths.c knows the names (which path is which node,
 * and what a directory lists).
 */
#ifndef FLEETFS_TREE_INT_H
#define FLEETFS_TREE_INT_H

#include <stdbool.h>

#include <fuse_lowlevel.h>
#include <glib.h>

#include "fleetfs/face/tree.h"
#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/names.h"

typedef enum {
    N_NONE,
    N_ROOT,
    N_README,
    N_STATUS,
    N_SELF,
    N_LEADS,
    N_LEAD,
    N_INBOX,     /* <home>/inbox: a home is leads/<me>/ or a local agent's agents/<gid>/ */
    N_ACK,       /* <home>/ack */
    N_SUBMITTED, /* <home>/submitted: the agent's prompt hook reports (fleetfs hook) */
    N_HISTORY,   /* <home>/history */
    N_SENT,      /* <home>/sent */
    N_LSTATUS,   /* leads/<me>/status */
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
    N_SENDJ,     /* peers/<id>/send.json: one JSON message (body, expiresIn, replyTo) */
    N_ASENDJ,    /* agents/<gid>/send.json */
    N_GSENDJ,    /* groups/<g>/send.json */
    N_ASK,       /* peers/<id>/ask, agents/<gid>/ask: one question, its answer read back */
    N_ASKJ,      /* peers/<id>/ask.json, agents/<gid>/ask.json: the question as send.json */
    N_TOJ,       /* agents/<local gid>/to/<target>.json: send.json as that agent */
    N_TOASK,     /* agents/<local gid>/to/<target>.ask: that agent asks */
    N_TOASKJ,    /* agents/<local gid>/to/<target>.ask.json: the same, as ask.json */
    N_CLAIMS,    /* claims/, and agents/<local gid>/claims/ (home set) */
    N_CLAIM,     /* claims/<name>/ (name: the claim) */
    N_CHOLDER,   /* claims/<name>/holder: who holds it, since, token, note (JSON) */
    N_CNOTE,     /* claims/<name>/note: the holder writes its note */
    N_CLEASE,    /* claims/<name>/lease: the holder sets or renews its lease */
    N_CENSUS,    /* census: the last census (read), a new one (write) */
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

/* One request: the tree and who asks.  cx lives as long as the request:
 * not to be used after the reply. */
typedef struct {
    tree *t;
    fleet *f;
    const struct fuse_ctx *cx;
} rq;

void tr_resolve_node(const fleet *f, const char *path, node *out);
node_kind tr_resolve(const fleet *f, const char *path);
bool tr_is_dir(node_kind k);
/* fleet_view=groups: path is peers/<id>[/...] for a lead not heard whose
 * mailbox exists: it is addressed now (listed, bound, asked for its
 * heartbeat), so path resolves.  false: nothing changed. */
bool tr_address_peer(const fleet *f, const char *path);
bool tr_is_writable(node_kind k);
bool tr_sends_message(node_kind k);
bool tr_is_ask(node_kind k);
void tr_node_clear(node *n);
bool tr_outsider(const rq *r);
int tr_dir_list(const rq *r, const char *path, GPtrArray *out);
/* mkdir (take) / rmdir of claims/NAME or agents/<local gid>/claims/NAME:
 * 0 or -errno; 1: not such a path (paths.c). */
int tr_claim_op(const rq *r, const char *path, bool take);
/* render.c: a readable node's text (fresh: a status probed now), and its
 * mtime (ms since the epoch) */
GString *tr_render(fleet *f, const node *n, bool fresh);
int64_t tr_mtime(const node *n);

#endif
