/* SPDX-License-Identifier: Apache-2.0 */
/* errors.h — the closed set of reasons an fleetfs operation can fail.
 * One enum, one table (errors.c): every caller reports a fe_code, and the
 * errno a FUSE writer sees, the token in status/sent files and the hint in
 * the log all come from that table, so they cannot drift apart. */
#ifndef FLEETFS_ERRORS_H
#define FLEETFS_ERRORS_H

typedef enum {
    FE_OK = 0,
    FE_EMPTY,         /* empty write to send */
    FE_BAD_UTF8,      /* text is not strict UTF-8 */
    FE_TOO_BIG,       /* larger than max_message */
    FE_NO_PEER,       /* unknown peer name */
    FE_NOT_CONNECTED, /* broker not connected */
    FE_TIMEOUT,       /* no confirm within send_timeout */
    FE_FULL,          /* peer mailbox full (reject-publish nack) */
    FE_NO_MAILBOX,    /* mailbox absent and may not be created (return) */
    FE_MISMATCH,      /* queue arguments differ fleet-wide (406) */
    FE_NOT_HELD,      /* msgId not among the held messages */
    FE_BAD_INPUT,     /* malformed input (ack line, envelope, option) */
    FE_ACCESS,        /* broker refused access (403) */
    FE_BLOCKED,       /* broker blocks publishing (resource alarm) */
    FE_NOT_EMPTY,     /* a mailbox to remove still holds messages */
    FE_INTERNAL,      /* a bug or resource failure */
    FE__COUNT
} fe_code;

/* The positive errno for c (0 for FE_OK). */
int fe_errno(fe_code c);
/* Short kebab-case token, e.g. "not-connected"; static storage. */
const char *fe_name(fe_code c);
/* One sentence: what happened and what to do; static storage. */
const char *fe_hint(fe_code c);
/* strerror(err), but Linux's words for ECOMM where it is ENETDOWN (macOS):
 * the same text on both (doc/fleetfs.1, ERRORS) */
const char *fe_errno_text(int err);

/* Codes outside 0..FE__COUNT-1 behave as FE_INTERNAL in all three. */

#endif
