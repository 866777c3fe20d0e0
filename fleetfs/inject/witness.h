/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/witness.h — the agent's own word that a typed message was
 * submitted: what an entity's prompt-submit hook (`fleetfs hook`) reports
 * through its home's `submitted` file, checked against what fleetfs typed.
 *
 * One witness per injector slot.  The injector thread registers each text
 * before it types it (wit_typing: the hook may report before type()
 * returns), drops it when nothing was typed (wit_forget), and marks it
 * finished once the sender was told `injected` (wit_finished).  A FUSE
 * thread hands over the hook's report (wit_report), which is compared
 * with the text at once; the injector thread then takes the receipts to
 * send (wit_take), only for finished messages, so `confirmed` never
 * overtakes `injected`.  Thread-safe.
 */
#ifndef FLEETFS_INJECT_WITNESS_H
#define FLEETFS_INJECT_WITNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "fleetfs/model/mailbox.h" /* envelope (inject/ reaches wire/ through it) */

/* The most of a prompt a report carries; a longer one is sent as its
 * length and this much of it, and counts as holding more than was typed
 * when the typed text is shorter than its length. */
#define WIT_PROMPT_MAX (256 * 1024)

typedef struct inj_witness inj_witness;

inj_witness *wit_new(const char *who);
void wit_free(inj_witness *w);

void wit_typing(inj_witness *w, const envelope *e, const char *text);
void wit_forget(inj_witness *w, const char *msg_id);
void wit_finished(inj_witness *w, const char *msg_id);

/* buf: "<msgId> <prompt length in bytes>\n<the prompt, or its first
 * WIT_PROMPT_MAX bytes>".  0, or an errno the write returns: EINVAL
 * (malformed), ENOENT (a msgId this entity's injector did not type since
 * the mount started: refused, never a receipt), EALREADY (reported
 * before).  Logged either way. */
int wit_report(inj_witness *w, const char *buf, size_t size);

/* The sender was told confirmed another way (herdr's status): a later
 * report of msg_id sends nothing more. */
void wit_settled(inj_witness *w, const char *msg_id);
/* true: the hook reported msg_id (its receipt goes out through wit_take). */
bool wit_reported(inj_witness *w, const char *msg_id);
/* true: a hook report ever came for this entity since the mount started. */
bool wit_hook_seen(inj_witness *w);
/* The next receipt to send: true with *e (env_free it) and detail. */
bool wit_take(inj_witness *w, envelope *e, char *detail, size_t n);

#endif
