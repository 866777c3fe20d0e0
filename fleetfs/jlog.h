/* fleetfs/jlog.h — a bounded, persisted JSON Lines file (history, sent).
 *
 * Appending is the common case and costs one write; the file is rewritten
 * from memory (temp file + rename) only once it holds twice the lines its
 * owner keeps, so it stays bounded without a rewrite per change.  A torn
 * last line after a crash is skipped on load.  Not thread-safe: the owner
 * calls it under its own lock.
 */
#ifndef FLEETFS_JLOG_H
#define FLEETFS_JLOG_H

#include <stdbool.h>

#include <glib.h>

typedef struct jlog jlog;

/* Opens (creating on first append) path; *lines receives the lines that
 * parse as JSON objects, oldest first (g_free each). */
jlog *jlog_open(const char *path, GPtrArray **lines);
void jlog_append(jlog *j, const char *line);
/* Rewrite when the file holds at least twice `live` lines (and > 64). */
void jlog_maybe_compact(jlog *j, guint live, GString *(*render)(void *ud), void *ud);
void jlog_close(jlog *j);

#endif
