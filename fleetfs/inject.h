/* fleetfs/inject.h — the injector: types arrived messages into the local
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
#include "fleetfs/options.h"
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
/* inj_stop ends the thread (inj_kick stays safe); inj_free frees. */
void inj_stop(injector *in);
void inj_free(injector *in);

/* The text typed for a message: one header line (sender, msgId, what it
 * answers, and the command that replies to it: MOUNT/<reply_dir>/reply/
 * <msgId>, or MOUNT/peers/<from>/reply/<msgId> when reply_dir is NULL),
 * then the sanitised body (g_free). */
char *inj_render(const envelope *e, const char *mountpoint, const char *reply_dir);

#endif
