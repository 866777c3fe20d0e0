/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/asks.h — an open ask as ask.c (the asker's side) and
 * asks.c (the open questions, told what happened by held.c, send.c,
 * sent.c and the tick) both see it.  For those two files only: the rest
 * of the model reaches asks.c through mb_int.h's ask_*_locked.
 */
#ifndef FLEETFS_MODEL_ASKS_H
#define FLEETFS_MODEL_ASKS_H

#include "fleetfs/model/mb_int.h"

typedef enum {
    ASK_IDLE,     /* nothing asked yet */
    ASK_SENDING,  /* the question is being published (registered) */
    ASK_WAITING,  /* published; no answer yet */
    ASK_ANSWERED, /* the answer a_id is held for the asker */
    ASK_TAKEN,    /* the answer was handed */
    ASK_EXPIRED,  /* the question's lifetime ended first */
    ASK_REFUSED,  /* its receiver refused the question */
} ask_state;

struct mb_ask {
    mailbox *mb; /* a ref */
    ask_state state;
    char q_id[ENV_ID_LEN + 1]; /* the question's msgId */
    char to[ADDR_MAX_LEN + 1]; /* who was asked: the answer comes from there */
    int64_t expires_ms;        /* the question's expiresAt (wall clock) */
    char a_id[ENV_ID_LEN + 1]; /* the answer's msgId */
    char why[256];             /* ASK_REFUSED: the receiver's word, or the broker's */
    struct fuse_pollhandle *ph;
    void (*ready)(void *ud);
    void *ud;
};

/* Lock held: the asker may have something new to read. */
void ask_wake_locked(mb_ask *a);

#endif
