/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/backend.h — what an injection backend (herdr, tmux) is: three
 * questions the injector asks — which pane (resolve), may it be typed into
 * now (status), and type this (type) — and the plain values it works from.
 *
 * Layering (SPEC section 1): backends know no mailbox and no fs_opts.  The
 * injector copies what they need into an ib_config; a backend copies it
 * again at creation, so it owns its values and the caller may free its own.
 */
#ifndef FLEETFS_HERDR_BACKEND_H
#define FLEETFS_HERDR_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "herdr/client.h"

typedef struct {
    const char *coord_id;      /* the lead: agent name, pane label, tmux pane title */
    const char *inject_target; /* NULL: find the pane by coord_id */
    const char *state_dir;     /* unused since tmux pastes through stdin */
    const char *herdr_socket;  /* herdr: NULL = by the protocol's resolution order */
    int call_ms;               /* herdr: bound of one ordinary call */
    int prompt_ms;             /* herdr: bound of agent.prompt */
    /* tmux: the programs that count as an agent (NULL-terminated; NULL or
     * empty = none, so nothing is ever typed).  See herdr/foreground.h. */
    const char *const *inject_commands;
    int settle_ms; /* tmux: from the paste's end to the carriage return that submits */
    int quiet_ms;  /* tmux: a person's keys this recent in the pane's client hold typing */
} ib_config;

typedef enum {
    IB_OK,
    IB_WAIT,  /* transient (herdr down, agent busy): wait and retry */
    IB_STALL, /* needs a person (no target, ambiguous target, a shell in the pane): retry, loudly */
} ib_verdict;

typedef enum {
    IT_TYPED,   /* the backend took the text */
    IT_REFUSED, /* nothing was typed (blocked, not ready, down, a shell): retry later */
    IT_UNKNOWN, /* no answer: it may or may not have been typed */
} ib_typed;

typedef struct {
    char id[128];   /* backend's handle: herdr pane id, tmux pane id */
    char name[160]; /* for people: "agent beta (w1:p2)" */
} ib_target;

typedef struct inj_backend {
    const char *name;
    bool has_status; /* false: no agent status (tmux): gate on the pane only, never confirm */
    /* why: the injector's words, starting "waiting: " or "stalled: " */
    ib_verdict (*resolve)(struct inj_backend *b, ib_target *t, char *why, size_t n);
    ib_verdict (*status)(struct inj_backend *b, const ib_target *t, hd_status *st, char *why,
                         size_t n);
    ib_typed (*type)(struct inj_backend *b, const ib_target *t, const char *text, char *why,
                     size_t n);
    void (*free)(struct inj_backend *b);
    /* Optional (NULL: the backend cannot tell; herdr/tmux_look.c for tmux).
     * waits: is text (just typed) still waiting unsubmitted in the input
     * line: 1 yes, 0 not seen there, -1 cannot look.  submit: one more
     * carriage return, never the text again (false and why when refused). */
    int (*waits)(struct inj_backend *b, const ib_target *t, const char *text);
    bool (*submit)(struct inj_backend *b, const ib_target *t, char *why, size_t n);
    void *priv;
} inj_backend;

inj_backend *inj_backend_herdr(const ib_config *cfg);
inj_backend *inj_backend_tmux(const ib_config *cfg);

/* Deep copy of a config (ib_config_free frees what it returned). */
ib_config *ib_config_copy(const ib_config *cfg);
void ib_config_free(ib_config *cfg);

#endif
