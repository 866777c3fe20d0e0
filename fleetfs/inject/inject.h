/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/inject.h — the injector: types arrived messages into the local
 * lead's pane, one at a time, oldest first, at most once, only when the
 * agent is ready, and tells the sender what happened (SPEC section 7).
 *
 * Backends (herdr, tmux; herdr/backend.h) answer three questions: which
 * pane (resolve), is the agent ready (status), and type this (type); they
 * get plain values (ib_config), never fs_opts.  The injector owns the
 * policy: the gate, the at-most-once journal, confirmation, receipts, and
 * the words `status` shows.
 */
#ifndef FLEETFS_INJECT_H
#define FLEETFS_INJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/model/mailbox.h"
#include "fleetfs/config/options.h"
#include "herdr/backend.h"

typedef struct injector injector;

/* NULL when o->inject resolves to none (status says so). */
/* mountpoint: named in the header's reply command. */
injector *inj_start(const fs_opts *o, mailbox *mb, const char *mountpoint);
/* Serve one more local entity (an agent), its pane found by its name or
 * target (NULL); inj_remove stops serving it (the slot's last turn may
 * still be under way: it holds its own ref of mb).  With in NULL (no
 * backend) the entity's status says so. */
void inj_add(injector *in, mailbox *mb, const char *target);
void inj_remove(injector *in, mailbox *mb);
void inj_kick(injector *in);
/* A prompt hook's report for mb's pane (`fleetfs hook` writes it to the
 * home's `submitted` file; fleetfs/inject/witness.h): 0, or the errno the
 * write returns (ENOENT: not a msgId typed here, or no injector). */
int inj_submitted(injector *in, mailbox *mb, const char *buf, size_t size);
/* inj_stop ends the thread (inj_kick stays safe); inj_free frees. */
void inj_stop(injector *in);
void inj_free(injector *in);

/* Type text into mb's pane once, before any message waiting for it: the
 * brief of an agent this host started for a remote lead (SPEC section
 * 11).  Through mb's slot, with the gate and the journal of a message
 * under id, so id is never typed twice, across a restart too.  Blocks up
 * to timeout_ms: 0 typed; -1 and why (no backend, no slot for mb, not
 * typed in time, typed with no answer, or typed before). */
int inj_type_once(injector *in, mailbox *mb, const char *id, const char *text, int timeout_ms,
                  char *why, size_t n);
/* The text typed for a brief: one header line (from whom, the request,
 * the agent's gid, and how it writes back: MOUNT/agents/<gid>/to/<from>),
 * then the sanitised brief (g_free). */
char *inj_render_brief(const char *from, const char *request_id, const char *gid,
                       const char *mountpoint, const char *brief, size_t len);

/* The text typed for a message: one header line (sender, msgId, what it
 * answers, and the command that replies to it: MOUNT/<reply_dir>/reply/
 * <msgId>, or MOUNT/peers/<from>/reply/<msgId> when reply_dir is NULL),
 * then the sanitised body (g_free). */
/* A message that lives at most this long (expiresAt - sentAt) is typed
 * with "reply by <expiresAt>": an ask's question, or a short send.json. */
#define INJ_SHORT_LIFE_MS (60 * 60 * 1000)
char *inj_render(const envelope *e, const char *mountpoint, const char *reply_dir);

#endif
