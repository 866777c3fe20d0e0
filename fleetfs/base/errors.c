/* SPDX-License-Identifier: Apache-2.0 */
/* errors.c — the failure table (curl's CURLcode idea): one row per fe_code
 * holding its errno, its token and its hint. The rows are indexed by code
 * with designated initialisers, and a static assertion ties the table size
 * to FE__COUNT, so adding a code without a row does not compile.
 *
 * The errnos follow SPEC section 5. ECOMM rather than ENOTCONN for a broker
 * that is down, because ENOTCONN ("Transport endpoint is not connected") is
 * what a user sees from a dead FUSE mount and would send them hunting for
 * the wrong problem.  Where there is no ECOMM (macOS) it is ENETDOWN
 * (OS_ECOMM, fleetfs/os/os.h), told in the same words (fe_errno_text). */
#include "fleetfs/base/errors.h"

#include <errno.h>
#include <string.h>

#include "fleetfs/os/os.h"

struct fe_row {
    int err;
    const char *name;
    const char *hint;
};

static const struct fe_row fe_table[] = {
    [FE_OK] = {0, "ok", "the operation succeeded; nothing to do"},
    [FE_EMPTY] = {EINVAL, "empty", "the message is empty; write some text, one write per message"},
    [FE_BAD_UTF8] = {EINVAL, "bad-utf8",
                     "the text is not valid UTF-8 (or contains a NUL byte); send plain UTF-8 text"},
    [FE_TOO_BIG] =
        {EMSGSIZE, "too-big",
         "the message is larger than max_message; shorten it, split it, or raise max_message"},
    [FE_NO_PEER] = {ENOENT, "no-peer", "no such peer; add it to the peers= option of this mount"},
    [FE_NOT_CONNECTED] = {OS_ECOMM, "not-connected",
                          "the broker is not connected; see the broker line in /status and retry "
                          "when it reads connected"},
    [FE_TIMEOUT] = {ETIMEDOUT, "timeout",
                    "the broker did not confirm within send_timeout, so the message may or may not "
                    "be in the mailbox; check the peer's status before resending"},
    [FE_FULL] = {ENOSPC, "full",
                 "the peer's mailbox is full (x-max-length); wait for the peer to read, or raise "
                 "max_length fleet-wide"},
    [FE_NO_MAILBOX] = {ENXIO, "no-mailbox",
                       "the peer's mailbox does not exist and could not be created; start fleetfs "
                       "on the peer once, or (per-host broker logins) have the operator add "
                       "the host: fleetfs-broker host add NAME"},
    [FE_MISMATCH] = {EIO, "mismatch",
                     "the broker holds the queue with different arguments (406); make queue_type, "
                     "max_length and message_ttl identical fleet-wide"},
    [FE_NOT_HELD] = {ENOENT, "not-held",
                     "no held message has that msgId; read inbox for the current ids"},
    [FE_BAD_INPUT] =
        {EINVAL, "bad-input",
         "the input is malformed; see the log for the exact reason and the accepted form"},
    [FE_ACCESS] = {EACCES, "access",
                   "the broker refused access (403); check this host's broker login and its "
                   "permissions on the vhost"},
    [FE_BLOCKED] = {ENOBUFS, "blocked",
                    "the broker raised a resource alarm (memory or disk) and blocks publishing; "
                    "nothing was sent: retry once the broker line in /status no longer says "
                    "blocked, and free memory or disk on the broker"},
    [FE_NOT_EMPTY] = {ENOTEMPTY, "not-empty",
                      "the mailbox still holds messages, so it was kept as it was; read and ack "
                      "them first, then try again"},
    [FE_INTERNAL] = {EIO, "internal",
                     "an internal error occurred; see the log and report it with the log lines"},
};

_Static_assert(sizeof(fe_table) / sizeof(fe_table[0]) == FE__COUNT,
               "fe_table needs exactly one row per fe_code");

static const struct fe_row *fe_row_of(fe_code c)
{
    if ((int)c < 0 || (int)c >= FE__COUNT)
        c = FE_INTERNAL;
    return &fe_table[c];
}

int fe_errno(fe_code c)
{
    return fe_row_of(c)->err;
}

const char *fe_name(fe_code c)
{
    return fe_row_of(c)->name;
}

const char *fe_hint(fe_code c)
{
    return fe_row_of(c)->hint;
}

/* Linux's words for ECOMM wherever OS_ECOMM is, so that `fleetfs ask` and
 * the MCP tools say the same on macOS as on Linux; strerror otherwise */
const char *fe_errno_text(int err)
{
    return err == OS_ECOMM ? "Communication error on send" : strerror(err);
}
