/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/askfile.h — an open ask file: the question written, the
 * answer read (askfile.c; the rules in model/ask.c). */
#ifndef FLEETFS_ASKFILE_H
#define FLEETFS_ASKFILE_H

#include <stdbool.h>
#include <stddef.h>

#include <fuse_lowlevel.h>

#include "fleetfs/model/mailbox.h"

typedef struct askf askf;

/* An ask of mailbox mb (the asker: the lead). */
askf *askf_open(mailbox *mb);
/* The one write: the question to `to` (text, or json as ask.json takes
 * it), handed over without waiting: 0, and done is told its outcome once
 * (on the broker's publishing thread, the question registered first), or
 * a positive errno now (EBUSY: asked already on this file; a send refused
 * at once) and done is not told. */
int askf_write(askf *a, const char *to, bool json, const char *buf, size_t size, mb_send_done done,
               void *ud);
/* Replies to req now (the answer, EAGAIN under O_NONBLOCK, ETIMEDOUT,
 * ECONNREFUSED, EINVAL before any question) or once the answer comes. */
void askf_read(askf *a, fuse_req_t req, size_t size, int flags);
unsigned askf_poll(askf *a, struct fuse_pollhandle *ph);
void askf_release(askf *a);

#endif
