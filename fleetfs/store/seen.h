/* seen.h — the replay guard of SPEC section 4: a bounded set of msgIds
 * already accepted, kept on disk so a restart does not forget them.
 *
 * Why bounded and FIFO: a signature proves who wrote a message, not that it
 * is new; a broker user can republish a captured, validly signed envelope.
 * Expiry caps how long a capture stays usable, and this set catches a
 * replay inside that window. It has to be bounded (a flood of distinct ids
 * must not grow memory or disk without limit), and forgetting the oldest
 * first means the entries dropped are the ones expiry already covers —
 * cap must be comfortably larger than the messages a lead accepts within
 * one message lifetime.
 *
 * File: one id per line, oldest first, appended as ids are added. When the
 * file holds 2 x cap lines it is rewritten (temp file + rename) with the
 * newest cap entries. Lines that are not an id (empty, too long, control
 * bytes, a torn last line) are skipped when loading. An add is written with
 * one write(2) before seen_add returns (an applog, see applog.h), so it survives a crash of the
 * daemon; it is not fsync'd, so a power loss may forget the last few.
 *
 * Ownership: a seen_set is shared by every thread that handles deliveries;
 * a GMutex inside guards everything, so any call may come from any thread. */
#ifndef FLEETFS_SEEN_H
#define FLEETFS_SEEN_H

#include <stdbool.h>
#include <stddef.h>

/* Longest id accepted, in bytes. msgIds are 32; the rest is slack. */
#define SEEN_ID_MAX 128

typedef struct seen_set seen_set;

/* Opens (creating with mode 0600 when absent) the set persisted at path,
 * loading its newest cap entries. The directory must exist. cap >= 1.
 * NULL and *err (g_free) on failure. */
seen_set *seen_open(const char *path, size_t cap, char **err);
bool seen_contains(seen_set *s, const char *id);
/* 0 added, 1 already present (nothing changes: it does not become newer),
 * -1 when id is not 1..SEEN_ID_MAX printable ASCII bytes without spaces
 * (errno EINVAL) or the file could not be written (errno from the write;
 * the id is still remembered in memory). */
int seen_add(seen_set *s, const char *id);
/* Entries held (at most cap). */
size_t seen_count(seen_set *s);
/* Closes the file and frees. NULL is fine. */
void seen_close(seen_set *s);

#endif
