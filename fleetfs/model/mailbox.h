/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/mailbox.h — the mailbox model: held messages, open inbox views,
 * the sent log, history, receipts and counters, behind one lock.  The
 * files that implement it, one concern each, and the ownership rule for a
 * held message are described in mb_int.h.
 *
 * Threads: mb_deliver, mb_receipt and mb_late_confirm run on the broker
 * thread, and so do the outcomes of sends (mb_send_done); the receipts outbox has its own thread (mb_start / mb_stop); the
 * rest run on FUSE threads, the injector and the notifier.  No function
 * here holds the lock while it waits on the broker.
 */
#ifndef FLEETFS_MAILBOX_H
#define FLEETFS_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

#include "broker/conn.h"
#include "fleetfs/wire/control.h"
#include "fleetfs/wire/envelope.h"
#include "fleetfs/model/mb_broker.h"
#include "fleetfs/base/errors.h"
#include "fleetfs/config/options.h"

struct fuse_pollhandle;
typedef struct mailbox mailbox;
typedef struct mb_view mb_view;
typedef struct mb_ask mb_ask;

typedef struct {
    /* relpath (e.g. "leads/alpha/inbox") changed; called with no lock held
     * or with the mailbox lock held: it must only enqueue. */
    void (*changed)(void *ud, const char *relpath);
    /* wake a poll() waiter: the callee owns ph (wakes, then destroys it) */
    void (*poll_wake)(void *ud, struct fuse_pollhandle *ph);
    /* a message was added to the inbox (the injector wakes up) */
    void (*arrived)(void *ud);
    /* presence, for honest sends: 1 peer live, 0 not (why filled: "peer not
     * live (stale 40s)"), -1 unknown; may be NULL.  Called unlocked. */
    int (*peer_live)(void *ud, const char *peer, char *why, size_t n);
    /* the ids presence knows in group g (g_strfreev); may be NULL.  Called
     * unlocked. */
    char **(*group_members)(void *ud, const char *g);
    /* a message from `from` (a verified id) was taken into a mailbox; may be
     * NULL.  Called unlocked. */
    void (*heard_from)(void *ud, const char *from);
    void *ud;
} mb_hooks;

typedef struct {
    uint64_t sent, received, injected, acked, rejected, dead_lettered;
    uint64_t expired;          /* consumed unread: past expiresAt here (held.c) */
    uint64_t receipts_pending; /* in the outbox, not yet confirmed by the broker */
    uint64_t receipts_dropped; /* given up: expired, over the per-peer bound, refused */
    uint64_t dead_home;        /* dead letters of our own messages that came home (dead.c) */
    uint64_t dead_foreign;     /* copies in lead.<me>.dead that were not ours: changed nothing */
} mb_counters;

typedef enum { MB_INBOX, MB_SENT, MB_HISTORY, MB__FILES } mb_file;

/* br: the broker seam (mb_broker.h), copied.  Makes the host's model and
 * its first entity, the lead's mailbox, which it returns: the handle of
 * the host (mb_start, mb_receipt, mb_free take it). */
mailbox *mb_new(const fs_opts *o, const mb_hooks *hooks, const mb_broker *br);

/* ---- entities (SPEC 10): the lead is one, each local agent another ----
 * Every function below about "a mailbox" works on any of them the same
 * way: held messages, views, sent, history, the seen set and counters are
 * each entity's own; the lock, keys, receipts outbox and broker are the
 * host's.  An agent's mailbox lives while its count is held: the host's
 * list holds one (until mb_agent_retire), mb_find/mb_find_box/mb_entities
 * give one each (mb_unref).  The lead lives until mb_free. */
/* A local agent `name` (gid name@coord_id), its records in state_dir
 * (created), in groups, consumed as broker box `box`.  NULL and *err. */
mailbox *mb_agent_new(mailbox *lead, const char *name, const char *state_dir,
                      const char *const *groups, unsigned box, char **err);
/* Out of the host's list (no longer found); freed with its last ref. */
void mb_agent_retire(mailbox *mb);
/* A local agent's mailbox in the broker, through the model's seam
 * (mb_broker.h): mb_agent_serve makes its queue agent.<gid>.inbox, binds
 * it to fleet.msg with keys and consumes it as mb's box (0, or -1 and *err,
 * g_free); mb_agent_unserve stops that (br_box_remove's rules: with
 * delete_if_empty, FE_NOT_EMPTY when messages wait, nothing touched;
 * without, unbound and kept with what waits in it; detail says what
 * happened); mb_agent_served: its queue is bound and consumed. */
int mb_agent_serve(mailbox *mb, const char *const *keys, char **err);
fe_code mb_agent_unserve(mailbox *mb, bool delete_if_empty, char *detail, size_t n);
bool mb_agent_served(mailbox *mb);
mailbox *mb_ref(mailbox *mb);
void mb_unref(mailbox *mb); /* NULL is fine */
/* The entity with this id (coord_id or gid) / consumed as box, or NULL. */
mailbox *mb_find(mailbox *any, const char *id);
mailbox *mb_find_box(mailbox *any, unsigned box);
/* Every entity, the lead first (g_ptr_array_free drops the refs). */
GPtrArray *mb_entities(mailbox *any);
const char *mb_id(const mailbox *mb);   /* coord_id or gid */
const char *mb_name(const mailbox *mb); /* coord_id or the agent's name */
bool mb_is_lead(const mailbox *mb);
unsigned mb_box(const mailbox *mb);
const char *mb_state_dir(const mailbox *mb);
void mb_set_groups(mailbox *mb, const char *const *groups);
char **mb_groups(mailbox *mb); /* g_strfreev */
/* Start / stop the receipts outbox thread (after the broker is wired).
 * mb_stop_begin makes it start no more attempts and returns at once; stop
 * the broker then (its threads end the attempts in flight: a receipt not
 * confirmed stays owed, and goes again after the restart), and mb_stop
 * waits for the outbox's threads. mb_stop alone does both. */
void mb_start(mailbox *mb);
void mb_stop_begin(mailbox *mb);
void mb_stop(mailbox *mb);
/* Load the signing key, the trusted keys and the seen-set (state_dir);
 * without -o insecure a key and a trust directory are required. */
int mb_set_security(mailbox *mb, char **err);
/* "on (ed25519; N trusted keys in DIR)" or the insecure warning; g_free */
char *mb_security_words(mailbox *mb);
void mb_free(mailbox *mb);

/* broker callbacks */
br_action mb_deliver(mailbox *mb, uint64_t epoch, uint64_t tag, bool redelivered, const char *body,
                     size_t len);
void mb_late_confirm(mailbox *mb, const char *msg_id, fe_code res, bool unread);

/* broker callback for lead.<me>.dead (broker/death.h): a message this
 * host sent that the broker dead-lettered, with what its x-death says.
 * Only an envelope from one of this host's entities, carrying this host's
 * own signature (ed25519 is deterministic: signed again with our key it
 * must give the same sig), whose msgId is in that entity's sent, moves
 * that entry to `dead-lettered` (sent.c's rules); anything else changes
 * nothing, and is counted (dead_foreign) and logged (within a budget).
 * Always BR_ACK: the queue is ours alone, and what it held is told. */
br_action mb_dead_letter(mailbox *lead, const struct br_death *d, const char *body, size_t len);

/* broker callback for lead.<me>.receipts; epoch: the generation of its
 * consumer channel (BR_ACK acks it there); redelivered: the broker's flag */
br_action mb_receipt(mailbox *mb, uint64_t epoch, bool redelivered, const char *body, size_t len);
/* The control plane's answers (`spawned`, SPEC section 11) come on the
 * receipt queue too.  mb_receipt hands one to fn, on the broker thread,
 * only once it is checked: it decodes (wire/control.h), ctl_accept passes
 * (signed by the key trusted for its `from` — also with -o insecure: the
 * control plane is never unsigned —, to this host, not expired), and its
 * msgId was not applied before (the receipts' seen set; a copy the broker
 * marks redelivered is acked and not handed again).  fn returns 0 when the
 * answer changed something, else -1 with why (logged, acked: a second
 * answer to one request is not an attack).  Without fn (NULL, the
 * default) a `spawned` is refused like any bad receipt (fleet.dlq). */
typedef int (*mb_control_answer_fn)(void *ud, const ctl_env *ans, char *why, size_t n);
void mb_set_control_answers(mailbox *lead, mb_control_answer_fn fn, void *ud);
/* Signs a control request of this host (hosts/<h>/spawn, stop) with the
 * lead's key: 0, or -1 when there is none (-o insecure: the control plane
 * is never unsigned) or signing failed. */
int mb_sign_control(mailbox *lead, ctl_env *e);
/* The far host's side of the control plane (fleetfs/spawn/spawnd.c).
 * mb_control_accept: a request's checks before anything acts on it:
 * ctl_accept with the trusted keys (signed by the key trusted for `from`,
 * to this host, within its short expiry); never without trusted keys (-o
 * insecure): the control plane is never unsigned.  0, or -1 with why.
 * mb_control_send: an answer (`spawned`, its header set by ctl_init)
 * signed with this host's key and queued in the receipts outbox to
 * lead.<answer->to>.receipts, durable before it returns, sent and retried
 * like a receipt until its expiresAt.  0, or -1 (no key, cannot sign). */
int mb_control_accept(mailbox *lead, const ctl_env *req, char *why, size_t n);
int mb_control_send(mailbox *lead, ctl_env *answer);
/* Tell orig's sender what happened to it: queued in the durable outbox,
 * sent when the broker is reachable. */
void mb_send_receipt(mailbox *mb, const envelope *orig, const char *state, const char *detail);

/* The injector's side.  next: a copy (env_free it) of the oldest held
 * message nobody has claimed, from the current consumer generation.
 * claim: take it (or give it back) so the ack file keeps its hands off;
 * false if it is gone or already in that state.  consume (requires the
 * claim, else FE_NOT_HELD): record it in history as `how` (injected /
 * uncertain), queue the receipt, remove it, ack the broker copy. */
bool mb_next_for_injection(mailbox *mb, envelope *out);
bool mb_claim(mailbox *mb, const char *msg_id, bool claim);
fe_code mb_consume(mailbox *mb, const char *msg_id, const char *how, const char *detail);
/* Requires the claim: when msg_id is past its expiresAt (this host's
 * clock), consume it as `expired` (never typed: history, a signed
 * `expired` receipt to its sender, the broker ack) and return true; else
 * false and nothing changed.  The injector asks right before it types. */
bool mb_expire_claimed(mailbox *mb, const char *msg_id);
/* The inject journal's word (how: injected or uncertain) on msg_id from
 * `from`, typed (or being typed) when fleetfs stopped, whose copy never
 * came back by its expiresAt: consumed as that (history, a receipt to
 * its sender, the seen set; journaled.c): 1.  0, nothing done, when this
 * mailbox holds it or consumed or refused it already (or the arguments
 * are not a message's); -1 when its expiresAt has not passed yet (it may
 * still come back: ask again later). */
int mb_settle_journaled(mailbox *mb, const char *msg_id, const char *from, const char *expires_at,
                        const char *how, const char *detail);
/* What the injector is doing, in words (status files); g_free the copy. */
void mb_set_injector(mailbox *mb, const char *words);
char *mb_injector_words(mailbox *mb);

/* A send's outcome, as mb_send returns it (res, and detail for the log):
 * told once, after its `sent` line is recorded, on the thread that
 * learnt it: the broker's publishing thread (the confirm, or its
 * send_timeout timer), or the caller's own when known at once. */
typedef void (*mb_send_done)(void *ud, fe_code res, const char *detail);
/* The sends without the wait (SPEC section 6, revised): the caller's
 * thread validates, signs and encodes, and hands the bytes over.  FE_OK:
 * done is told the outcome once (maybe before this returns); anything
 * else is the outcome, known at once (refused, nothing published; or,
 * with a broker seam that cannot publish without waiting, what the
 * publish said), and done is not told.  Otherwise as mb_send, mb_send_json
 * and mb_resend below, which are these with a wait for done. */
fe_code mb_send_start(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                      size_t len, mb_send_done done, void *ud, char *detail, size_t dlen);
fe_code mb_send_json_start(mailbox *mb, const char *to, const char *data, size_t len,
                           mb_send_done done, void *ud, char *detail, size_t dlen);
fe_code mb_resend_start(mailbox *mb, const char *data, size_t len, mb_send_done done, void *ud,
                        char *detail, size_t dlen);

/* One write to peers/<peer>/send (reply_to NULL) or to
 * peers/<peer>/reply/<reply_to>: validate, wrap, sign, publish, wait,
 * record. */
fe_code mb_send(mailbox *mb, const char *peer, const char *reply_to, const char *data, size_t len,
                char *detail, size_t dlen);
/* One write to a send.json (peers/<x>/, agents/<gid>/, groups/<g>/: `to`
 * is x, gid or group:<g>): one JSON object {"body": TEXT, "expiresIn":
 * DURATION, "replyTo": MSGID}, body required.  expiresIn (a duration
 * string as in the options, or a number of seconds; 1 s to message_ttl)
 * sets the lifetime (default expires_in, else message_ttl); replyTo must
 * name a message `to` sent here (a group: anyone).  Anything else, an
 * unknown key included, is FE_BAD_INPUT (EINVAL), nothing published;
 * otherwise as mb_send. */
fe_code mb_send_json(mailbox *mb, const char *to, const char *data, size_t len, char *detail,
                     size_t dlen);
/* One write to leads/<me>/resend: the msgId of an `unconfirmed` entry of
 * sent; its exact signed envelope (same msgId) is published again.  The
 * receiver's seen set keeps it to one delivery. */
fe_code mb_resend(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen);
/* msg_id is a message peer sent us (held, or in history). */
bool mb_known_from(mailbox *mb, const char *msg_id, const char *peer);
/* The msgIds of messages from peer (NULL: anyone) that are held or in
 * history. */
GPtrArray *mb_ids_from(mailbox *mb, const char *peer);
/* Who sent msg_id to this mailbox (held, or in history): its id into out. */
bool mb_sender_of(mailbox *mb, const char *msg_id, char *out, size_t n);
/* A receipt from peer `from` about msg_id: move its sent entry forward
 * (never back).  False when there is no such entry or it is further along. */
bool mb_sent_update(mailbox *mb, const char *msg_id, const char *from, const char *state,
                    const char *detail);
/* One write to the ack file: msgIds one per line, or "all".  Returns once
 * the messages are consumed here (history written, receipts queued); the
 * broker copies are acked right after, or on their redelivery when the
 * connection dropped first.  FE_NOT_CONNECTED (nothing done) while the
 * broker is not connected. */
fe_code mb_ack(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen);

/* Open inbox readers: what was pending at open, then every later arrival. */
mb_view *mb_view_open(mailbox *mb, pid_t pid);
size_t mb_view_read(mailbox *mb, mb_view *v, char *buf, size_t size, off_t off);
/* POLLIN when unread data is there; otherwise keeps ph to wake later. */
unsigned mb_view_poll(mailbox *mb, mb_view *v, struct fuse_pollhandle *ph);
void mb_view_close(mailbox *mb, mb_view *v);
/* st_size of inbox for a caller: its own view's size when it has one open
 * (so tail -f never sees a shrink), else what is pending now. */
size_t mb_inbox_size(mailbox *mb, pid_t pid);

/* A snapshot of `sent` (MB_SENT) or `history` (MB_HISTORY). */
GString *mb_render(mailbox *mb, mb_file f);
void mb_counters_get(mailbox *mb, mb_counters *out, unsigned *held);
/* The same summed over every entity of the host (the root status). */
void mb_counters_total(mailbox *any, mb_counters *out, unsigned *held);
/* "reason: count" lines of rejections, for status */
GString *mb_render_rejections(mailbox *mb);
int64_t mb_mtime(mailbox *mb, mb_file f); /* ms since epoch */
/* The state_dir files' health, for status: "ok", or "degraded: " with each
 * file whose last write failed (a full disk) and why; g_free. */
char *mb_state_words(mailbox *mb);
/* Current size of sent / history (O(1), for getattr); MB_INBOX: pending. */
size_t mb_size(mailbox *mb, mb_file f);

/* ---- ask and answer (issue 36) ----
 * peers/<x>/ask and agents/<gid>/ask: one write is a question, and the
 * reply whose replyTo is its msgId, from the one asked, is the answer:
 * kept for the asker (never shown in the inbox nor typed) until it reads
 * it, when it is consumed (`acked`, with a receipt, the broker ack).  An
 * asker that closes first leaves an unread answer, or one that comes
 * later, to arrive as an ordinary reply.  ready(ud) is called whenever
 * mb_ask_take may give something new (the answer came, the question's
 * lifetime ended, its receiver refused it), with the model's lock held,
 * on the broker's or the notifier's thread: it must only enqueue. */
typedef enum {
    MB_ASK_NOTHING,  /* nothing asked on it yet */
    MB_ASK_WAITING,  /* asked, no answer yet */
    MB_ASK_ANSWERED, /* *body is the answer (handed once) */
    MB_ASK_DONE,     /* the answer was handed before */
    MB_ASK_EXPIRED,  /* the question's lifetime ended without an answer */
    MB_ASK_REFUSED,  /* the receiver refused the question, or its dead letter came home (why) */
} mb_ask_result;
mb_ask *mb_ask_open(mailbox *mb, void (*ready)(void *ud), void *ud);
/* One write: the question to `to` (a coord_id or gid), as text (lifetime
 * ask_timeout) or, json, as send.json takes it ({"body","expiresIn",
 * "replyTo"}; expiresIn default ask_timeout).  Like mb_send_start, the
 * caller's thread signs and hands it over, and does not wait: 0, and done
 * is told the send's outcome once (on the publishing thread, at the
 * confirm or at send_timeout; maybe before this returns), after the
 * question is registered as awaited (FE_OK: a read then waits for its
 * answer) or dropped (nothing is awaited then); or, known at once, EBUSY
 * (this ask has its question already) or the errno of the refused send,
 * and done is not told.  mb_ask_send is the same with a wait for done:
 * 0 or an errno. */
int mb_ask_send_start(mb_ask *a, const char *to, bool json, const char *data, size_t len,
                      mb_send_done done, void *ud);
int mb_ask_send(mb_ask *a, const char *to, bool json, const char *data, size_t len);
mb_ask_result mb_ask_take(mb_ask *a, char **body, size_t *len, char *why, size_t n);
/* POLLIN when mb_ask_take would not wait; POLLOUT before the question;
 * otherwise keeps ph to wake later. */
unsigned mb_ask_poll(mb_ask *a, struct fuse_pollhandle *ph);
void mb_ask_close(mb_ask *a);

/* Once a second: forget held messages of a lost connection that the
 * broker did not redeliver. */
void mb_tick(mailbox *mb);

#endif
