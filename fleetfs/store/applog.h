/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/store/applog.h — the one append-only log under every file fleetfs keeps
 * in state_dir: history.jsonl, sent.jsonl, the seen set, the injector's
 * journal and the receipts outbox.
 *
 * A log is a file of lines.  Appending is the common case and costs one
 * write(2) of the whole line (O_APPEND: never torn by us, never a rewrite
 * of what is there).  The owner keeps the live state in memory and, once
 * the file holds at least twice the live lines, rewrites it from memory.
 *
 * Durability rules, explicit per log:
 *   APPLOG_WRITE  an append is in the kernel when applog_append returns:
 *                 it survives a crash of the daemon (kill -9), not a power
 *                 loss.  history, sent, the seen set, the outbox.
 *   APPLOG_FSYNC  an append is fdatasync'd before applog_append returns:
 *                 it survives a power loss too.  The injector's journal,
 *                 on which "at most once" rests.
 * Compaction, for both: the new content goes to a fresh PATH.tmp.XXXXXXXX
 * (created with O_EXCL: never a file someone else made), which is
 * fdatasync'd, renamed over PATH, and the directory is fsync'd, so a crash
 * at any point leaves the old file or the new one, each complete.  Opening
 * a log removes the PATH.tmp* a crash left (the state_dir lock,
 * statelock.h, guarantees nobody else is writing them).
 *
 * A full disk (ENOSPC, EDQUOT, EFBIG past RLIMIT_FSIZE) can still tear an
 * append part way: the fragment is cut off again at once (ftruncate), and
 * should even that fail, the next append starts with a newline, so a later
 * record is never glued to it and lost on reload (for the journal, that
 * would break at-most-once).  applog_failed says whether the last write
 * worked: the owners show it in status (degraded).
 *
 * Loading treats the file as untrusted: lines longer than max_line are
 * skipped while streaming (no unbounded allocation), so are lines holding a
 * NUL byte (not text; C would read a prefix of them), and a torn last line
 * (a crash mid-append) is never returned: it is closed with " \n", so the
 * next append does not glue onto it, and the trailing space keeps a later
 * load from mistaking the fragment for a whole record.  On a disk still
 * full the fragment is cut off instead (or, failing that, closed by the
 * next append): the log opens with every whole line, never empty, and
 * applog_failed says the disk refused a write.
 *
 * Not thread-safe: the owner calls it under its own lock.
 */
#ifndef FLEETFS_APPLOG_H
#define FLEETFS_APPLOG_H

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

typedef struct applog applog;
typedef enum { APPLOG_WRITE, APPLOG_FSYNC } applog_sync;

/* Opens (creating, mode 0600) the log at path and streams its complete
 * lines into *lines (g_free each; empty lines skipped).  NULL and *err
 * (g_free) when the file cannot be opened or read. */
applog *applog_open(const char *path, applog_sync sync, size_t max_line, GPtrArray **lines,
                    char **err);
/* Appends line (no '\n' inside) and its newline.  0, or -1 with errno. */
int applog_append(applog *a, const char *line);
/* Whether the file holds at least twice `live` lines (and more than 64). */
bool applog_wants_compact(const applog *a, size_t live);
/* Replaces the file by content (complete lines), which holds live lines.
 * 0, or -1 with errno (the old file stays as it was). */
int applog_rewrite(applog *a, const GString *content, size_t live);
/* The common case of a bounded log: append line, then, when the file
 * holds twice the live lines, rewrite it from render(ud) (the owner's
 * memory, which must already include line).  0 once the line is in the
 * file (a rewrite that failed is tried again next time), or -1 with errno. */
int applog_add(applog *a, const char *line, size_t live, GString *(*render)(void *ud), void *ud);
/* errno of the last write that failed (0 when the last one worked). */
int applog_failed(const applog *a);
size_t applog_lines(const applog *a);
const char *applog_path(const applog *a);
void applog_close(applog *a);

#endif
