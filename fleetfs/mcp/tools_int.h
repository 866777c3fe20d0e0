/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/tools_int.h — what tools.c (the table, sending, listing,
 * status), home.c (the home's inbox, ack, sent and resend), ask.c
 * (fleet_ask) and claim.c share, toolkit.c's helpers among them: the
 * server's state, who it speaks for, and the helpers that turn files and
 * errnos into tool results.  Not for anything outside fleetfs/mcp/. */
#ifndef FLEETFS_MCP_TOOLS_INT_H
#define FLEETFS_MCP_TOOLS_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <glib.h>
#include <jansson.h>

#include "fleetfs/mcp/tools.h"
#include "fleetfs/wire/names.h"

#define READ_CAP \
    (64u << 20) /* a file longer than this is cut (history-bound files are far smaller) */
#define SENT_DEFAULT 20
#define INBOX_LIMIT_DEFAULT 20
#define INBOX_LIMIT_DEFAULT_S "20"
#define INBOX_LIMIT_MAX 200
#define INBOX_LIMIT_MAX_S "200"
/* fleet_inbox's whole answer line (the JSON-RPC result: the page as
 * structuredContent and again as text) stays under INBOX_RESULT_MAX: a
 * page stops before its messages, as encoded twice (home.c entry_cost),
 * pass INBOX_PAGE_BYTES, which leaves 16 KiB for the rest of the line.
 * A page holds at least one message: one whose encoding alone is larger
 * (only when max_message is raised past 64 KiB; at 64 KiB a body of
 * nothing but control characters is 13 x 64 KiB = 832 KiB encoded) comes
 * on a page of its own, over the bound. */
#define INBOX_RESULT_MAX (1u << 20)
#define INBOX_RESULT_MAX_TEXT "1 MiB"
#define INBOX_PAGE_BYTES (INBOX_RESULT_MAX - (16u << 10))

/* One server's tools: the mount, who it speaks for, and what fleet_inbox
 * has shown its client (msgId -> the order it was first shown in), so
 * that fleet_ack's `through` consumes nothing the agent did not see.  A
 * tool thread the caller gave up on may still run beside the next call:
 * the lock keeps the set whole. */
struct mcp_fleet {
    char *mnt;
    char *as;
    GMutex lock;
    GHashTable *shown; /* msgId (g_free) -> GSIZE_TO_POINTER(order) */
    gsize next_order;
};

/* who the server speaks for: the lead, or (--as) one local agent */
typedef struct {
    mcp_fleet *f;
    const char *mnt;
    const char *as;      /* the agent's gid; NULL: the lead */
    char home[PATH_MAX]; /* mnt/self, or mnt/agents/<as> */
    char me[ADDR_MAX_LEN + 1];
} who;

/* toolkit.c: what every tool shares */

/* 0 or an errno; *out gets the whole file (up to READ_CAP) */
int mt_read_all(const char *path, GString **out);
/* one write(2) of the whole of data: 0 or an errno */
int mt_write_once(const char *path, const char *data, size_t len);
/* JSON Lines -> array (lines that do not parse are kept as strings) */
json_t *mt_json_lines(const GString *s);
/* the local lead's coord_id (self -> leads/<me>), or an errno */
int mt_whoami(const char *mnt, char me[NAME_MAX_LEN + 1]);
/* fills w->me (the lead's coord_id, or the agent's gid); 0 or an errno */
int mt_who_me(who *w);
/* a tool error whose text says what errno err means for `what` */
json_t *mt_fail_errno(const who *w, int err, const char *what, const char *peer, const char *ref);
/* a tool error with this text */
json_t *mt_fail(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* the result is v: its structuredContent, and its text as JSON (v stolen) */
json_t *mt_ok_json(json_t *v);
/* NULL when every key of args is in allowed; else the error result */
json_t *mt_only_keys(json_t *args, const char *tool, const char *const *allowed);
/* 32 lowercase hex digits */
bool mt_is_msgid(const char *s);

/* fleet_ask's timeout: seconds, the question's lifetime (ask.c) */
#define MCP_ASK_DEFAULT 50
#define MCP_ASK_DEFAULT_S "50"
#define MCP_ASK_MAX 600
#define MCP_ASK_MAX_S "600"

/* ask.c: fleet_ask (a handler of the table) */
json_t *mt_ask(void *ctx, json_t *args);

/* home.c: the tools of the home's files (handlers of the table) */
json_t *mt_inbox(void *ctx, json_t *args);
json_t *mt_ack(void *ctx, json_t *args);
json_t *mt_sent(void *ctx, json_t *args);
json_t *mt_resend(void *ctx, json_t *args);

#endif
