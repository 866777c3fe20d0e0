/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/mb_int.h — the mailbox model's private state, shared by the files
 * that each own one concern of it:
 *
 *   mailbox.c   lifecycle, counters, rendering for the tree, the tick: the
 *               top, which opens, ticks and frees every part
 *   entity.c    an entity as every part reaches it: references, look-up,
 *               names, the change hook: the bottom, calling no part
 *   held.c      held messages: arrivals, the claim, acks, the one remove path
 *   accept.c    acceptance: signatures, trust reload, policy, the seen sets,
 *               the rate of refusal receipts
 *   sent.c      the sent log and its state machine
 *   send.c      sending: one write, one signed message, its outcome told
 *   history.c   history (and which msgIds it names, for replies)
 *   views.c     open inbox readers (tail -f) and poll
 *   receipts.c  receipts in (lead.<me>.receipts) and out (the durable outbox)
 *   dead.c      dead letters of our own messages, home (lead.<me>.dead)
 *   ask.c       ask and answer: the asker's side, the answer kept for it
 *   asks.c      the open questions, ended by an answer, a refusal, expiry
 *
 * One lock (mailbox.lock) guards everything in struct mailbox.  Functions
 * named *_locked expect it held.  No function holds it while it waits on
 * the broker: they copy what they need, unlock, call the broker, re-lock
 * and look the message up again by msgId (it may be gone by then).
 *
 * Ownership of a held message: it lives in `held` until exactly one path
 * removes it, held_remove_locked, always under the lock.  Whoever consumes
 * it (the ack file, or the injector holding its claim) records history and
 * queues the receipt first, removes it, and acks the broker copy after
 * unlocking; an ack that is lost with a connection is redone when the
 * broker redelivers the message (the seen set has its msgId as consumed,
 * with the consumer generation it was acked on: accept.c).
 */
#ifndef FLEETFS_MB_INT_H
#define FLEETFS_MB_INT_H

#include "fleetfs/model/mailbox.h"

#include "fleetfs/store/applog.h"
#include "fleetfs/model/mb_broker.h"
#include "fleetfs/store/seen.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

/* an entity id: a coord_id (63) or a gid (32 + 1 + 63), with room */
#define MB_ID_MAX 128
/* the topic exchange of agents and broadcasts (SPEC 10) */
#define MB_EXCHANGE_MSG "fleet.msg"
#define SENT_MAX 1000
#define HISTORY_MAX 1000
#define STALE_GRACE_MS 10000
#define CLOCK_SKEW_MS (5 * 60 * 1000)
/* the message seen set, per class (store/seen.h): consumed msgIds must
 * outnumber what prefetch can hold unacked (a lost ack comes back for at
 * most that many), and stay many more than a lead consumes within one
 * message_ttl; a refusal flood only churns its own class */
#define SEEN_CAP 100000
#define SEEN_DELIVERED_CAP 65536
#define SEEN_REFUSED_CAP 10000
#define PREFETCH_MAX 65535 /* AMQP's basic.qos prefetch-count is 16 bits */
_Static_assert(SEEN_CAP > PREFETCH_MAX && SEEN_DELIVERED_CAP > PREFETCH_MAX,
               "the seen set must cover every message prefetch can hold");
/* receipts have their own set (one flood must not flush the other), and
 * only receipts about a `sent` entry are recorded: SENT_MAX entries with a
 * handful of receipts each */
#define RECEIPTS_SEEN_CAP (20 * SENT_MAX)
/* refusal receipts (and their history lines) to one sender: a burst of
 * REFUSAL_BURST, then one per REFUSAL_EVERY_MS */
#define REFUSAL_BURST 10
#define REFUSAL_EVERY_MS 6000
/* "a receipt changed nothing" log lines, per sender: the same budget */
#define RECEIPT_LOG_BURST 10
#define RECEIPT_LOG_EVERY_MS 6000
/* send.c: one published-unread (or not-known-whether-read) line per peer
 * and kind a minute */
#define SEND_LOG_EVERY_MS 60000
#define VIEW_KEEP (256 * 1024)       /* bytes an open inbox keeps behind its reader */
#define VIEW_AHEAD (4 * 1024 * 1024) /* bytes an open inbox keeps unread ahead of it */

typedef enum {
    HELD_FREE,   /* anyone may consume it (the ack file) or claim it */
    HELD_TYPING, /* claimed by the injector: only it consumes or releases it */
    HELD_ASKED,  /* the answer to an open ask (ask.c): its asker's alone, not in the
                    inbox (nor held_bytes, nor a view) until the asker closes */
} held_owner;

typedef struct {
    envelope env;
    char received_at[40];
    bool redelivered;
    held_owner owner;
    uint64_t gen, tag;  /* consumer generation and delivery tag of its latest delivery */
    int64_t expires_ms; /* its expiresAt (wall clock ms): past it, it is dropped unread */
    char *line;         /* the inbox line, "\n"-terminated */
    size_t line_len;
    bool shown; /* a reader of an open inbox read (part of) its line (views.c) */
} held_msg;

/* Marks (store/seen.h) of a consumed msgId whose broker copy may still be
 * in its queue, so that its first copy on a later consumer generation,
 * flagged redelivered or not, is the broker's own and is acked without
 * being shown or dead-lettered (held.c, receipts.c).  Any other mark is
 * the generation the ack went out on (0: unknown, after a restart). */
#define ACK_NOT_SENT UINT64_MAX       /* the ack could not be sent at all */
#define ACK_IN_DOUBT (UINT64_MAX - 1) /* sent; its channel ended before it was surely taken */
/* A broker holds at most `prefetch` unacked messages of one consumer, so
 * the acks it never took when a channel ended are among the last
 * `prefetch` that went out on it; the acks of two threads (the ack file,
 * the injector) may pass each other on the way to the broker thread, one
 * in flight each: DOUBT_SLACK covers them. */
#define DOUBT_SLACK 64

/* accept.c: the msgIds whose acks went out last on one consumer
 * generation (the newest `prefetch` + DOUBT_SLACK); when a newer one is
 * seen, those still marked with it become ACK_IN_DOUBT */
typedef struct {
    uint64_t gen; /* the generation they went out on; 0: none yet */
    GQueue ids;   /* char*, oldest first */
} ack_doubt;

typedef struct mb_outbox mb_outbox;
typedef struct mb_host mb_host;

/* history.c: a msgId in history, with the number of lines naming it (a
 * message refused and later resent, or consumed twice under one msgId,
 * has several) */
typedef struct {
    unsigned lines;
    char from[];
} hist_ref;

/* What every entity of one daemon shares: the lock, the options, the hooks,
 * the broker seam, the keys, the receipts (one receipt queue and one
 * durable outbox per host), the rejection counts the root status shows,
 * and the entities themselves.  The lead's mailbox is entities[0]. */
struct mb_host {
    GMutex lock; /* the one lock of the model, for every entity */
    const fs_opts *o;
    mb_hooks hooks;
    mb_broker br;
    GPtrArray *entities; /* mailbox*, [0] the lead; others: local agents */

    /* accept.c */
    sig_key *key;            /* NULL only with insecure */
    sig_trust *trust;        /* follows the directory: accept_trust_fresh_locked */
    int64_t trust_loaded;    /* the directory's sig_trust_stamp when it was read */
    int64_t trust_checked;   /* monotonic ms of the last look at it */
    seen_set *receipts_seen; /* receipts applied (their own msgIds) */
    ack_doubt receipt_doubt; /* the last receipts acked, on their consumer generation */
    char seen_err[200];      /* why a seen set could not be written, or "" */
    GHashTable *refusals;    /* sender -> rate budget of refusal receipts (accept.c) */

    /* receipts.c */
    mb_outbox *outbox;
    GHashTable *receipt_logs;        /* peer -> rate budget of "nothing to update" lines */
    GHashTable *send_logs;           /* peer and kind -> budget of published-unread lines */
    GHashTable *dead_logs;           /* "foreign" -> budget of dead.c's lines about copies */
    mb_control_answer_fn control_fn; /* `spawned` answers (mb_set_control_answers) */
    void *control_ud;
    uint64_t receipts_rejected;

    /* mailbox.c; entity.c's mb_unref frees an entity through free_entity */
    void (*free_entity)(mailbox *mb);
    GHashTable *rejections; /* reason -> count, every entity's */
    bool trim;              /* many messages freed: give the memory back */
};

/* One entity's mailbox: the lead's, or a local agent's (SPEC 10).  The
 * same code serves both; what differs is in the fields below id. */
struct mailbox {
    gatomicrefcount ref; /* the host's list holds one; mb_find and friends one each */
    mb_host *h;
    GMutex *lock; /* &h->lock */
    const fs_opts *o;
    mb_hooks hooks;       /* h->hooks */
    char id[MB_ID_MAX];   /* coord_id, or the agent's gid name@coord_id */
    char name[MB_ID_MAX]; /* the lead's coord_id, or the agent's name */
    bool lead;
    char *state_dir;           /* its records: the lead's is state_dir, an agent's below it */
    char **groups;             /* the groups it is in (`all` is implicit) */
    unsigned box;              /* the broker's box number of its mailbox queue (0: the lead) */
    char home[MB_ID_MAX + 16]; /* "leads/<id>" or "agents/<gid>" */
    char inbox_path[160], sent_path[160], history_path[160], lead_status_path[160];

    /* held.c */
    GQueue held;          /* held_msg*, arrival order */
    GHashTable *held_ids; /* msgId -> held_msg* */
    size_t held_bytes;    /* sum of their line_len: the size of `inbox` */
    uint64_t ok_gen;      /* consumer generation we saw working ... */
    int64_t ok_since;     /* ... since then (monotonic ms) */

    /* views.c */
    GList *views; /* mb_view* */

    /* asks.c */
    GHashTable *asks; /* question msgId -> mb_ask*, while the asker waits for its answer */

    /* sent.c */
    GQueue sent;          /* sent_entry*, oldest first */
    GHashTable *sent_ids; /* msgId -> sent_entry* (keys live in the entries) */
    size_t sent_bytes;
    applog *sent_log;
    GHashTable *inflight; /* msgId -> early receipt or NULL, while its publish waits */
    bool sent_warned;

    /* history.c */
    GQueue history;       /* char* JSON lines without newline, oldest first */
    GHashTable *consumed; /* msgId -> hist_ref, of the history entries */
    size_t history_bytes;
    applog *history_log;
    bool history_warned; /* the last write failed and was logged */

    /* accept.c */
    seen_set *seen;  /* messages: what became of each msgId in this mailbox */
    ack_doubt doubt; /* the last messages whose acks went out, on their generation */

    /* mailbox.c */
    mb_counters n;
    int64_t mtime[MB__FILES];
    char *injector_words;
};

/* entity.c (the bottom: every part calls it, it calls none of them) */
/* The host an entity id lives on: a gid's part after '@', a lead's id itself. */
void mb_id_host(const char *id, char *out, size_t n);
mailbox *mb_find_locked(mb_host *h, const char *id);
void mb_touch_locked(mailbox *mb, mb_file f);
void mb_changed(mailbox *mb, const char *relpath);
void mb_count_rejection_locked(mailbox *mb, const char *reason);
/* At load: says so when the disk refused to close a torn last line. */
void mb_warn_if_degraded(const applog *log, const char *what);

/* held.c */
void held_remove_locked(mailbox *mb, held_msg *m);
void held_free_all(mailbox *mb);
bool held_tick_locked(mailbox *mb, const br_status *st, int64_t now_mono_ms);
/* The sweeper: every FREE held message past its expiresAt (this host's
 * clock) is consumed as `expired` (history, a signed `expired` receipt to
 * its sender, the broker copy acked): never typed or shown after it.  No
 * lock held.  True when something was dropped. */
bool held_expire(mailbox *mb);

/* Lock held: a HELD_ASKED message becomes an ordinary one (FREE, in the
 * inbox and its views): its asker closed before reading it. */
/* true: shown in the inbox; false: already past its expiresAt (not shown;
 * held_expire consumes it) */
bool held_release_asked_locked(mailbox *mb, held_msg *m);
/* The answer msg_id (HELD_ASKED) handed to its asker: consumed as `acked`
 * (history, the receipt, the broker ack), its body into *body (g_free):
 * 1.  Past its own expiresAt: consumed as `expired` instead, -1.  0 when
 * it is not held so.  No lock held. */
int held_take_asked(mailbox *mb, const char *msg_id, char **body, size_t *len);

/* accept.c: NULL when e passes the checks of SPEC section 4 up to expiry,
 * else the reason word; *verified: the sender proved who it is. */
const char *accept_check_locked(mailbox *mb, const envelope *e, bool *verified, char *why,
                                size_t n);
sig_result accept_verify_locked(mailbox *mb, const envelope *e);
/* The trusted keys follow the trust directory (sig_trust_refresh): looked
 * at at most once a second, or now when force; a change is logged. Every
 * check of a signature (messages, receipts, control) comes after it. */
void accept_trust_fresh_locked(mailbox *mb, bool force);
/* The time checks alone (messages and receipts): the lifetime is at most
 * message_ttl (+ the skew) and does not start in the future; not expired.
 * NULL, "bad-lifetime" or "expired". */
const char *accept_lifetime(mailbox *mb, const envelope *e, char *why, size_t n);
/* What the seen set says about msgId; *acked_on: the consumer generation
 * its broker copy was acked on (0: unknown, e.g. before a restart). */
seen_state accept_seen_locked(mailbox *mb, const char *msg_id, uint64_t *acked_on);
/* Record msgId's new state (a write failure shows in status, see
 * mb_render_rejections). */
void accept_record_locked(mailbox *mb, const char *msg_id, seen_state st, uint64_t acked_on);
/* A per-key rate budget in budgets (key -> budget, owned): burst events at
 * once, then one per every_ms.  >= 0: allowed, and how many were held back
 * since the last allowed one; -1: not allowed, the first held back of a
 * streak; -2: not allowed. */
int rate_take_locked(GHashTable *budgets, const char *key, int burst, int every_ms);
/* Whether a refusal of sender's message may get a receipt and a history
 * line now (REFUSAL_BURST, then one per REFUSAL_EVERY_MS). */
bool accept_refusal_allowed_locked(mailbox *mb, const char *sender);
/* The receipts' own set (receipts and control answers, consumed on
 * generation gen of the receipt queue): true when msgId was applied
 * before, and then *again says whether this copy is the broker's own
 * coming back (flagged redelivered, or the first copy on a later
 * generation of one whose ack is in doubt): ack it, do not apply it;
 * false when it is new, and then it is recorded as applied.  Every copy
 * acked (new or *again) is noted (accept_doubt_note_locked). */
bool accept_receipt_seen_locked(mailbox *mb, const char *msg_id, uint64_t gen, bool redelivered,
                                bool *again);
/* A broker ack of msgId goes out on generation gen (messages: mb->seen and
 * mb->doubt; receipts: the host's): kept among the last ones of gen.  Once
 * a later generation is seen (here or in accept_doubt_roll_locked), those
 * still marked with their own generation in the seen set are marked
 * ACK_IN_DOUBT: the broker may not have taken their acks. */
void accept_doubt_note_locked(mailbox *mb, seen_set *s, ack_doubt *d, const char *msg_id,
                              uint64_t gen);
/* Generation gen is in use: d's acks of an older one are in doubt now. */
void accept_doubt_roll_locked(seen_set *s, ack_doubt *d, uint64_t gen);
void accept_doubt_free(ack_doubt *d);
void accept_close(mb_host *h);
/* An entity's own seen set (state_dir/seen), seeded from its history. */
int accept_open_entity(mailbox *mb, char **err);
/* mb_set_security's parts (mailbox.c opens the outbox between them): the
 * lead's seen set and the host's receipts set; then the key and the
 * trusted keys (none with insecure).  0, or -1 and *err. */
int accept_open_seen(mailbox *mb, char **err);
int accept_open_keys(mailbox *mb, char **err);

/* sent.c */
void sent_load(mailbox *mb);
void sent_close(mailbox *mb);
GString *sent_render_locked(mailbox *mb);
void sent_expire_locked(mailbox *mb);
/* Whether msg_id names a message this lead sent to peer (a sent entry, or
 * a send still waiting for its confirm). */
bool sent_names_locked(mailbox *mb, const char *msg_id, const char *peer);
/* send.c's hands on the log: an outcome recorded (its entry made, or moved
 * on by what the write's result says); what came before the record (a
 * receipt, the broker's late confirm) applied right after it; the signed
 * envelope an unconfirmed entry keeps for resend (strdup'd; NULL with why
 * in detail, *known saying whether msg_id is in sent at all). */
void sent_record(mailbox *mb, const envelope *e, const char *json, const char *state,
                 const char *detail, char *const *members);
void sent_apply_early(mailbox *mb, const char *msg_id);
char *sent_kept_envelope(mailbox *mb, const char *msg_id, bool *known, char *detail, size_t dlen);

/* One message: validate, wrap with a lifetime of life_ms, sign, hand to
 * the broker; mb_send_start's results (FE_OK: done is told the outcome
 * once, after the `sent` line).  ask (may be NULL): the question of an
 * ask, registered (ask_register) before it is handed over, so that no
 * answer can overtake it; unregistered again when the send fails at once
 * (a later failure is done's owner's to unregister). */
fe_code sent_send_start(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                        size_t len, int64_t life_ms, mb_ask *ask, mb_send_done done, void *ud,
                        char *detail, size_t dlen);
/* A blocking form's wait for done: init; hand sent_wait_done and the
 * sent_wait to a _start call; end with what it returned (waits for done
 * when that was FE_OK) gives the outcome, and detail (may be NULL). */
typedef struct {
    GMutex m;
    GCond cv;
    bool done;
    fe_code res;
    char detail[512];
} sent_wait;
void sent_wait_init(sent_wait *w);
void sent_wait_done(void *ud, fe_code res, const char *detail);
fe_code sent_wait_end(sent_wait *w, fe_code started, char *detail, size_t dlen);
/* A send.json write parsed: body and reply_to (g_free both), the lifetime
 * (default_life when it names none).  FE_BAD_INPUT with why in detail. */
fe_code sent_parse_json(mailbox *mb, const char *to, const char *what, const char *data, size_t len,
                        int64_t default_life, char **body, int64_t *life, char **reply_to,
                        char *detail, size_t dlen);
/* The lifetime of a message that does not choose its own. */
int64_t sent_default_life(const mailbox *mb);

/* asks.c (the open questions; ask.c, the asker's side, is reached
 * through mailbox.h's mb_ask_*) */
/* Lock held, before e's publish: the ask waits for e's answer. */
void ask_register_locked(mailbox *mb, mb_ask *a, const envelope *e);
/* Lock held: the publish failed; the ask waits for nothing. */
void ask_unregister_locked(mailbox *mb, mb_ask *a);
/* Lock held: e (accepted, about to be held) is the answer to an open ask:
 * true, and the ask knows it (its asker is woken). */
bool ask_claim_locked(mailbox *mb, const envelope *e);
/* Lock held: the sent entry of msg_id moved to state (a receipt): a
 * question refused by its receiver ends its ask. */
void ask_sent_state_locked(mailbox *mb, const char *msg_id, const char *state, const char *detail);
/* Lock held: the asks whose question's lifetime ended get ETIMEDOUT. */
void ask_tick_locked(mailbox *mb);

/* history.c */
void history_load(mailbox *mb);
void history_close(mailbox *mb);
GString *history_render_locked(mailbox *mb);
/* how: injected / acked / uncertain / rejected / expired */
void history_add_locked(mailbox *mb, const envelope *e, const char *received_at, const char *how,
                        const char *detail);
/* The sender of a message in history, or NULL. */
const char *history_sender_locked(mailbox *mb, const char *msg_id);
/* Calls fn for each history entry, oldest first: its msgId and how it was
 * consumed (injected / acked / uncertain / rejected). */
void history_each_locked(mailbox *mb, void (*fn)(mailbox *mb, const char *msg_id, const char *how));

/* views.c */
void views_append_locked(mailbox *mb, const held_msg *m);
void views_free_all(mailbox *mb);

/* receipts.c */
int outbox_open(mb_host *h, char **err);
void outbox_start(mb_host *h);
void outbox_stop_begin(mb_host *h);
void outbox_stop(mb_host *h);
void outbox_free(mb_host *h);
/* Durably queue a receipt about orig for its sender (lock held). */
void outbox_queue_locked(mailbox *mb, const envelope *orig, const char *state, const char *detail);
void outbox_counts(mb_host *h, uint64_t *pending, uint64_t *dropped);
const applog *outbox_log_locked(mb_host *h);

#endif
