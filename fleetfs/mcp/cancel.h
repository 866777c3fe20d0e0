/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/cancel.h — reading the client while a call runs, and
 * cancelling the one running call (notifications/cancelled, MCP 2025-06-18
 * and later; cancel.c). */
#ifndef FLEETFS_MCP_CANCEL_H
#define FLEETFS_MCP_CANCEL_H

#include <stdbool.h>
#include <stdio.h>

#include <glib.h>
#include <jansson.h>

/* One input line: text (NULL at the end of input), too_long as read_line
 * says, failed: the end was a read error. */
typedef struct {
    char *text;
    size_t len;
    bool too_long;
    bool failed;
    int err; /* failed: the read's errno */
} mcp_in_line;

typedef struct mcp_in mcp_in;
/* read(in, line, &too_long): -1 at the end (ferror tells a failure) */
typedef ssize_t (*mcp_read_fn)(FILE *in, GString *line, bool *too_long);
/* A thread reads `in` line by line from now on. */
mcp_in *mcp_in_start(FILE *in, mcp_read_fn read);
/* The next line (mcp_in_line_free), the ones put back first; NULL when
 * none came before until_us (monotonic; -1: wait for it). */
mcp_in_line *mcp_in_next(mcp_in *c, gint64 until_us);
/* A line read meanwhile, not one put back; NULL when none waits */
mcp_in_line *mcp_in_fresh(mcp_in *c);
/* l is read again by the next mcp_in_next (after those put back before) */
void mcp_in_putback(mcp_in *c, mcp_in_line *l);
void mcp_in_line_free(mcp_in_line *l);

/* Whether line l is notifications/cancelled for the request id */
bool mcp_is_cancel_of(const mcp_in_line *l, const json_t *id);
/* The id of l when it is a tools/call request (json_decref), else NULL */
json_t *mcp_call_id(const mcp_in_line *l);

/* The running call's cancellation: a readable fd once fired, until
 * cleared (for poll(2), e.g. fleet_ask's wait for its answer). */
int mcp_cancel_fd(void);
void mcp_cancel_fire(void);
void mcp_cancel_clear(void);
bool mcp_cancel_fired(void);

#endif
