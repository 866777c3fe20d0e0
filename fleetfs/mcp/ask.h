/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/ask.h — asking through an ask file of the mount, as `fleetfs
 * ask` and the fleet_ask tool do it (ask.c). */
#ifndef FLEETFS_MCP_ASK_H
#define FLEETFS_MCP_ASK_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    MA_ANSWERED,  /* *answer is the answer */
    MA_NO_PEER,   /* no such peer or agent: the ask file does not open (ENOENT) */
    MA_NOT_ASKED, /* the write failed: the question was not sent (err says why) */
    MA_UNKNOWN,   /* the write timed out: the question may or may not be out */
    MA_TIMED_OUT, /* no answer within the question's lifetime (ETIMEDOUT) */
    MA_REFUSED,   /* its receiver refused the question (ECONNREFUSED) */
    MA_NO_WORD,   /* the mount said nothing within wait_ms (hung?) */
    MA_CANCELLED, /* the MCP client cancelled the call (cancel.h): closed unread */
    MA_FAILED,    /* anything else (err) */
} mcp_ask_fate;

/* The ask file for `to` under mnt (g_free): peers/<to>/ask for a lead,
 * agents/<to>/ask for a gid, ask.json with json; NULL for anything else
 * (a group, not a name). */
char *mcp_ask_path(const char *mnt, const char *to, bool json);
/* One ask: open path read-write, one write of data, then wait (wait_ms; -1:
 * as long as the mount says) for the answer.  *answer (g_free) and *alen
 * when answered; *err the errno behind any other fate. */
mcp_ask_fate mcp_ask_run(const char *path, const char *data, size_t len, int wait_ms, char **answer,
                         size_t *alen, int *err);

/* Why the newest refused (rejected or dead-lettered) entry to `to` in the
 * sent file sent_path was refused (its detail), into out; "" when none. */
void mcp_ask_refusal_words(const char *sent_path, const char *to, char *out, size_t n);

/* `fleetfs ask [MOUNTPOINT] [--timeout D] PEER TEXT`: argv[1] is "ask";
 * returns the exit code (doc/fleetfs.1). */
int mcp_ask_main(int argc, char **argv);

#endif
