/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/receipts.c — receipts in both directions.
 *
 * In: lead.<me>.receipts carries signed receipts about messages this lead
 * sent.  Each is checked like a message — it parses, is a receipt for me,
 * its signature matches the key trusted for its sender, its lifetime is at
 * most message_ttl and does not start in the future, it has not expired —
 * and then, if its `ref` names a message this lead sent to that sender,
 * its msgId must not have been applied before (so a captured old receipt
 * cannot move a `sent` state) and it moves the sent entry forward
 * (sent.c).  Applied receipts are recorded in their own seen set
 * (accept.c), never in the messages' one: a peer flooding receipts cannot
 * flush the record that stops a replayed message.  A receipt about
 * anything else changes nothing and is not recorded (so a flood of those
 * costs no memory); it is acked, and logged within a budget per sender.
 * One exception to "applied before": a copy the broker marks redelivered
 * is this lead's own delivery coming back, its ack lost with the
 * connection (a broker restart): it is acked and not applied again, never
 * dead-lettered (a replay of captured bytes is a fresh delivery,
 * redelivered false, and is refused).
 *
 * Out: a receipt about a message we consumed must reach its sender even if
 * our link is down right then, or we crash right after consuming.  So it
 * goes into a durable outbox first (state_dir/receipts.outbox, an applog:
 * {"id","to","env"} lines, and {"done":id} once the broker confirmed it or
 * it was given up), in the same locked step that writes history and
 * removes the message (held.c).  The file is rewritten with only the
 * pending ones once it holds twice as many lines.
 *
 * One queue per destination, so one peer cannot hold back everybody's
 * receipts: a peer offline long enough to fill lead.<peer>.receipts (or a
 * hostile one that keeps it full) only delays its own.  One thread takes
 * the destinations in turn and hands the oldest receipt of a destination
 * whose retry time has come to a sender thread (a pool): at most one
 * attempt per destination is in flight, and up to OUTBOX_SENDERS
 * destinations are tried at once, so a destination whose publish hangs
 * (no confirm until send_timeout: a queue that stops answering) holds up
 * its own receipts only.  A failure backs that destination off alone
 * (1 s, doubling to 15 s), the others go on.  A full
 * queue, a link down and a missing receipt queue (it may be created soon:
 * a peer that has not started yet, or an operator's `host add` to come)
 * are retried until the receipt's own expiresAt; a refusal that cannot
 * change (no permission) drops it at once.  The bound per destination
 * (outbox_bound: OUTBOX_PEER_MAX) drops only the words its sender's own
 * clock reaches alike (`expired`, `rejected`, a control answer): a receipt
 * of a message typed, acked or left uncertain is the one word the sender
 * cannot learn otherwise, so it is dropped only past OUTBOX_HARD_TIMES
 * times the bound (one full receipt queue's worth: a peer that sends yet
 * never takes its receipts).  Every drop is counted (status:
 * receipts_dropped) and logged: a refusal or an expiry per receipt, a
 * bound once per streak with the count when it ends.
 *
 * A receipt that may have reached the peer's queue already (an attempt
 * without a confirm, or one loaded after a restart) is signed again under
 * a fresh msgId before the next attempt (renew_locked): the peer refuses a
 * msgId it has seen as a replay, but takes a second receipt with the same
 * ref and state as changing nothing.
 *
 * The control plane's answers (`spawned`, SPEC section 11) share the
 * receipt queue: a body that is not an envelope but decodes as a control
 * envelope of type spawned is checked here (control_answer) and handed to
 * the owner's hook (mb_set_control_answers); its msgId goes into the same
 * seen set as receipts, so a replayed answer is refused.
 */
#include "fleetfs/model/mb_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/base/log.h"

#define OUTBOX_LINE_MAX (64 * 1024)
#define OUTBOX_IDLE_MS 1000
#define OUTBOX_RETRY_MS 1000
#define OUTBOX_BACKOFF_MAX_MS 15000
#define OUTBOX_PEER_MAX 1000
#define OUTBOX_HARD_TIMES 10 /* the bound for the words of consumption */
#define OUTBOX_SENDERS 32    /* destinations tried at once */

typedef struct {
    char id[ENV_ID_LEN + 1];
    char to[64];
    char *json;
    int64_t expires_ms; /* the receipt's own expiresAt (wall clock ms) */
    bool unsure;        /* it may be in the peer's queue already: renew before sending */
} ob_item;

typedef struct {
    char to[64];
    GQueue items;    /* ob_item*, oldest first */
    int64_t next_ms; /* monotonic: no attempt before */
    int backoff_ms;  /* the next failure's wait */
    bool busy;       /* an attempt at its head is in flight (a sender owns it) */
    bool warned;     /* the current failure streak was logged */
    unsigned over;   /* dropped over the bound in the current streak */
} ob_dest;

struct mb_outbox {
    applog *log;
    GHashTable *dests; /* to -> ob_dest* */
    GQueue turn;       /* ob_dest* with items, in the order they get a turn */
    size_t pending;
    uint64_t dropped;
    GCond cv; /* with mailbox.lock: something to send, a sender done, or stop */
    GThread *thread;
    GThreadPool *senders; /* one attempt each (send_one) */
    unsigned busy;        /* attempts in flight */
    bool stopping;
};

/* One attempt at d's head, on a sender thread. */
typedef struct {
    mb_host *h;
    ob_dest *d;
    ob_item *it;
    char id[ENV_ID_LEN + 1];
    char to[64];
    char *json;
} ob_attempt;

static void item_free(ob_item *it)
{
    g_free(it->json);
    g_free(it);
}

static void dest_free(ob_dest *d)
{
    g_queue_clear_full(&d->items, (GDestroyNotify)item_free);
    g_free(d);
}

static char *item_line(const ob_item *it)
{
    json_t *j = json_pack("{s:s,s:s,s:s}", "id", it->id, "to", it->to, "env", it->json);
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}

/* The expiresAt of a receipt envelope (its JSON), or 0 when unreadable. */
static int64_t env_expiry(const char *json)
{
    json_t *j = json_loads(json, 0, NULL);
    int64_t ms = 0;
    const char *at = json_string_value(json_object_get(j, "expiresAt"));
    if (!at || env_time_parse(at, &ms) < 0)
        ms = 0;
    json_decref(j);
    return ms;
}

static ob_dest *dest_get(mb_outbox *ob, const char *to)
{
    ob_dest *d = g_hash_table_lookup(ob->dests, to);
    if (!d) {
        d = g_new0(ob_dest, 1);
        g_strlcpy(d->to, to, sizeof d->to);
        d->backoff_ms = OUTBOX_RETRY_MS;
        g_hash_table_insert(ob->dests, d->to, d);
    }
    return d;
}

static void push(mb_outbox *ob, ob_item *it)
{
    ob_dest *d = dest_get(ob, it->to);
    if (!d->items.length)
        g_queue_push_tail(&ob->turn, d);
    g_queue_push_tail(&d->items, it);
    ob->pending++;
}

/* Take it out of memory; the caller writes the done line. */
static void take_out(mb_outbox *ob, ob_dest *d, ob_item *it)
{
    g_queue_remove(&d->items, it);
    ob->pending--;
    if (!d->items.length)
        g_queue_remove(&ob->turn, d);
}

static void load_line(mb_outbox *ob, GHashTable *index, const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *done = json_string_value(json_object_get(j, "done"));
    const char *to = json_string_value(json_object_get(j, "to"));
    const char *env = json_string_value(json_object_get(j, "env"));
    if (done) {
        ob_item *it = g_hash_table_lookup(index, done);
        if (it) {
            ob_dest *d = g_hash_table_lookup(ob->dests, it->to);
            g_hash_table_remove(index, done);
            take_out(ob, d, it);
            item_free(it);
        }
    } else if (id && env_id_valid(id) && to && env && !g_hash_table_contains(index, id)) {
        ob_item *it = g_new0(ob_item, 1);
        g_strlcpy(it->id, id, sizeof it->id);
        g_strlcpy(it->to, to, sizeof it->to);
        it->json = g_strdup(env);
        it->expires_ms = env_expiry(env);
        it->unsure = true; /* sent before the restart, or not: nobody knows */
        push(ob, it);
        g_hash_table_insert(index, it->id, it);
    }
    json_decref(j);
}

int outbox_open(mb_host *h, char **err)
{
    mb_outbox *ob = g_new0(mb_outbox, 1);
    GPtrArray *lines = NULL;
    GHashTable *index = g_hash_table_new(g_str_hash, g_str_equal);
    char *path = g_build_filename(h->o->state_dir, "receipts.outbox", NULL);
    g_cond_init(&ob->cv);
    ob->dests = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)dest_free);
    ob->log = applog_open(path, APPLOG_WRITE, OUTBOX_LINE_MAX, &lines, err);
    g_free(path);
    h->outbox = ob;
    if (!ob->log) {
        g_hash_table_destroy(index);
        return -1;
    }
    mb_warn_if_degraded(ob->log, "receipts");
    for (guint i = 0; i < lines->len; i++)
        load_line(ob, index, lines->pdata[i]);
    g_ptr_array_free(lines, TRUE);
    g_hash_table_destroy(index);
    if (ob->pending)
        log_info("receipts: %zu receipts from before the restart wait in the outbox", ob->pending);
    return 0;
}

static GString *render_pending(void *p)
{
    mb_outbox *ob = p;
    GString *s = g_string_new(NULL);
    for (GList *l = ob->turn.head; l; l = l->next) {
        ob_dest *d = l->data;
        for (GList *k = d->items.head; k; k = k->next) {
            char *line = item_line(k->data);
            g_string_append(s, line);
            g_string_append_c(s, '\n');
            free(line);
        }
    }
    return s;
}

/* The bound per destination: OUTBOX_PEER_MAX, or FLEETFS_TEST_OUTBOX_CAP
 * (t0330: a bound of a few, so a test fills it with a few messages). */
static unsigned outbox_bound(void)
{
    const char *env = g_getenv("FLEETFS_TEST_OUTBOX_CAP");
    guint64 v = env ? g_ascii_strtoull(env, NULL, 10) : 0;
    return v > 0 && v < OUTBOX_PEER_MAX ? (unsigned)v : OUTBOX_PEER_MAX;
}

/* A word only the receiver can give: the message was typed, acked, or
 * left uncertain by a crash.  Its sender's clock would say `expired`. */
static bool word_of_consumption(const char *state)
{
    return state && (!strcmp(state, "injected") || !strcmp(state, "confirmed") ||
                     !strcmp(state, "acked") || !strcmp(state, "uncertain"));
}

/* Lock held: a destination at its bound takes no more of this kind (state:
 * the receipt's, NULL for a control answer); counted, and logged once per
 * streak. */
static bool over_bound_locked(mb_outbox *ob, const char *to, const char *ref, const char *state)
{
    ob_dest *d = g_hash_table_lookup(ob->dests, to);
    unsigned bound = outbox_bound();
    bool kept = word_of_consumption(state);
    if (kept)
        bound *= OUTBOX_HARD_TIMES;
    if (!d || d->items.length < bound)
        return false;
    ob->dropped++;
    if (d->over++)
        return true;
    if (kept)
        log_warn("receipts: %u receipts for %s wait already (it does not take them), the most "
                 "kept even for typed and acked messages; the %s receipt about %s and any more "
                 "are dropped until it takes some (counted in receipts_dropped): %s will not "
                 "learn what became of those messages; check why %s does not take its "
                 "receipts (its lead.%s.receipts full, or not consumed)",
                 bound, to, state, ref, to, to, to);
    else
        log_warn("receipts: %u receipts for %s wait already (it does not take them); the %s "
                 "about %s and any more of its kind are dropped until it takes some (counted in "
                 "receipts_dropped; its own clock says expired for those); receipts of typed, "
                 "acked or uncertain messages are still kept, up to %u",
                 bound, to, state ? state : "control answer", ref, bound * OUTBOX_HARD_TIMES);
    return true;
}

void outbox_queue_locked(mailbox *mb, const envelope *orig, const char *state, const char *detail)
{
    mb_outbox *ob = mb->h->outbox;
    char dest[MB_ID_MAX];
    envelope r;
    size_t len;
    int64_t now = env_now_ms();
    ob_item *it;
    char *line;

    /* the receipt goes to the queue of the host the sender lives on */
    mb_id_host(orig->from, dest, sizeof dest);
    if (ob && over_bound_locked(ob, dest, orig->msgId, state))
        return;
    memset(&r, 0, sizeof r);
    r.v = 1;
    g_strlcpy(r.type, ENV_TYPE_RECEIPT, sizeof r.type);
    env_new_msgid(r.msgId);
    g_strlcpy(r.from, mb->o->coord_id, sizeof r.from);
    /* an agent's receipt names it; a lead's is from itself (as ever) */
    if (!mb->lead)
        g_strlcpy(r.recipient, mb->id, sizeof r.recipient);
    g_strlcpy(r.to, orig->from, sizeof r.to);
    env_time_format(now, r.sentAt);
    env_time_format(now + mb->o->message_ttl_ms, r.expiresAt);
    g_strlcpy(r.ref, orig->msgId, sizeof r.ref);
    g_strlcpy(r.state, state, sizeof r.state);
    g_strlcpy(r.detail, detail ? detail : "", sizeof r.detail);
    r.body = "";
    if (!ob || (mb->h->key && sig_sign(mb->h->key, &r) < 0)) {
        log_err("receipt %s about %s: cannot sign or queue it; %s will see the message expire",
                state, orig->msgId, orig->from);
        return;
    }
    it = g_new0(ob_item, 1);
    g_strlcpy(it->id, r.msgId, sizeof it->id);
    g_strlcpy(it->to, dest, sizeof it->to);
    it->expires_ms = now + mb->o->message_ttl_ms;
    it->json = env_encode(&r, &len);
    if (!it->json) {
        item_free(it);
        return;
    }
    line = item_line(it);
    if (!line || applog_append(ob->log, line) < 0)
        log_warn("receipts: cannot write %s (%s); the %s receipt about %s is kept in memory "
                 "only",
                 applog_path(ob->log), g_strerror(errno), state, orig->msgId);
    free(line);
    push(ob, it);
    g_cond_signal(&ob->cv);
}

void outbox_counts(mb_host *h, uint64_t *pending, uint64_t *dropped)
{
    g_mutex_lock(&h->lock);
    *pending = h->outbox ? h->outbox->pending : 0;
    *dropped = h->outbox ? h->outbox->dropped : 0;
    g_mutex_unlock(&h->lock);
}

const applog *outbox_log_locked(mb_host *h)
{
    return h->outbox->log;
}

/* Lock held: it was sent, or is given up: forget it durably. */
static void done_locked(mb_outbox *ob, ob_dest *d, ob_item *it)
{
    char *line = g_strdup_printf("{\"done\":\"%s\"}", it->id);
    take_out(ob, d, it);
    if (applog_add(ob->log, line, ob->pending, render_pending, ob) < 0)
        log_warn("receipts: cannot write %s: %s", applog_path(ob->log), g_strerror(errno));
    g_free(line);
    item_free(it);
}

static void wait_locked(mb_host *h, int64_t ms)
{
    g_cond_wait_until(&h->outbox->cv, &h->lock, g_get_monotonic_time() + ms * 1000);
}

/* Lock held: the next destination whose turn it is (its retry time has
 * come, no attempt in flight), rotated to the back; NULL and *wait_ms when
 * none is due (or every sender is busy). */
static ob_dest *next_due_locked(mb_outbox *ob, int64_t now, int64_t *wait_ms)
{
    *wait_ms = OUTBOX_IDLE_MS;
    if (ob->busy >= OUTBOX_SENDERS)
        return NULL; /* a sender's end signals cv */
    for (GList *l = ob->turn.head; l; l = l->next) {
        ob_dest *d = l->data;
        if (d->busy)
            continue;
        if (d->next_ms <= now) {
            g_queue_unlink(&ob->turn, l);
            g_queue_push_tail_link(&ob->turn, l);
            return d;
        }
        *wait_ms = MIN(*wait_ms, d->next_ms - now);
    }
    return NULL;
}

/* Lock held: what became of one attempt at d's head. */
static void settle_locked(mb_outbox *ob, ob_dest *d, ob_item *it, fe_code r, const char *detail)
{
    if (r == FE_OK || r == FE_ACCESS) {
        if (r != FE_OK) {
            ob->dropped++;
            log_warn("receipts: %s to %s can never be delivered (%s: %s); dropped", it->id, it->to,
                     fe_hint(r), detail);
        } else if (d->warned) {
            log_info("receipts: %s takes its receipts again (%u waiting)", d->to,
                     d->items.length - 1);
        }
        if (r == FE_OK && d->over)
            log_info("receipts: %u receipts for %s were dropped over the bound while it did "
                     "not take them",
                     d->over, d->to);
        if (r == FE_OK) {
            d->warned = false;
            d->over = 0;
            d->backoff_ms = OUTBOX_RETRY_MS;
            d->next_ms = 0;
        }
        done_locked(ob, d, it);
        return;
    }
    if (r == FE_TIMEOUT)
        it->unsure = true; /* the broker may have taken it: no confirm came */
    if (!d->warned)
        log_warn("receipts: %s does not take its receipts now (%s%s%s); %u wait, retried with "
                 "backoff until each expires; other peers' receipts go on",
                 d->to, fe_hint(r), detail[0] ? ": " : "", detail, d->items.length);
    d->warned = true;
    d->next_ms = g_get_monotonic_time() / 1000 + d->backoff_ms;
    /* A resource alarm is refused here, before anything is sent: trying
     * again costs nothing, so it is tried every OUTBOX_RETRY_MS and the
     * receipts go within a second of the alarm clearing, not after a
     * backoff grown while it lasted (up to OUTBOX_BACKOFF_MAX_MS) */
    if (r == FE_BLOCKED)
        d->backoff_ms = OUTBOX_RETRY_MS;
    else
        d->backoff_ms = MIN(2 * d->backoff_ms, OUTBOX_BACKOFF_MAX_MS);
}

/* Lock held (on the outbox thread, between two attempts): drop every
 * receipt whose expiresAt has passed, wherever it waits in its queue. */
static void expire_locked(mb_outbox *ob)
{
    int64_t now = env_now_ms();
    GList *dests = g_list_copy(ob->turn.head);
    for (GList *l = dests; l; l = l->next) {
        ob_dest *d = l->data;
        GList *k = d->items.head;
        if (k && d->busy)
            k = k->next; /* in flight: its sender settles it */
        while (k) {
            ob_item *it = k->data;
            k = k->next;
            if (it->expires_ms == 0 || it->expires_ms > now)
                continue;
            ob->dropped++;
            log_warn("receipts: %s to %s expired in the outbox (the peer did not take it in "
                     "time); dropped",
                     it->id, it->to);
            done_locked(ob, d, it);
        }
    }
    g_list_free(dests);
}

/* Lock held: an earlier attempt may have put this receipt into the peer's
 * queue already (no confirm came, or it was sent before a restart).  The
 * next attempt goes under a fresh msgId, signed again: a copy that did
 * arrive and this one are then two receipts with the same ref and state
 * (the second changes nothing), never one msgId twice, which the peer must
 * refuse as a replay (replayed-receipt, to fleet.dlq).  Durable: the new
 * line, then the old id's "done". */
/* A control answer (`spawned`) renewed the same way: a fresh msgId,
 * signed again.  The new JSON, or NULL (then it goes as it is). */
static char *renew_control(mb_host *h, const char *json, char *id)
{
    ctl_env c;
    char why[160], *out = NULL;
    size_t len;
    if (ctl_decode(json, strlen(json), h->o->max_message, &c, why, sizeof why) < 0)
        return NULL;
    env_new_msgid(c.msgId);
    if (h->key && ctl_sign(h->key, &c) == 0 && (out = ctl_encode(&c, &len)))
        g_strlcpy(id, c.msgId, ENV_ID_LEN + 1);
    ctl_free(&c);
    return out;
}

static void renew_locked(mb_host *h, mb_outbox *ob, ob_item *it)
{
    envelope e;
    char why[160], old[ENV_ID_LEN + 1], fresh[ENV_ID_LEN + 1], *json, *line, *done;
    size_t len;
    it->unsure = false;
    if (env_decode(it->json, strlen(it->json), h->o->max_message, &e, why, sizeof why) < 0) {
        /* not an envelope: a control answer, or sent as it is (the peer
         * will say what is wrong with it) */
        if (!(json = renew_control(h, it->json, fresh)))
            return;
    } else {
        env_new_msgid(e.msgId);
        json = (h->key && sig_sign(h->key, &e) < 0) ? NULL : env_encode(&e, &len);
        g_strlcpy(fresh, e.msgId, sizeof fresh);
        env_free(&e);
        if (!json)
            return;
    }
    g_strlcpy(old, it->id, sizeof old);
    g_strlcpy(it->id, fresh, sizeof it->id);
    g_free(it->json);
    it->json = json;
    line = item_line(it);
    done = g_strdup_printf("{\"done\":\"%s\"}", old);
    if (!line || applog_append(ob->log, line) < 0 || applog_append(ob->log, done) < 0)
        log_warn("receipts: cannot write %s (%s); receipt %s is kept in memory only",
                 applog_path(ob->log), g_strerror(errno), it->id);
    log_info("receipts: %s to %s goes again as %s (the broker may have taken the first copy)", old,
             it->to, it->id);
    free(line);
    g_free(done);
}

/* A sender thread: one attempt, then what became of it. */
static void send_one(gpointer data, gpointer unused)
{
    ob_attempt *a = data;
    mb_host *h = a->h;
    mb_outbox *ob = h->outbox;
    char detail[256] = "";
    br_status st;
    fe_code r = FE_NOT_CONNECTED;
    (void)unused;
    h->br.status(h->br.b, 0, &st);
    if (st.link == BR_CONNECTED)
        r = h->br.publish_receipt(h->br.b, a->to, a->id, a->json, strlen(a->json),
                                  h->o->send_timeout_ms, detail, sizeof detail);
    g_mutex_lock(&h->lock);
    /* a busy destination's head is removed by its sender only */
    settle_locked(ob, a->d, a->it, r, detail);
    a->d->busy = false;
    ob->busy--;
    g_cond_signal(&ob->cv);
    g_mutex_unlock(&h->lock);
    g_free(a->json);
    g_free(a);
}

static gpointer outbox_main(gpointer p)
{
    mb_host *h = p;
    mb_outbox *ob = h->outbox;
    int64_t swept = 0;
    g_mutex_lock(&h->lock);
    while (!ob->stopping) {
        int64_t wait_ms, now = g_get_monotonic_time() / 1000;
        ob_dest *d;
        ob_item *it;
        ob_attempt *a;
        GError *err = NULL;
        if (now - swept >= OUTBOX_IDLE_MS) {
            expire_locked(ob);
            swept = now;
        }
        d = next_due_locked(ob, now, &wait_ms);
        it = d ? g_queue_peek_head(&d->items) : NULL;
        if (!it) {
            wait_locked(h, MAX(wait_ms, 1));
            continue;
        }
        if (it->unsure)
            renew_locked(h, ob, it);
        a = g_new0(ob_attempt, 1);
        a->h = h;
        a->d = d;
        a->it = it;
        g_strlcpy(a->id, it->id, sizeof a->id);
        g_strlcpy(a->to, it->to, sizeof a->to);
        a->json = g_strdup(it->json);
        d->busy = true;
        ob->busy++;
        /* never queued: at most OUTBOX_SENDERS are pushed at once.  When
         * no thread could be started for it, GLib keeps it queued, and it
         * is attempted once a sender thread is free or can be started
         * (its destination stays busy until then): said, not silent. */
        if (!g_thread_pool_push(ob->senders, a, &err)) {
            log_warn("receipts: cannot start a sender thread (%s); the receipt to %s waits until "
                     "one is free, and that peer's receipts with it; check the daemon's thread "
                     "and memory limits",
                     err ? err->message : "unknown error", it->to);
            g_clear_error(&err);
        }
    }
    /* the senders finish their attempts (each within send_timeout) */
    while (ob->busy)
        g_cond_wait(&ob->cv, &h->lock);
    g_mutex_unlock(&h->lock);
    return NULL;
}

void outbox_start(mb_host *h)
{
    if (h->outbox && !h->outbox->thread) {
        h->outbox->stopping = false;
        h->outbox->senders = g_thread_pool_new(send_one, NULL, OUTBOX_SENDERS, FALSE, NULL);
        h->outbox->thread = g_thread_new("outbox", outbox_main, h);
    }
}

void outbox_stop_begin(mb_host *h)
{
    mb_outbox *ob = h->outbox;
    if (!ob || !ob->thread)
        return;
    g_mutex_lock(&h->lock);
    ob->stopping = true;
    g_cond_signal(&ob->cv);
    g_mutex_unlock(&h->lock);
}

void outbox_stop(mb_host *h)
{
    mb_outbox *ob = h->outbox;
    if (!ob || !ob->thread)
        return;
    outbox_stop_begin(h);
    g_thread_join(ob->thread);
    ob->thread = NULL;
    g_thread_pool_free(ob->senders, FALSE, TRUE);
    ob->senders = NULL;
}

void outbox_free(mb_host *h)
{
    mb_outbox *ob = h->outbox;
    if (!ob)
        return;
    g_queue_clear(&ob->turn);
    g_hash_table_destroy(ob->dests);
    applog_close(ob->log);
    g_cond_clear(&ob->cv);
    g_free(ob);
    h->outbox = NULL;
}

/* ------------------------------------------------------------------ */
/* in                                                                  */

/* Lock held: why a receipt must not move `sent`, or NULL; *unknown: it is
 * valid but its ref names nothing this lead sent to its sender; *again: it
 * was applied before and the broker redelivered it (ack it, do not apply
 * it). */
static const char *receipt_refusal_locked(mailbox *mb, const envelope *e, uint64_t epoch,
                                          bool redelivered, bool *unknown, bool *again, char *why,
                                          size_t n)
{
    const char *r;
    *unknown = false;
    if (!mb->o->insecure) {
        sig_result v = accept_verify_locked(mb, e);
        if (v != SIG_OK) {
            snprintf(why, n, "%s", sig_result_name(v));
            return "bad-receipt";
        }
    }
    r = accept_lifetime(mb, e, why, n);
    if (r)
        return !strcmp(r, "expired") ? "stale-receipt" : "bad-receipt";
    if (!sent_names_locked(mb, e->ref, env_receipt_recipient(e))) {
        *unknown = true;
        return NULL;
    }
    if (accept_receipt_seen_locked(mb, e->msgId, epoch, redelivered, again) && !*again) {
        snprintf(why, n, "receipt msgId %s was received before", e->msgId);
        return "replayed-receipt";
    }
    return NULL;
}

/* A receipt changed nothing: logged within a budget per sender
 * (RECEIPT_LOG_BURST, then one per RECEIPT_LOG_EVERY_MS), so a flood of
 * them does not flood the log. */
static void receipt_changed_nothing(mailbox *mb, const envelope *e, bool unknown)
{
    int r;
    g_mutex_lock(mb->lock);
    r = rate_take_locked(mb->h->receipt_logs, e->from, RECEIPT_LOG_BURST, RECEIPT_LOG_EVERY_MS);
    g_mutex_unlock(mb->lock);
    if (r == -1)
        log_info("receipts: more receipts from %s that change nothing: logged again in %d s",
                 e->from, RECEIPT_LOG_EVERY_MS / 1000);
    if (r < 0)
        return;
    log_info("receipts: %s says %s about %s: nothing to update (%s)", env_receipt_recipient(e),
             e->state, e->ref,
             unknown ? "not a message sent to it from here, or no longer in sent"
                     : "already further along");
    if (r > 0)
        log_info("receipts: %d more from %s changed nothing and were not logged", r, e->from);
}

void mb_set_control_answers(mailbox *lead, mb_control_answer_fn fn, void *ud)
{
    g_mutex_lock(lead->lock);
    lead->h->control_fn = fn;
    lead->h->control_ud = ud;
    g_mutex_unlock(lead->lock);
}

int mb_sign_control(mailbox *lead, ctl_env *e)
{
    int rc = -1;
    g_mutex_lock(lead->lock);
    if (lead->h->key)
        rc = ctl_sign(lead->h->key, e);
    g_mutex_unlock(lead->lock);
    return rc;
}

/* A `spawned` answer (ctl decoded into c): checked, then handed to the
 * hook outside the lock. */
static br_action control_answer(mailbox *lead, uint64_t epoch, bool redelivered, ctl_env *c)
{
    char why[300] = "";
    const char *reason = NULL;
    mb_control_answer_fn fn;
    void *ud;
    bool again = false;
    g_mutex_lock(lead->lock);
    accept_trust_fresh_locked(lead, false);
    fn = lead->h->control_fn;
    ud = lead->h->control_ud;
    if (!fn) {
        snprintf(why, sizeof why, "this fleetfs takes no control answers");
        reason = "bad-receipt";
    } else if (!lead->h->trust) {
        snprintf(why, sizeof why,
                 "no trusted keys (-o insecure): a control answer is never "
                 "taken unsigned");
        reason = "bad-receipt";
    } else if (ctl_accept(c, lead->h->trust, lead->o->coord_id, env_now_ms(), why, sizeof why) < 0)
        reason = "bad-receipt";
    else if (accept_receipt_seen_locked(lead, c->msgId, epoch, redelivered, &again)) {
        if (again) {
            g_mutex_unlock(lead->lock);
            log_info("control: %s's answer %s came again, the broker's own copy (redelivered, "
                     "or its ack went out just before the channel ended); acked, applied once "
                     "already",
                     c->from, c->msgId);
            return BR_ACK;
        }
        snprintf(why, sizeof why, "answer msgId %s was received before", c->msgId);
        reason = "replayed-receipt";
    }
    if (reason)
        mb_count_rejection_locked(lead, reason);
    g_mutex_unlock(lead->lock);
    if (reason) {
        log_warn("control: rejected a %s answer from %s about %s (%s: %s); it goes to fleet.dlq",
                 c->state, c->from, c->requestId, reason, why);
        mb_changed(lead, "status");
        return BR_REJECT;
    }
    if (fn(ud, c, why, sizeof why) < 0)
        log_info("control: %s answered %s about %s: nothing to update (%s)", c->from, c->state,
                 c->requestId, why);
    return BR_ACK;
}

br_action mb_receipt(mailbox *lead, uint64_t epoch, bool redelivered, const char *body, size_t len)
{
    envelope e;
    char why[300] = "";
    const char *reason = NULL;
    bool unknown = false, again = false;
    mailbox *mb = NULL; /* the local entity the receipt is for */
    int drc = env_decode(body, len, lead->o->max_message, &e, why, sizeof why);
    if (drc < 0) { /* not an envelope: a control answer? */
        ctl_env c;
        char cwhy[200];
        if (ctl_decode(body, len, lead->o->max_message, &c, cwhy, sizeof cwhy) == 0) {
            if (!strcmp(c.type, CTL_TYPE_SPAWNED)) {
                br_action a = control_answer(lead, epoch, redelivered, &c);
                ctl_free(&c);
                return a;
            }
            ctl_free(&c);
        }
    }
    if (drc < 0 || strcmp(e.type, ENV_TYPE_RECEIPT) != 0 || !(mb = mb_find(lead, e.to))) {
        if (!why[0] || e.body)
            snprintf(why, sizeof why, "not a receipt addressed to %s or one of its agents",
                     lead->o->coord_id);
        reason = "bad-receipt";
    }
    g_mutex_lock(lead->lock);
    if (!reason)
        reason =
            receipt_refusal_locked(mb, &e, epoch, redelivered, &unknown, &again, why, sizeof why);
    if (reason)
        mb_count_rejection_locked(mb ? mb : lead, reason);
    g_mutex_unlock(lead->lock);
    if (reason) {
        if (e.body)
            log_warn("receipts: rejected one from %s about %s (%s: %s); it goes to fleet.dlq",
                     e.from, e.ref, reason, why);
        else
            log_warn("receipts: rejected one (%s: %s); it goes to fleet.dlq", reason, why);
        env_free(&e);
        mb_unref(mb);
        mb_changed(lead, "status");
        return BR_REJECT;
    }
    if (again) {
        log_info("receipts: %s's receipt %s about %s came again, the broker's own copy (its ack "
                 "was lost with the connection%s); acked, applied once already",
                 e.from, e.msgId, e.ref,
                 redelivered ? ""
                             : ": without the redelivered flag, as LavinMQ sends it after its "
                               "own restart");
    } else if (unknown ||
               !mb_sent_update(mb, e.ref, env_receipt_recipient(&e), e.state, e.detail)) {
        receipt_changed_nothing(mb, &e, unknown);
    }
    env_free(&e);
    mb_unref(mb);
    return BR_ACK;
}

int mb_control_accept(mailbox *lead, const ctl_env *req, char *why, size_t n)
{
    int rc = -1;
    g_mutex_lock(lead->lock);
    accept_trust_fresh_locked(lead, false);
    if (!lead->h->trust)
        snprintf(why, n,
                 "no trusted keys (-o insecure): a control request is never taken "
                 "unsigned");
    else
        rc = ctl_accept(req, lead->h->trust, lead->o->coord_id, env_now_ms(), why, n);
    g_mutex_unlock(lead->lock);
    return rc;
}

int mb_control_send(mailbox *lead, ctl_env *answer)
{
    mb_outbox *ob;
    ob_item *it;
    size_t len;
    char *line;
    int64_t at = 0;
    g_mutex_lock(lead->lock);
    ob = lead->h->outbox;
    if (!ob || !lead->h->key || ctl_sign(lead->h->key, answer) < 0 ||
        over_bound_locked(ob, answer->to, answer->requestId, NULL)) {
        g_mutex_unlock(lead->lock);
        log_err("control: cannot sign or queue the %s answer to %s about %s; it expects an "
                "answer until its request expires",
                answer->state, answer->to, answer->requestId);
        return -1;
    }
    it = g_new0(ob_item, 1);
    g_strlcpy(it->id, answer->msgId, sizeof it->id);
    g_strlcpy(it->to, answer->to, sizeof it->to);
    it->expires_ms = env_time_parse(answer->expiresAt, &at) == 0 ? at : 0;
    it->json = ctl_encode(answer, &len);
    if (!it->json) {
        g_mutex_unlock(lead->lock);
        item_free(it);
        return -1;
    }
    line = item_line(it);
    if (!line || applog_append(ob->log, line) < 0)
        log_warn("control: cannot write %s (%s); the %s answer about %s is kept in memory only",
                 applog_path(ob->log), g_strerror(errno), answer->state, answer->requestId);
    free(line);
    push(ob, it);
    g_cond_signal(&ob->cv);
    g_mutex_unlock(lead->lock);
    return 0;
}

void mb_send_receipt(mailbox *mb, const envelope *orig, const char *state, const char *detail)
{
    g_mutex_lock(mb->lock);
    outbox_queue_locked(mb, orig, state, detail);
    g_mutex_unlock(mb->lock);
}
