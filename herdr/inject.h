/* herdr/inject.h — the injector: types arrived messages into the local
 * lead's pane, one at a time, oldest first, at most once, only when the
 * agent is ready, and tells the sender what happened (SPEC section 7).
 *
 * Backends (herdr, tmux) answer three questions: which pane (resolve), is
 * the agent ready (status), and type this (type).  The injector owns the
 * policy: the gate, the at-most-once journal, confirmation, receipts, and
 * the words `status` shows.
 */
#ifndef FLEETFS_HERDR_INJECT_H
#define FLEETFS_HERDR_INJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/mailbox.h"
#include "fleetfs/options.h"
#include "herdr/client.h"

typedef enum {
    IB_OK,
    IB_WAIT,  /* transient (herdr down, agent busy): wait and retry */
    IB_STALL, /* needs a person (no target, ambiguous target): retry, loudly */
} ib_verdict;

typedef enum {
    IT_TYPED,   /* the backend took the text */
    IT_REFUSED, /* nothing was typed (blocked, not ready, down): retry later */
    IT_UNKNOWN, /* no answer: it may or may not have been typed */
} ib_typed;

typedef struct {
    char id[128];   /* backend's handle: herdr pane id, tmux pane id */
    char name[160]; /* for people: "agent beta (w1:p2)" */
} ib_target;

typedef struct inj_backend {
    const char *name;
    bool has_status; /* false: no agent status (tmux): gate on the pane only, never confirm */
    ib_verdict (*resolve)(struct inj_backend *b, ib_target *t, char *why, size_t n);
    ib_verdict (*status)(struct inj_backend *b, const ib_target *t, hd_status *st, char *why,
                         size_t n);
    ib_typed (*type)(struct inj_backend *b, const ib_target *t, const char *text, char *why,
                     size_t n);
    void (*free)(struct inj_backend *b);
    const fs_opts *o;
    void *priv;
} inj_backend;

inj_backend *inj_backend_herdr(const fs_opts *o);
inj_backend *inj_backend_tmux(const fs_opts *o);

typedef struct injector injector;

/* NULL when o->inject resolves to none (status says so). */
injector *inj_start(const fs_opts *o, mailbox *mb);
void inj_kick(injector *in);
/* inj_stop ends the thread (inj_kick stays safe); inj_free frees. */
void inj_stop(injector *in);
void inj_free(injector *in);

/* The text typed for a message: header line + sanitised body (g_free). */
char *inj_render(const envelope *e);

#endif
