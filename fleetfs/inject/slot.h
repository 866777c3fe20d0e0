/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/slot.h — inside the injector (not for other folders): one
 * entity's slot, which inject.c drives, and the at-most-once journal of
 * what was typed into its pane (journal.c), which inject.c writes before
 * and after typing and reads when a message comes back.
 */
#ifndef FLEETFS_INJECT_SLOT_H
#define FLEETFS_INJECT_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "fleetfs/inject/inject.h"
#include "fleetfs/inject/witness.h"
#include "fleetfs/store/applog.h"
#include "herdr/backend.h"

#define JOURNAL_KEEP 5000 /* msgIds the journal remembers */

/* Text to type once into one entity's pane (inj_type_once; inject.c). */
typedef struct inj_once inj_once;

/* One entity's injection: everything below is the injector thread's alone
 * (slots are added and removed under injector.lock, never while the
 * thread works on them: it works on a ref'd snapshot). */
typedef struct {
    gatomicrefcount ref;
    mailbox *mb; /* a ref */
    inj_backend *be;
    /* journal: broker-independent record of what was typed (an applog,
     * APPLOG_FSYNC: at most once must survive a power loss too) */
    char *journal_path;
    applog *journal_log;   /* NULL when it cannot be opened */
    char journal_err[160]; /* why it cannot be written, for the words */
    GHashTable *journal;   /* msgId -> last word (static string) */
    GQueue journal_order;  /* msgIds, oldest first (owned by the hash table) */
    GHashTable *meta;      /* msgId -> "from expiresAt" of an injecting line, until settled */
    char *words;           /* last state shown, to log changes once */
    int64_t next_ms;       /* monotonic: not tried before */
    /* a message typed, its confirmation pending */
    envelope confirm_env;
    ib_target confirm_t;
    int64_t confirm_until; /* 0: none pending */
    bool confirm_left;     /* the agent was seen leaving idle */
    inj_witness *wit;      /* the agent's prompt hook's reports (witness.h) */
    /* tmux: a message typed, whether it was submitted not yet looked at;
     * its `injected` goes out once it was (verify_step) */
    envelope verify_env;
    ib_target verify_t;
    char *verify_text;
    int64_t verify_until; /* 0: none pending */
    int verify_cr;        /* carriage returns sent after the first */
    bool verify_left;     /* herdr: the agent was seen leaving idle meanwhile */
    inj_once *once;       /* text to type once, before any message (injector.lock) */
} inj_slot;

/* journal.c: the journal is the slot's alone (the injector thread's). */

/* Read state_dir/inject.journal into the slot (journal_path set); on
 * failure journal_log stays NULL and journal_err says why. */
void inj_journal_open(inj_slot *in);
/* Append "word msgId", durable before it returns: false when it could not
 * be written (journal_err says why). */
bool inj_journal_write(inj_slot *in, const char *word, const char *id);
/* "injecting" for message e, with its sender and expiresAt. */
bool inj_journal_write_typing(inj_slot *in, const envelope *e);
/* Hand the journal's word on messages past their expiresAt that never
 * came back to the mailbox (mb_settle_journaled). */
void inj_journal_settle(inj_slot *in);

#endif
