/* SPDX-License-Identifier: Apache-2.0 */
/* broker/probes.c — passive declares (probes) that never hold the broker
 * thread.
 *
 * A probe asks the broker whether a mailbox exists, how many messages wait
 * in it and how many consumers read it.  RabbitMQ answers a passive declare
 * from the queue's own process, so a queue that is stuck (its process
 * suspended, a quorum queue that lost its leader) never answers.  Asked
 * synchronously, that held the broker thread for RPC_TIMEOUT_MS and then
 * cost the whole connection: every probe of a fleet's status files and
 * every send to that one peer dropped and re-made the connections of every
 * host that listed it, every few seconds, with what they were sending and
 * receiving (tests/integration/t0394).
 *
 * So each probe goes out on a channel of its own (PROBE_CHANNELS of them,
 * from CH_PROBE_FIRST) and the broker thread goes on; the answer is read
 * with the other frames (declare-ok, or a channel.close: 404 when there is
 * no such queue).  One probe per queue is in flight; who asks while it is
 * joins it.  Each waiter has a deadline: an RQ_PROBE is then answered
 * "no answer", a publish goes out without knowing whether its mailbox is
 * read (its confirm then says whether the broker took it).  A channel
 * whose queue never answers stays busy until it does, and a connection
 * whose probe channels are all busy says so instead of asking.
 *
 * A dead link (a frozen broker, a cut without FIN) also leaves probes
 * unanswered, and the synchronous call's timeout used to find it within
 * 5 s, well before the heartbeats (20 s).  So when a probe has waited
 * PING_AFTER_MS and nothing at all came from the broker for as long, a
 * ping goes out: a passive declare of amq.direct on CH_PING, which the
 * broker answers without asking any queue.  No answer within PING_WAIT_MS
 * drops the connection ("request timed out").
 */
#include "broker/probes.h"

#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "broker/chan.h"
#include "broker/conn_int.h"
#include "broker/pubchan.h"
#include "broker/sideconn.h"
#include "broker/state.h"
#include "broker/topology.h"
#include "fleetfs/base/log.h"

static bool is_probe_channel(amqp_channel_t ch)
{
    return ch >= CH_PROBE_FIRST && ch < CH_PROBE_FIRST + PROBE_CHANNELS;
}

void br_probes_init(br_conn *c)
{
    for (int i = 0; i < PROBE_CHANNELS; i++)
        g_queue_init(&c->probing[i].waiters);
    g_queue_init(&c->xwaiters);
}

/* After the thread ended: whatever still waits (nothing, as the
 * connection was closed) has only the thread's reference left. */
void br_probes_free(br_conn *c)
{
    br_req *r;
    for (int i = 0; i < PROBE_CHANNELS; i++) {
        br_probe_waiter *w;
        while ((w = g_queue_pop_head(&c->probing[i].waiters))) {
            br_req_unref(w->r);
            g_free(w);
        }
    }
    while ((r = g_queue_pop_head(&c->xwaiters)))
        br_req_unref(r);
}

int br_probes_open(br_conn *c)
{
    c->ping_sent_ms = 0;
    if (br_open_channel(c, CH_PING) < 0)
        return -1;
    c->xcheck[0] = '\0';
    c->xopen = br_open_channel(c, CH_XCHECK) == 0;
    if (!c->xopen)
        return -1;
    for (int i = 0; i < PROBE_CHANNELS; i++) {
        br_probe_chan *pc = &c->probing[i];
        pc->queue[0] = '\0';
        pc->warned = false;
        pc->open = br_open_channel(c, (amqp_channel_t)(CH_PROBE_FIRST + i)) == 0;
        if (!pc->open)
            return -1;
    }
    return 0;
}

/* Tell r the probe's outcome p. */
static void finish(br_conn *c, br_req *r, const br_probe *p)
{
    if (r->kind == RQ_PUBLISH) {
        c->up.publish_probed(c, r, p);
        return;
    }
    r->probe = *p;
    br_req_complete(c, r, p->valid ? FE_OK : p->err ? p->err : FE_TIMEOUT, p->detail);
}

/* r waited for a probe and the connection went (why): a publish was
 * never sent. */
static void lost_one(br_conn *c, br_req *r, const char *why)
{
    char detail[400];
    snprintf(detail, sizeof detail, "%s%s", why,
             r->kind == RQ_PUBLISH ? " before it was published; nothing was sent" : "");
    br_req_complete(c, r, FE_NOT_CONNECTED, detail);
}

/* Finish every waiter of the list with p; those after a finish that lost
 * the connection are told the connection is gone. */
static void finish_all(br_conn *c, GQueue *q, const br_probe *p)
{
    br_probe_waiter *w;
    while ((w = g_queue_pop_head(q))) {
        br_req *r = w->r;
        g_free(w);
        if (c->connected)
            finish(c, r, p);
        else
            lost_one(c, r, "the connection was lost");
    }
}

void br_probes_lost(br_conn *c, const char *why)
{
    br_req *r;
    while ((r = g_queue_pop_head(&c->xwaiters)))
        lost_one(c, r, why);
    c->xcheck[0] = '\0';
    c->xopen = false;
    for (int i = 0; i < PROBE_CHANNELS; i++) {
        br_probe_chan *pc = &c->probing[i];
        br_probe_waiter *w;
        while ((w = g_queue_pop_head(&pc->waiters))) {
            lost_one(c, w->r, why);
            g_free(w);
        }
        pc->queue[0] = '\0';
        pc->open = false;
        pc->warned = false;
    }
}

static br_probe_chan *chan_of(br_conn *c, const char *queue)
{
    for (int i = 0; i < PROBE_CHANNELS; i++)
        if (c->probing[i].queue[0] && strcmp(c->probing[i].queue, queue) == 0)
            return &c->probing[i];
    return NULL;
}

bool br_probe_publish_waiting(br_conn *c, const char *queue)
{
    br_probe_chan *pc = chan_of(c, queue);
    if (!pc)
        return false;
    for (GList *l = pc->waiters.head; l; l = l->next)
        if (((br_probe_waiter *)l->data)->r->kind == RQ_PUBLISH)
            return true;
    return false;
}

static void join(br_probe_chan *pc, br_req *r, int64_t wait_ms)
{
    br_probe_waiter *w = g_new0(br_probe_waiter, 1);
    w->r = r;
    w->deadline_ms = br_now_ms() + wait_ms;
    g_queue_push_tail(&pc->waiters, w);
}

/* A free probe channel, or NULL (*busy: how many are taken). */
static br_probe_chan *free_chan(br_conn *c, int *busy)
{
    br_probe_chan *free_pc = NULL;
    *busy = 0;
    for (int i = 0; i < PROBE_CHANNELS; i++) {
        if (!c->probing[i].open)
            continue;
        if (c->probing[i].queue[0])
            (*busy)++;
        else if (!free_pc)
            free_pc = &c->probing[i];
    }
    return free_pc;
}

/* The passive declare of queue on pc (free); create: a declare that makes
 * it, with the mailbox arguments, instead. */
static void send_on(br_conn *c, br_probe_chan *pc, const char *queue, bool create)
{
    amqp_table_entry_t entries[TOPO_MAILBOX_ARGS];
    amqp_queue_declare_t m;
    memset(&m, 0, sizeof m);
    m.queue = amqp_cstring_bytes(queue);
    m.passive = !create;
    m.durable = 1;
    m.arguments = create ? topo_mailbox_args(&c->cfg, entries) : amqp_empty_table;
    g_strlcpy(pc->queue, queue, sizeof pc->queue);
    pc->sent_ms = br_now_ms();
    pc->warned = false;
    if (amqp_send_method(c->amqp, (amqp_channel_t)(CH_PROBE_FIRST + (pc - c->probing)),
                         AMQP_QUEUE_DECLARE_METHOD, &m) != AMQP_STATUS_OK)
        br_drop_connection(c, "cannot send a passive declare");
}

void br_probe_ask(br_conn *c, br_req *r, int64_t wait_ms)
{
    br_probe_chan *pc = chan_of(c, r->queue);
    int busy;

    if (pc) {
        join(pc, r, wait_ms);
        return;
    }
    if (!(pc = free_chan(c, &busy))) {
        br_probe p = {.at_ms = br_now_ms(), .err = FE_TIMEOUT};
        snprintf(p.detail, sizeof p.detail,
                 "not asked: the broker has not answered this connection's last %d probes "
                 "(their queues do not answer)",
                 busy);
        finish(c, r, &p);
        return;
    }
    /* joined first: a send that fails drops the connection, which tells
     * every waiter */
    join(pc, r, wait_ms);
    send_on(c, pc, r->queue, false);
}

void br_probe_create(br_conn *c, br_req *r, int64_t wait_ms)
{
    br_probe_chan *pc = chan_of(c, r->queue);
    int busy;
    if (pc) { /* a declare of it is out already: its answer will do */
        join(pc, r, wait_ms);
        return;
    }
    if (!(pc = free_chan(c, &busy))) {
        br_probe p = {.at_ms = br_now_ms(), .err = FE_TIMEOUT};
        snprintf(p.detail, sizeof p.detail,
                 "not created: the broker has not answered this connection's last %d declares "
                 "(their queues do not answer)",
                 busy);
        finish(c, r, &p);
        return;
    }
    join(pc, r, wait_ms);
    send_on(c, pc, r->queue, true);
}

/* The passive declare of the first waiter's exchange, when none is out
 * and the channel is open. */
static void xcheck_next(br_conn *c)
{
    br_req *r = g_queue_peek_head(&c->xwaiters);
    amqp_exchange_declare_t m;
    if (!r || c->xcheck[0] || !c->xopen)
        return;
    memset(&m, 0, sizeof m);
    m.exchange = amqp_cstring_bytes(r->exchange);
    m.type = amqp_cstring_bytes("topic");
    m.passive = 1;
    m.durable = 1;
    m.arguments = amqp_empty_table;
    g_strlcpy(c->xcheck, r->exchange, sizeof c->xcheck);
    c->xsent_ms = br_now_ms();
    if (amqp_send_method(c->amqp, CH_XCHECK, AMQP_EXCHANGE_DECLARE_METHOD, &m) != AMQP_STATUS_OK)
        br_drop_connection(c, "cannot send a passive declare of an exchange");
}

void br_exchange_ask(br_conn *c, br_req *r)
{
    g_queue_push_tail(&c->xwaiters, r);
    xcheck_next(c);
}

/* The answer about c->xcheck: code 0 (it exists) or the broker's code and
 * text.  Its waiters go on (or fail); waiters for another exchange ask
 * again, in order. */
static void xcheck_answered(br_conn *c, int code, const char *text)
{
    GQueue q = G_QUEUE_INIT;
    char name[BR_QUEUE_MAX], key[BR_QUEUE_MAX + 16];
    br_req *r;
    g_strlcpy(name, c->xcheck, sizeof name);
    c->xcheck[0] = '\0';
    if (code == 0) {
        snprintf(key, sizeof key, "exchange:%s", name);
        g_hash_table_add(c->declared, g_strdup(key));
    }
    while ((r = g_queue_pop_head(&c->xwaiters)))
        g_queue_push_tail(&q, r);
    while ((r = g_queue_pop_head(&q))) {
        if (!c->connected) {
            lost_one(c, r, "the connection was lost");
        } else if (strcmp(r->exchange, name) != 0) {
            br_exchange_ask(c, r);
        } else if (code == 0) {
            c->up.publish_go(c, r);
        } else {
            snprintf(r->detail, sizeof r->detail,
                     "exchange %s does not exist (%d %s): nothing was sent; a mount whose login "
                     "may configure makes it, else an operator runs `fleetfs declare <host>` "
                     "(fleetfs-broker host add)",
                     name, code, text);
            br_req_complete(c, r,
                            code == 404   ? FE_NO_MAILBOX
                            : code == 403 ? FE_ACCESS
                                          : FE_INTERNAL,
                            NULL);
        }
    }
    xcheck_next(c);
}

/* A frame on CH_XCHECK: the declare's answer, or the channel's close and
 * reopen (sent without waiting for its open-ok). */
static void xcheck_frame(br_conn *c, const amqp_frame_t *f)
{
    if (f->payload.method.id == AMQP_EXCHANGE_DECLARE_OK_METHOD) {
        if (c->xcheck[0])
            xcheck_answered(c, 0, "");
    } else if (f->payload.method.id == AMQP_CHANNEL_OPEN_OK_METHOD) {
        c->xopen = true;
        xcheck_next(c);
    } else if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const amqp_channel_close_t *m = f->payload.method.decoded;
        char text[256];
        int code = m->reply_code;
        sc_bytes_str(m->reply_text, text, sizeof text);
        c->xopen = false;
        if (br_reopen_nowait(c, CH_XCHECK) < 0) {
            br_drop_connection(c, "cannot reopen the exchange check's channel");
            return;
        }
        if (c->xcheck[0])
            xcheck_answered(c, code ? code : 500, text);
    }
}

bool br_probe_send(br_conn *c, const char *queue)
{
    br_probe_chan *pc;
    int busy;
    if (chan_of(c, queue))
        return true;
    if (!(pc = free_chan(c, &busy)))
        return false;
    send_on(c, pc, queue, false);
    return true;
}

/* The answer to pc's probe, p (settled: cached): free the channel, tell
 * the waiters. */
static void answered(br_conn *c, br_probe_chan *pc, const br_probe *p)
{
    GQueue q = G_QUEUE_INIT;
    int64_t took = br_now_ms() - pc->sent_ms;
    if (pc->warned)
        log_info("%s: %s answers again: a passive declare of it took %lld ms", br_who(c), pc->queue,
                 (long long)took);
    /* the channel is free before anyone is told: a publish told may ask
     * again, or drop the connection */
    while (!g_queue_is_empty(&pc->waiters))
        g_queue_push_tail(&q, g_queue_pop_head(&pc->waiters));
    /* publishes that went out without waiting longer for it, and whose
     * confirm has not come yet: now it is known whether anyone reads
     * their mailbox (the broker answers the declare, sent first, before
     * it confirms a persistent message) */
    for (int i = 0; i < 2 && p->valid; i++) /* and those waiting for CH_PUB's reopen */
        for (GList *l = (i ? &c->pubheld : &c->inflight)->head; l; l = l->next) {
            br_req *r = l->data;
            if (r->unprobed && strcmp(r->queue, pc->queue) == 0) {
                r->unprobed = false;
                r->unread = p->present && p->consumers == 0;
            }
        }
    if (!c->publisher)
        c->up.answered(c, pc->queue);
    pc->queue[0] = '\0';
    pc->warned = false;
    finish_all(c, &q, p);
}

/* The ping's answer (or, impossible for amq.direct, its channel closed:
 * an answer too, and the channel is reopened without waiting; its open-ok
 * is then awaited as a ping's answer is, so no ping goes out before it). */
static void ping_frame(br_conn *c, const amqp_frame_t *f)
{
    if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        if (br_reopen_nowait(c, CH_PING) < 0) {
            br_drop_connection(c, "cannot reopen the ping channel");
            return;
        }
        c->ping_sent_ms = br_now_ms();
        return;
    }
    c->ping_sent_ms = 0;
}

bool br_probe_frame(br_conn *c, const amqp_frame_t *f)
{
    const amqp_queue_declare_ok_t *ok = NULL;
    br_probe_chan *pc;
    br_probe p;
    int code = 0;

    if (f->frame_type == AMQP_FRAME_METHOD && f->channel == CH_PING) {
        ping_frame(c, f);
        return true;
    }
    if (f->frame_type == AMQP_FRAME_METHOD && f->channel == CH_XCHECK) {
        xcheck_frame(c, f);
        return true;
    }
    if (f->frame_type != AMQP_FRAME_METHOD || !is_probe_channel(f->channel))
        return false;
    pc = &c->probing[f->channel - CH_PROBE_FIRST];
    memset(&p, 0, sizeof p);
    p.at_ms = pc->sent_ms;
    if (f->payload.method.id == AMQP_QUEUE_DECLARE_OK_METHOD) {
        ok = f->payload.method.decoded;
    } else if (f->payload.method.id == AMQP_CHANNEL_OPEN_OK_METHOD) {
        pc->open = true; /* reopened after a close (below): free for the next probe */
        return true;
    } else if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const amqp_channel_close_t *m = f->payload.method.decoded;
        code = m->reply_code;
        sc_bytes_str(m->reply_text, p.detail, sizeof p.detail);
        /* close-ok, and the channel.open sent without waiting for its
         * open-ok (the frame above): a reopen never holds this thread,
         * nor the publish that waited for this answer (a 404 is the usual
         * answer for a peer that never started).  The channel takes no
         * probe until it is open again. */
        pc->open = false;
        if (br_reopen_nowait(c, f->channel) < 0) {
            br_drop_connection(c, "cannot reopen a probe channel");
            return true;
        }
    } else {
        return true; /* nothing else is asked on these channels */
    }
    if (pc->queue[0]) {
        br_probe_settle(c, pc->queue, ok, code, &p);
        answered(c, pc, &p);
    }
    return true;
}

/* A stuck queue, or a dead link?  See the top of the file. */
static void ping_tick(br_conn *c, int64_t now)
{
    int64_t oldest = 0;
    amqp_exchange_declare_t m;
    if (c->ping_sent_ms) {
        if (now - c->ping_sent_ms > PING_WAIT_MS) {
            char why[200];
            snprintf(why, sizeof why,
                     "request timed out: nothing from the broker for %lld ms, not even the "
                     "answer to a passive declare of an exchange",
                     (long long)(now - c->last_recv_ms));
            br_drop_connection(c, why);
        }
        return;
    }
    for (int i = 0; i < PROBE_CHANNELS; i++)
        if (c->probing[i].queue[0] && (!oldest || c->probing[i].sent_ms < oldest))
            oldest = c->probing[i].sent_ms;
    if (c->xcheck[0] && (!oldest || c->xsent_ms < oldest))
        oldest = c->xsent_ms;
    if (br_pubchan_waiting_since(c) && (!oldest || br_pubchan_waiting_since(c) < oldest))
        oldest = br_pubchan_waiting_since(c);
    if (!oldest || now - oldest < PING_AFTER_MS || now - c->last_recv_ms < PING_AFTER_MS)
        return;
    memset(&m, 0, sizeof m);
    m.exchange = amqp_cstring_bytes("amq.direct");
    m.type = amqp_cstring_bytes("direct");
    m.passive = 1;
    m.durable = 1;
    m.arguments = amqp_empty_table;
    c->ping_sent_ms = now;
    if (amqp_send_method(c->amqp, CH_PING, AMQP_EXCHANGE_DECLARE_METHOD, &m) != AMQP_STATUS_OK)
        br_drop_connection(c, "cannot send a passive declare of an exchange");
}

void br_probes_tick(br_conn *c)
{
    int64_t now = br_now_ms();
    ping_tick(c, now);
    if (!c->connected)
        return;
    for (int i = 0; i < PROBE_CHANNELS; i++) {
        br_probe_chan *pc = &c->probing[i];
        GQueue due = G_QUEUE_INIT;
        br_probe p;
        for (GList *l = pc->waiters.head, *next; l; l = next) {
            next = l->next;
            if (((br_probe_waiter *)l->data)->deadline_ms <= now) {
                g_queue_push_tail(&due, l->data);
                g_queue_delete_link(&pc->waiters, l);
            }
        }
        if (g_queue_is_empty(&due))
            continue;
        memset(&p, 0, sizeof p);
        p.at_ms = pc->sent_ms;
        p.err = FE_TIMEOUT;
        snprintf(p.detail, sizeof p.detail,
                 "no answer: the broker has not answered a passive declare of %s for %lld ms "
                 "(the queue does not answer: stuck, or a quorum queue without a leader)",
                 pc->queue, (long long)(now - pc->sent_ms));
        if (!pc->warned && !c->ping_sent_ms) { /* not while the link itself is in doubt */
            pc->warned = true;
            log_warn("%s: %s: %s; %s; the connection and every other mailbox go on; check "
                     "that queue on the broker (rabbitmq-queues, or the management UI)",
                     br_who(c), pc->queue, p.detail,
                     c->publisher ? "sends to it go out without knowing whether it is read, and "
                                    "stay unconfirmed (the write fails ETIMEDOUT) until the "
                                    "queue takes them"
                                  : "its status says it does not answer");
        }
        finish_all(c, &due, &p);
        if (!c->connected)
            return;
    }
}
