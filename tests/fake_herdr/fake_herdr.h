/* SPDX-License-Identifier: Apache-2.0 */
/* fake_herdr.h — the fake herdr server, split in two: main.c owns sockets,
 * threads and timing; methods.c turns one request line into what to do
 * (reply, close, hang, reply late), reading and writing the statefile and
 * the prompt log. Prefix fh_. */
#ifndef FLEETFS_FAKE_HERDR_H
#define FLEETFS_FAKE_HERDR_H

#include <stddef.h>

typedef struct {
    const char *state_path;
    const char *log_path;     /* accepted prompts and inputs */
    const char *refused_path; /* log_path + ".refused" */
    const char *calls_path;   /* log_path + ".calls": every request's method, one a line */
    const char *starts_path;  /* log_path + ".starts": every agent.start, as asked */
} fh_config;

typedef enum {
    FH_REPLY, /* write reply (after delay_ms) and close */
    FH_CLOSE, /* close without a reply */
    FH_HANG,  /* never answer; end when the client sends or closes */
} fh_action;

typedef struct {
    fh_action action;
    char *reply;  /* FH_REPLY: malloc'd line without '\n' */
    int delay_ms; /* FH_REPLY: answer this late */
} fh_outcome;

/* Handles one complete, valid-UTF-8 request line. Thread-safe. */
void fh_handle(const fh_config *cfg, const char *line, size_t len, fh_outcome *out);

/* Client mode for shell tests: one hd_call, result printed on stdout. */
int fh_call_main(const char *socket_path, const char *method, const char *params, int timeout_ms);

#endif
