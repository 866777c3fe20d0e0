/* SPDX-License-Identifier: Apache-2.0 */
/* seen.h — the replay guard of SPEC section 4: what became of each msgId
 * this lead received, kept on disk so a restart does not forget it.
 *
 * Why states, not mere presence: a signature proves who wrote a message,
 * not that it is new, and the broker's `redelivered` flag is no proof
 * either (any channel reset sets it on every unacked copy, a basic.get and
 * a close by anyone who may read the queue sets it on a republished
 * capture, and LavinMQ forgets it across its own restart).  So the owner
 * records what happened: a msgId shown but never consumed may come back
 * and be shown again; one consumed must never be shown again; a refused
 * one needs no second refusal receipt.
 *
 * Why bounded, and one FIFO per class: a flood of distinct ids must not
 * grow memory or disk without limit, and it must not push out the entries
 * that matter.  Each class (delivered, consumed, refused) forgets its own
 * oldest first, at its own cap; a flood of refusals cannot evict a
 * consumed msgId, and what a class forgets is what expiry already covers
 * when its cap is comfortably larger than what a lead takes in within one
 * message lifetime.
 *
 * File: one record per line, "<letter> <id>" (d delivered, c consumed,
 * r refused), appended whenever an id's state changes; the last line for
 * an id wins.  A bare "<id>" line is the format before states (every
 * accepted id): it loads as SEEN_LEGACY.  When the file holds twice the
 * live entries it is rewritten (temp file + rename) with each live entry
 * once, each class in its own order.  Lines that are not a record (empty,
 * too long, control bytes, a torn last line) are skipped when loading.  A
 * change is written with one write(2) before seen_put returns (an applog,
 * see applog.h): it survives a crash of the daemon; it is not fsync'd, so
 * a power loss may forget the last few.
 *
 * Each entry also carries a mark: a number the owner keeps with it in
 * memory only (fleetfs: the consumer generation its broker copy was acked
 * on), 0 after a load.
 *
 * Ownership: a seen_set may be shared by threads; a GMutex inside guards
 * everything, so any call may come from any thread. */
#ifndef FLEETFS_SEEN_H
#define FLEETFS_SEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest id accepted, in bytes. msgIds are 32; the rest is slack. */
#define SEEN_ID_MAX 128

typedef enum {
    SEEN_NONE = 0,  /* not in the set (never seen, or forgotten) */
    SEEN_DELIVERED, /* accepted and shown, not consumed */
    SEEN_CONSUMED,  /* consumed here (typed, acked, uncertain; a receipt: applied) */
    SEEN_REFUSED,   /* refused by a check */
    SEEN_LEGACY,    /* from a file written before states: accepted, fate unknown */
    SEEN__STATES
} seen_state;

/* Caps per class.  SEEN_LEGACY entries count against `delivered` (they
 * only shrink: nothing new is ever put in that state).  A class with cap
 * 0 refuses its state (EINVAL). */
typedef struct {
    size_t delivered, consumed, refused;
} seen_caps;

typedef struct seen_set seen_set;

/* Opens (creating with mode 0600 when absent) the set persisted at path,
 * loading what fits the caps.  The directory must exist.  At least one cap
 * must be >= 1.  NULL and *err (g_free) on failure. */
seen_set *seen_open(const char *path, const seen_caps *caps, char **err);
/* The state of id (SEEN_NONE when absent or id is NULL); *mark (may be
 * NULL) gets its mark. */
seen_state seen_get(seen_set *s, const char *id, uint64_t *mark);
/* Sets id's state and mark.  A new state makes the id the newest of its
 * class and is appended to the file; the same state only sets the mark.
 * 0 changed, 1 unchanged, -1 when id is not 1..SEEN_ID_MAX printable ASCII
 * bytes without spaces or st is not one that can be put (errno EINVAL), or
 * the file could not be written (errno from the write; memory has it). */
int seen_put(seen_set *s, const char *id, seen_state st, uint64_t mark);
/* Whether putting a new id in state st would push an entry out of st's
 * class (the class is at its cap): true, with *mark (may be NULL) the mark
 * of the entry that would go (its oldest).  The owner can then decide not
 * to record, when what would be forgotten must not be forgotten yet. */
bool seen_full(seen_set *s, seen_state st, uint64_t *mark);
/* Entries held in state st (SEEN_NONE: in all states). */
size_t seen_count(seen_set *s, seen_state st);
const char *seen_state_name(seen_state st);
/* Closes the file and frees. NULL is fine. */
void seen_close(seen_set *s);

#endif
