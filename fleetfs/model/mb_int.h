/* fleetfs/model/mb_int.h — the mailbox model's private state, shared by the files
 * that each own one concern of it:
 *
 *   mailbox.c   lifecycle, counters, rendering for the tree, the tick
 *   held.c      held messages: arrivals, the claim, acks, the one remove path
 *   accept.c    acceptance: signatures, trust reload, policy, the seen set
 *   sent.c      the sent log and its state machine; sending
 *   history.c   history and the consumed set
 *   views.c     open inbox readers (tail -f) and poll
 *   receipts.c  receipts in (lead.<me>.receipts) and out (the durable outbox)
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
 * broker redelivers the message (its msgId is in the consumed set).
 */
#ifndef FLEETFS_MB_INT_H
#define FLEETFS_MB_INT_H

#include "fleetfs/model/mailbox.h"

#include "fleetfs/store/applog.h"
#include "fleetfs/model/mb_broker.h"
#include "fleetfs/store/seen.h"
#include "fleetfs/wire/sign.h"

#define SENT_MAX 1000
#define HISTORY_MAX 1000
#define STALE_GRACE_MS 10000
#define CLOCK_SKEW_MS (5 * 60 * 1000)
#define SEEN_CAP 100000
#define VIEW_KEEP (256 * 1024) /* bytes an open inbox keeps behind its reader */

typedef enum {
    HELD_FREE,   /* anyone may consume it (the ack file) or claim it */
    HELD_TYPING, /* claimed by the injector: only it consumes or releases it */
} held_owner;

typedef struct {
    envelope env;
    char received_at[40];
    bool redelivered;
    held_owner owner;
    uint64_t gen, tag; /* consumer generation and delivery tag of its latest delivery */
    char *line;        /* the inbox line, "\n"-terminated */
    size_t line_len;
} held_msg;

typedef struct mb_outbox mb_outbox;

struct mailbox {
    GMutex lock;
    const fs_opts *o;
    mb_hooks hooks;
    mb_broker br;
    char inbox_path[128], sent_path[128], history_path[128], lead_status_path[128];

    /* held.c */
    GQueue held;          /* held_msg*, arrival order */
    GHashTable *held_ids; /* msgId -> held_msg* */
    size_t held_bytes;    /* sum of their line_len: the size of `inbox` */
    uint64_t ok_gen;      /* consumer generation we saw working ... */
    int64_t ok_since;     /* ... since then (monotonic ms) */

    /* views.c */
    GList *views; /* mb_view* */

    /* sent.c */
    GQueue sent;          /* sent_entry*, oldest first */
    GHashTable *sent_ids; /* msgId -> sent_entry* (keys live in the entries) */
    size_t sent_bytes;
    applog *sent_log;
    GHashTable *inflight; /* msgId -> early receipt or NULL, while its publish waits */
    bool sent_warned;

    /* history.c */
    GQueue history;       /* char* JSON lines without newline, oldest first */
    GHashTable *consumed; /* msgId -> sender, of the history entries */
    size_t history_bytes;
    applog *history_log;
    bool history_warned; /* the last write failed and was logged */

    /* accept.c */
    sig_key *key;         /* NULL only with insecure */
    sig_trust *trust;     /* reloaded when an unknown sender shows up */
    int64_t trust_loaded; /* trust directory mtime (ns) when it was read */
    seen_set *seen;
    char seen_err[200]; /* why the seen set could not be written, or "" */

    /* receipts.c */
    mb_outbox *outbox;

    /* mailbox.c */
    mb_counters n;
    GHashTable *rejections; /* reason -> count */
    int64_t mtime[MB__FILES];
    char *injector_words;
    bool trim; /* many messages freed: give the memory back */
};

/* mailbox.c */
void mb_touch_locked(mailbox *mb, mb_file f);
void mb_changed(mailbox *mb, const char *relpath);
void mb_count_rejection_locked(mailbox *mb, const char *reason);
/* At load: says so when the disk refused to close a torn last line. */
void mb_warn_if_degraded(const applog *log, const char *what);

/* held.c */
void held_remove_locked(mailbox *mb, held_msg *m);
void held_free_all(mailbox *mb);
bool held_tick_locked(mailbox *mb, const br_status *st, int64_t now_mono_ms);

/* accept.c: NULL when e passes the checks of SPEC section 4 up to expiry,
 * else the reason word; *verified: the sender proved who it is. */
const char *accept_check_locked(mailbox *mb, const envelope *e, bool *verified, char *why,
                                size_t n);
sig_result accept_verify_locked(mailbox *mb, const envelope *e);
/* The replay check: false when msgId was accepted before. */
bool accept_first_time_locked(mailbox *mb, const char *msg_id);
void accept_close(mailbox *mb);

/* sent.c */
void sent_load(mailbox *mb);
void sent_close(mailbox *mb);
GString *sent_render_locked(mailbox *mb);
void sent_expire_locked(mailbox *mb);

/* history.c */
void history_load(mailbox *mb);
void history_close(mailbox *mb);
GString *history_render_locked(mailbox *mb);
/* how: injected / acked / uncertain / rejected */
void history_add_locked(mailbox *mb, const envelope *e, const char *received_at, const char *how,
                        const char *detail);
bool history_consumed_locked(mailbox *mb, const char *msg_id);
/* The sender of a consumed message, or NULL. */
const char *history_sender_locked(mailbox *mb, const char *msg_id);

/* views.c */
void views_append_locked(mailbox *mb, const char *line, size_t len);
void views_free_all(mailbox *mb);

/* receipts.c */
int outbox_open(mailbox *mb, char **err);
void outbox_start(mailbox *mb);
void outbox_stop(mailbox *mb);
void outbox_free(mailbox *mb);
/* Durably queue a receipt about orig for its sender (lock held). */
void outbox_queue_locked(mailbox *mb, const envelope *orig, const char *state, const char *detail);
void outbox_counts(mailbox *mb, uint64_t *pending, uint64_t *dropped);
const applog *outbox_log_locked(mailbox *mb);

#endif
