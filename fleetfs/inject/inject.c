/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/inject/inject.c — the injector thread (design in inject.h).
 *
 * At most once.  Before typing, "injecting <msgId>" is appended to
 * state_dir/inject.journal and fsync'd; after the backend took the text,
 * "injected <msgId>".  A message the journal knows comes back (a
 * redelivery after a restart or a lost ack) and is consumed without being
 * typed again: as injected when it was, as uncertain when fleetfs stopped
 * between the two lines.  "not-typed" records a refusal (nothing reached
 * the pane), so a later crash does not turn it into uncertain.  The
 * "injecting" line also names the message's sender and expiresAt: a
 * message that never comes back (fleetfs was away past its expiresAt, and
 * the broker dropped the requeued copy) is consumed by the journal's word
 * all the same once its expiresAt has passed (mb_settle_journaled;
 * issue 43), so its sender ends at uncertain or injected, not at the
 * broker's dead-lettered.
 *
 * The gate.  The agent must be idle or done — never blocked, where typing
 * can press a modal's default button — and it is asked twice: once to
 * decide, once right before typing.  herdr's agent.prompt refuses a
 * blocked agent itself as a third line of defence.
 *
 * Confirmation.  After typing, the agent must leave idle/done (its turn
 * started) within CONFIRM_MS for a "confirmed" receipt; otherwise the
 * sender keeps "injected" and the log says it was not confirmed.
 *
 * Entities (SPEC 10).  One injector serves every local entity: the lead
 * and each local agent has a slot with its own backend (its pane is found
 * by its own name, or its own target), its own journal (in its own
 * state_dir) and its own words in its status.  The thread takes the slots
 * in turn and never waits on one of them: a slot that must wait (pane
 * missing, agent busy, a confirmation pending) gets a time before which it
 * is not tried again, and the others go on meanwhile.  So a missing pane
 * stalls that entity only.
 *
 * Here: the slots and the thread that takes them in turn, the gate,
 * typing, the looks after it, and inj_type_once.  The journal's file is
 * journal.c; the slot's fields, which both read, slot.h.
 */
#include "fleetfs/inject/inject.h"
#include "fleetfs/inject/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/store/applog.h"
#include "fleetfs/base/log.h"
#include "fleetfs/inject/witness.h"
#include "herdr/sanitize.h"

#define RETRY_WAIT_MS 1000
#define BUSY_POLL_MS 500
#define CONFIRM_MS 5000
#define CONFIRM_POLL_MS 200
#define SUBMIT_CHECK_MS 1000 /* tmux: from the carriage return to the look at the input line */

/* Text to type once into one entity's pane (inj_type_once): shared by the
 * caller, who waits on it, and the slot, which types it. */
struct inj_once {
    gatomicrefcount ref;
    char id[ENV_ID_LEN + 1];
    char *text;
    GMutex m;
    GCond cv;
    int result; /* 0 pending, 1 typed, -1 not (why) */
    char why[400];
};

static inj_once *once_ref(inj_once *o)
{
    g_atomic_ref_count_inc(&o->ref);
    return o;
}

static void once_unref(inj_once *o)
{
    if (!o || !g_atomic_ref_count_dec(&o->ref))
        return;
    g_free(o->text);
    g_mutex_clear(&o->m);
    g_cond_clear(&o->cv);
    g_free(o);
}

struct injector {
    const fs_opts *o;
    char *mountpoint; /* for the reply command in the header */
    char *mode;       /* herdr | tmux */
    GMutex lock;      /* slots */
    GPtrArray *slots; /* inj_slot* */
    GThread *thread;
    GAsyncQueue *kicks;
    gint stopping;
};

/* ------------------------------------------------------------------ */

static void say(inj_slot *in, const char *words)
{
    if (in->words && strcmp(in->words, words) == 0)
        return;
    g_free(in->words);
    in->words = g_strdup(words);
    /* the lead's lines read as before; an agent's name it */
    if (g_str_has_prefix(words, "stalled"))
        log_warn("inject%s%s: %s", mb_is_lead(in->mb) ? "" : " ",
                 mb_is_lead(in->mb) ? "" : mb_id(in->mb), words);
    else
        log_info("inject%s%s: %s", mb_is_lead(in->mb) ? "" : " ",
                 mb_is_lead(in->mb) ? "" : mb_id(in->mb), words);
    mb_set_injector(in->mb, words);
}

static int64_t now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

/* This slot is not tried again for ms (others go on). */
static void nap(inj_slot *in, int ms)
{
    in->next_ms = now_ms() + ms;
}

/* Sleep up to ms, waking early on a kick or stop; true when kicked. */
static bool sleep_kickable(injector *in, int64_t ms)
{
    gpointer k = g_async_queue_timeout_pop(in->kicks, (guint64)MAX(ms, 1) * 1000);
    bool kicked = k != NULL;
    while (k)
        k = g_async_queue_try_pop(in->kicks);
    return kicked;
}

/* Where the reply command of the typed header points: a lead's message to
 * the lead is answered through peers/<from>/reply/ (as always); anything
 * else through the entity's own home, which can reply to any sender. */
static const char *reply_dir(inj_slot *in, const envelope *e)
{
    static __thread char dir[200];
    if (mb_is_lead(in->mb) && !strchr(e->from, '@'))
        return NULL;
    snprintf(dir, sizeof dir, "%s/%s", mb_is_lead(in->mb) ? "leads" : "agents", mb_id(in->mb));
    return dir;
}

/* path as a shell word: as it is when it needs no quoting (an agent's
 * gid has an @, which no shell treats specially on its own) */
static char *shell_word(const char *path)
{
    for (const char *p = path; *p; p++)
        if (!g_ascii_isalnum(*p) && !strchr("/._-+@", *p))
            return g_shell_quote(path);
    return g_strdup(path);
}

char *inj_render(const envelope *e, const char *mountpoint, const char *reply_dir)
{
    size_t n;
    char *body = san_text(e->body ? e->body : "", e->body_len, &n);
    char *path = reply_dir ? g_strdup_printf("%s/%s/reply/%s", mountpoint, reply_dir, e->msgId)
                           : g_strdup_printf("%s/peers/%s/reply/%s", mountpoint, e->from, e->msgId);
    char *word = shell_word(path);
    char *re = e->replyTo[0] ? g_strdup_printf(", in reply to %s", e->replyTo) : g_strdup("");
    int64_t sent, exp;
    /* a short-lived message (a question from an ask file lives 2 minutes)
     * says until when an answer is awaited: its expiresAt, as signed */
    bool soon = env_time_parse(e->sentAt, &sent) == 0 && env_time_parse(e->expiresAt, &exp) == 0 &&
                exp - sent <= INJ_SHORT_LIFE_MS;
    char *head =
        g_strdup_printf("[fleet message from %s, msgId %s%s - reply%s%s: echo '...' > %s]", e->from,
                        e->msgId, re, soon ? " by " : "", soon ? e->expiresAt : "", word);
    /* one line, and nothing in it a terminal would act on */
    char *safe = san_text(head, strlen(head), &n);
    for (char *c = safe; c && *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    char *text = g_strdup_printf("%s\n%s", safe ? safe : "", body ? body : "");
    free(safe);
    free(body);
    g_free(head);
    g_free(re);
    g_free(word);
    g_free(path);
    return text;
}

/* The claim is held: consume (history, receipt, broker ack). */
static void finish(inj_slot *in, const envelope *e, const char *how, const char *detail)
{
    fe_code r = mb_consume(in->mb, e->msgId, how, detail);
    g_hash_table_remove(in->meta, e->msgId); /* settled the ordinary way */
    if (r != FE_OK)
        log_err("inject: %s %s, but it was no longer ours to consume (%s)", how, e->msgId,
                fe_hint(r));
    else
        log_info("inject: %s from %s: %s (%s)", e->msgId, e->from, how, detail);
}

/* Ready means idle or done; anything else says why not. */
static ib_verdict gate(inj_slot *in, const ib_target *t, char *why, size_t n)
{
    hd_status st = HD_UNKNOWN;
    ib_verdict v = in->be->status(in->be, t, &st, why, n);
    if (v != IB_OK)
        return v;
    if (!in->be->has_status || st == HD_IDLE || st == HD_DONE)
        return IB_OK;
    if (st == HD_BLOCKED)
        snprintf(why, n,
                 "waiting: %s is blocked (an approval or question is up); nothing is "
                 "typed until it is idle",
                 t->name);
    else
        snprintf(why, n, "waiting: %s is %s", t->name, hd_status_name(st));
    return IB_WAIT;
}

/* After typing: did the agent's turn start?  One look; the slot is looked
 * at again every CONFIRM_POLL_MS until confirm_until.  The prompt hook's
 * word, where one reports (witness.h), goes out instead: it says what was
 * submitted; herdr's status only that a turn started. */
static void confirm_step(inj_slot *in)
{
    char why[256];
    hd_status st = HD_UNKNOWN;
    const envelope *e = &in->confirm_env;
    bool hook = wit_hook_seen(in->wit);
    if (in->be->status(in->be, &in->confirm_t, &st, why, sizeof why) == IB_OK)
        in->confirm_left |= st != HD_IDLE && st != HD_DONE && st != HD_UNKNOWN;
    if (wit_reported(in->wit, e->msgId)) {
        /* slot_step sends it */
    } else if (in->confirm_left && !hook) {
        mb_send_receipt(in->mb, e, "confirmed", "the agent left idle: its turn started");
        wit_settled(in->wit, e->msgId);
    } else if (now_ms() < in->confirm_until) {
        nap(in, CONFIRM_POLL_MS);
        return;
    } else if (in->confirm_left) {
        mb_send_receipt(in->mb, e, "confirmed",
                        "the agent left idle: its turn started (its prompt hook did not report)");
        wit_settled(in->wit, e->msgId);
    } else {
        log_warn("inject: %s typed into %s, but the agent did not leave idle within %d ms; "
                 "the sender sees injected, not confirmed",
                 e->msgId, in->confirm_t.name, CONFIRM_MS);
    }
    env_free(&in->confirm_env);
    in->confirm_until = 0;
    in->confirm_left = false;
}

/* tmux: the text was typed and a carriage return sent; was it submitted?
 * The hook's report says so; else, SUBMIT_CHECK_MS after the carriage
 * return, the text still at the cursor says it was not: one more carriage
 * return (never the text again), and one more look.  Then the sender is
 * told `injected` with what is known. */
static void verify_step(inj_slot *in)
{
    const envelope *e = &in->verify_env;
    const char *name = in->verify_t.name;
    char detail[512], why[256];
    hd_status st = HD_UNKNOWN;
    bool left = in->verify_left;
    int w = 0;

    /* herdr: a turn that started says it was submitted; no need to look
     * (asked at every poll: a short turn must not end unseen) */
    if (!left && in->be->has_status &&
        in->be->status(in->be, &in->verify_t, &st, why, sizeof why) == IB_OK)
        left = in->verify_left = st != HD_IDLE && st != HD_DONE && st != HD_UNKNOWN;
    if (!wit_reported(in->wit, e->msgId) && !left && now_ms() < in->verify_until) {
        nap(in, CONFIRM_POLL_MS / 2);
        return;
    }
    if (!wit_reported(in->wit, e->msgId) && !left)
        w = in->be->waits(in->be, &in->verify_t, in->verify_text);
    if (w == 1 && in->verify_cr == 0) {
        if (in->be->submit(in->be, &in->verify_t, why, sizeof why)) {
            log_warn("inject: %s typed into %s still waited in its input line %d ms after the "
                     "carriage return; sent one more",
                     e->msgId, name, SUBMIT_CHECK_MS);
            in->verify_cr = 1;
            in->verify_until = now_ms() + SUBMIT_CHECK_MS;
            nap(in, CONFIRM_POLL_MS / 2);
            return;
        }
        snprintf(detail, sizeof detail,
                 "typed into %s, but it still waited in the input line and a second carriage "
                 "return was not sent (%s): not submitted",
                 name, why);
    } else if (w == 1) {
        snprintf(detail, sizeof detail,
                 "typed into %s, but it still waits in the input line after a second carriage "
                 "return: not submitted (press Enter in the pane)",
                 name);
    } else if (w == 0 && in->verify_cr) {
        snprintf(detail, sizeof detail,
                 "typed into %s; submitted with a second carriage return (the first was not "
                 "taken)",
                 name);
    } else if (w < 0) {
        snprintf(detail, sizeof detail,
                 "typed into %s (whether it was submitted could not be read off the pane)", name);
    } else {
        snprintf(detail, sizeof detail, "typed into %s", name);
    }
    if (w == 1)
        log_warn("inject: %s: %s", e->msgId, detail);
    finish(in, e, "injected", detail);
    wit_finished(in->wit, e->msgId);
    if (in->be->has_status) {
        /* did its turn start: confirm_step looks on from here */
        in->confirm_env = in->verify_env;
        in->verify_env.body = NULL;
        in->confirm_t = in->verify_t;
        in->confirm_until = now_ms() + CONFIRM_MS;
        in->confirm_left = left;
    }
    env_free(&in->verify_env);
    g_free(in->verify_text);
    in->verify_text = NULL;
    in->verify_until = 0;
    in->verify_cr = 0;
    in->verify_left = false;
}

/* Returns after one attempt; the caller loops. */
static void deliver(injector *inj, inj_slot *in, const envelope *e)
{
    const char *last = g_hash_table_lookup(in->journal, e->msgId);
    char why[512] = "", words[700];
    ib_target t;
    ib_verdict v;
    ib_typed typed;
    char *text;

    if (last && strcmp(last, "not-typed") != 0) {
        /* the journal knows it: consume it without typing, holding the
         * claim like any consumer (the ack file may want it too) */
        if (!mb_claim(in->mb, e->msgId, true))
            return;
        if (!strcmp(last, "injected"))
            finish(in, e, "injected", "typed before fleetfs restarted; not typed again");
        else
            finish(in, e, "uncertain",
                   "fleetfs stopped while typing it; it is not typed again (at most once)");
        return;
    }
    memset(&t, 0, sizeof t);
    v = in->be->resolve(in->be, &t, why, sizeof why);
    if (v == IB_OK)
        v = gate(in, &t, why, sizeof why);
    if (v != IB_OK) {
        say(in, why);
        nap(in, v == IB_WAIT && in->be->has_status ? BUSY_POLL_MS : RETRY_WAIT_MS);
        return;
    }
    if (!mb_claim(in->mb, e->msgId, true))
        return; /* acked through the ack file meanwhile */
    text = inj_render(e, inj->mountpoint, reply_dir(in, e));
    /* right before typing, once more: a blocked agent must never get keys */
    v = gate(in, &t, why, sizeof why);
    /* and nothing is typed past its expiresAt (consumed as expired) */
    if (v == IB_OK && mb_expire_claimed(in->mb, e->msgId)) {
        g_free(text);
        return;
    }
    if (v != IB_OK || !inj_journal_write_typing(in, e)) {
        mb_claim(in->mb, e->msgId, false);
        g_free(text);
        if (v == IB_OK)
            snprintf(why, sizeof why,
                     "stalled: cannot record deliveries in %s (%s); nothing "
                     "is typed until it can be written (at most once depends on it)",
                     in->journal_path, in->journal_err);
        say(in, why);
        nap(in, v == IB_OK ? RETRY_WAIT_MS : BUSY_POLL_MS);
        return;
    }
    snprintf(words, sizeof words, "delivering: typing %s from %s into %s", e->msgId, e->from,
             t.name);
    say(in, words);
    wit_typing(in->wit, e, text); /* the hook may report before type() returns */
    typed = in->be->type(in->be, &t, text, why, sizeof why);
    if (typed != IT_TYPED)
        wit_forget(in->wit, e->msgId);
    if (typed == IT_TYPED && in->be->waits) {
        /* looked at by verify_step, which tells the sender */
        in->verify_text = text;
        text = NULL;
    }
    g_free(text);
    if (typed == IT_REFUSED) {
        /* nothing reached the pane: the journal must say so before the
         * message is offered again, or a crash would make it uncertain */
        while (!inj_journal_write(in, "not-typed", e->msgId) && !g_atomic_int_get(&inj->stopping)) {
            snprintf(words, sizeof words,
                     "stalled: cannot record in %s that %s was not typed (%s); retrying",
                     in->journal_path, e->msgId, in->journal_err);
            say(in, words);
            sleep_kickable(inj, RETRY_WAIT_MS);
        }
        mb_claim(in->mb, e->msgId, false);
        g_hash_table_remove(in->meta, e->msgId);
        snprintf(words, sizeof words, "waiting: %s", why);
        say(in, words);
        nap(in, RETRY_WAIT_MS);
        return;
    }
    if (typed == IT_UNKNOWN) {
        inj_journal_write(in, "uncertain", e->msgId);
        finish(in, e, "uncertain", why);
        return;
    }
    inj_journal_write(in, "injected", e->msgId);
    /* fault injection for the crash tests (tests/integration/t0700): die
     * like kill -9 between typing and acking */
    if (g_getenv("FLEETFS_TEST_DIE_AFTER_TYPING"))
        raise(SIGKILL);
    if (in->verify_text) {
        in->verify_env = *e;
        in->verify_env.body = g_memdup2(e->body, e->body_len + 1);
        in->verify_t = t;
        in->verify_until = now_ms() + SUBMIT_CHECK_MS;
        in->verify_cr = 0;
        /* first look at once (herdr: a short turn must not end unseen) */
        return;
    }
    snprintf(words, sizeof words, "typed into %s", t.name);
    finish(in, e, "injected", words);
    wit_finished(in->wit, e->msgId);
    if (in->be->has_status) {
        /* looked at by the slot's next turns, while the others go on */
        in->confirm_env = *e;
        in->confirm_env.body = g_memdup2(e->body, e->body_len + 1);
        in->confirm_t = t;
        in->confirm_until = now_ms() + CONFIRM_MS;
        /* first look at once: a short turn must not end unseen */
    }
}

/* o is settled: the caller is told, the slot forgets it. */
static void once_done(injector *inj, inj_slot *in, inj_once *o, int result, const char *why)
{
    g_mutex_lock(&inj->lock);
    if (in->once == o) {
        in->once = NULL;
        once_unref(o);
    }
    g_mutex_unlock(&inj->lock);
    g_mutex_lock(&o->m);
    o->result = result;
    g_strlcpy(o->why, why, sizeof o->why);
    g_cond_broadcast(&o->cv);
    g_mutex_unlock(&o->m);
}

/* One attempt at typing o: the gate and the journal as for a message, so
 * that o->id is typed at most once, across restarts too. */
static void once_step(injector *inj, inj_slot *in, inj_once *o)
{
    const char *last = g_hash_table_lookup(in->journal, o->id);
    char why[512] = "", words[700];
    ib_target t;
    ib_verdict v;
    ib_typed typed;

    if (last && strcmp(last, "not-typed") != 0) {
        once_done(inj, in, o, !strcmp(last, "injected") ? 1 : -1,
                  !strcmp(last, "injected") ? "typed before" : "typing it was interrupted once");
        return;
    }
    memset(&t, 0, sizeof t);
    v = in->be->resolve(in->be, &t, why, sizeof why);
    if (v == IB_OK)
        v = gate(in, &t, why, sizeof why);
    if (v == IB_OK)
        v = gate(in, &t, why, sizeof why); /* right before typing, once more */
    if (v != IB_OK || !inj_journal_write(in, "injecting", o->id)) {
        say(in, v != IB_OK ? why : "stalled: cannot record deliveries in the journal");
        nap(in, v == IB_WAIT && in->be->has_status ? BUSY_POLL_MS : CONFIRM_POLL_MS);
        return;
    }
    snprintf(words, sizeof words, "delivering: typing %s into %s", o->id, t.name);
    say(in, words);
    typed = in->be->type(in->be, &t, o->text, why, sizeof why);
    if (typed == IT_REFUSED) {
        inj_journal_write(in, "not-typed", o->id);
        snprintf(words, sizeof words, "waiting: %s", why);
        say(in, words);
        nap(in, CONFIRM_POLL_MS);
        return;
    }
    inj_journal_write(in, typed == IT_TYPED ? "injected" : "uncertain", o->id);
    snprintf(words, sizeof words, "typed %s into %s", o->id, t.name);
    if (typed == IT_TYPED)
        say(in, words);
    once_done(inj, in, o, typed == IT_TYPED ? 1 : -1, typed == IT_TYPED ? words : why);
}

/* One turn of a slot: a pending confirmation, else text to type once,
 * else its oldest message. */
static void slot_step(injector *inj, inj_slot *in)
{
    envelope e;
    inj_once *o;
    char detail[256];
    /* the prompt hook's reports, each once its message's injected is out */
    while (wit_take(in->wit, &e, detail, sizeof detail)) {
        mb_send_receipt(in->mb, &e, "confirmed", detail);
        env_free(&e);
    }
    if (in->verify_until) {
        verify_step(in);
        return;
    }
    if (in->confirm_until) {
        confirm_step(in);
        return;
    }
    g_mutex_lock(&inj->lock);
    o = in->once ? once_ref(in->once) : NULL;
    g_mutex_unlock(&inj->lock);
    if (o) {
        once_step(inj, in, o);
        once_unref(o);
        return;
    }
    if (g_hash_table_size(in->meta))
        inj_journal_settle(in);
    if (!mb_next_for_injection(in->mb, &e)) {
        char words[256];
        snprintf(words, sizeof words, "ready: nothing to deliver (backend %s)", in->be->name);
        say(in, words);
        nap(in, RETRY_WAIT_MS);
        return;
    }
    deliver(inj, in, &e);
    env_free(&e);
}

static inj_slot *slot_ref(inj_slot *s)
{
    g_atomic_ref_count_inc(&s->ref);
    return s;
}

static void slot_unref(inj_slot *s)
{
    if (!s || !g_atomic_ref_count_dec(&s->ref))
        return;
    s->be->free(s->be);
    applog_close(s->journal_log);
    g_queue_clear(&s->journal_order);
    g_hash_table_destroy(s->journal);
    g_hash_table_destroy(s->meta);
    if (s->confirm_until)
        env_free(&s->confirm_env);
    if (s->verify_until)
        env_free(&s->verify_env);
    g_free(s->verify_text);
    wit_free(s->wit);
    once_unref(s->once);
    g_free(s->journal_path);
    g_free(s->words);
    mb_unref(s->mb);
    g_free(s);
}

static gpointer inj_main(gpointer p)
{
    injector *inj = p;
    while (!g_atomic_int_get(&inj->stopping)) {
        GPtrArray *slots;
        int64_t next = now_ms() + RETRY_WAIT_MS;
        g_mutex_lock(&inj->lock);
        slots = g_ptr_array_new_full(inj->slots->len, (GDestroyNotify)slot_unref);
        for (guint i = 0; i < inj->slots->len; i++)
            g_ptr_array_add(slots, slot_ref(inj->slots->pdata[i]));
        g_mutex_unlock(&inj->lock);
        for (guint i = 0; i < slots->len && !g_atomic_int_get(&inj->stopping); i++) {
            inj_slot *in = slots->pdata[i];
            if (in->next_ms <= now_ms()) {
                in->next_ms = 0;
                slot_step(inj, in);
                /* a slot that did not ask to wait has more to do now */
            }
            next = MIN(next, in->next_ms);
        }
        if (next > now_ms() && sleep_kickable(inj, next - now_ms()))
            /* an arrival: every slot looks again now (a pending
             * confirmation keeps its own pace) */
            for (guint i = 0; i < slots->len; i++)
                if (!((inj_slot *)slots->pdata[i])->confirm_until)
                    ((inj_slot *)slots->pdata[i])->next_ms = 0;
        g_ptr_array_free(slots, TRUE);
    }
    return NULL;
}

static bool herdr_socket_present(void)
{
    char *path = hd_socket_path();
    bool there = path && g_file_test(path, G_FILE_TEST_EXISTS);
    g_free(path);
    return there;
}

/* A slot for mb, its pane found by `name` or `target`; NULL when the mode
 * has no backend. */
static inj_slot *slot_new(injector *inj, mailbox *mb, const char *target)
{
    const fs_opts *o = inj->o;
    inj_slot *in;
    inj_backend *be = NULL;
    /* the backends' plain values (herdr/backend.h): they never see fs_opts */
    char **commands = g_strsplit(o->inject_commands ? o->inject_commands : "", ":", -1);
    ib_config cfg = {.coord_id = mb_name(mb),
                     .inject_target = target,
                     .state_dir = mb_state_dir(mb),
                     .inject_commands = (const char *const *)commands,
                     .settle_ms = (int)o->inject_settle_ms,
                     .quiet_ms = (int)o->inject_quiet_ms};
    if (!strcmp(inj->mode, "herdr"))
        be = inj_backend_herdr(&cfg);
    else if (!strcmp(inj->mode, "tmux"))
        be = inj_backend_tmux(&cfg);
    g_strfreev(commands);
    if (!be)
        return NULL;
    in = g_new0(inj_slot, 1);
    g_atomic_ref_count_init(&in->ref);
    in->mb = mb_ref(mb);
    in->be = be;
    in->journal = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in->meta = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    in->journal_path = g_build_filename(mb_state_dir(mb), "inject.journal", NULL);
    in->wit = wit_new(mb_is_lead(mb) ? "" : mb_id(mb));
    inj_journal_open(in);
    say(in, "starting");
    return in;
}

static const char *mode_words(const fs_opts *o)
{
    return !strcmp(o->inject, "auto")
               ? "off (inject=auto found no herdr socket: messages wait in inbox for a script "
                 "to read and ack)"
               : "off (inject=none: messages wait in inbox for a script to read and ack)";
}

injector *inj_start(const fs_opts *o, mailbox *mb, const char *mountpoint)
{
    injector *in;
    inj_slot *lead;
    const char *mode = o->inject;

    if (!strcmp(mode, "auto"))
        mode = herdr_socket_present() ? "herdr" : "none";
    if (strcmp(mode, "herdr") != 0 && strcmp(mode, "tmux") != 0) {
        mb_set_injector(mb, mode_words(o));
        return NULL;
    }
    in = g_new0(injector, 1);
    in->o = o;
    in->mode = g_strdup(mode);
    in->mountpoint = g_strdup(mountpoint);
    in->kicks = g_async_queue_new();
    g_mutex_init(&in->lock);
    in->slots = g_ptr_array_new_with_free_func((GDestroyNotify)slot_unref);
    lead = slot_new(in, mb, o->inject_target);
    g_ptr_array_add(in->slots, lead);
    in->thread = g_thread_new("injector", inj_main, in);
    return in;
}

void inj_add(injector *in, mailbox *mb, const char *target)
{
    inj_slot *s;
    if (!in) {
        mb_set_injector(mb, "off (no injection backend: messages wait in inbox for a script to "
                            "read and ack)");
        return;
    }
    s = slot_new(in, mb, target);
    if (!s)
        return;
    g_mutex_lock(&in->lock);
    g_ptr_array_add(in->slots, s);
    g_mutex_unlock(&in->lock);
    inj_kick(in);
}

void inj_remove(injector *in, mailbox *mb)
{
    if (!in)
        return;
    g_mutex_lock(&in->lock);
    for (guint i = 0; i < in->slots->len; i++)
        if (((inj_slot *)in->slots->pdata[i])->mb == mb) {
            g_ptr_array_remove_index(in->slots, i);
            break;
        }
    g_mutex_unlock(&in->lock);
}

int inj_submitted(injector *in, mailbox *mb, const char *buf, size_t size)
{
    inj_witness *w = NULL;
    int e;
    if (!in) {
        log_warn("inject: a prompt hook reported a submission, but this mount types nothing "
                 "(inject=none); ignored");
        return ENOENT;
    }
    g_mutex_lock(&in->lock);
    for (guint i = 0; i < in->slots->len && !w; i++)
        if (((inj_slot *)in->slots->pdata[i])->mb == mb)
            w = ((inj_slot *)in->slots->pdata[i])->wit;
    /* under the lock: a slot (and its witness) is freed only after it
     * left the list and the thread let go of it */
    e = w ? wit_report(w, buf, size) : ENOENT;
    g_mutex_unlock(&in->lock);
    if (!e)
        inj_kick(in);
    return e;
}

void inj_kick(injector *in)
{
    if (in)
        g_async_queue_push(in->kicks, GINT_TO_POINTER(1));
}

void inj_stop(injector *in)
{
    if (!in || !in->thread)
        return;
    g_atomic_int_set(&in->stopping, 1);
    inj_kick(in);
    g_thread_join(in->thread);
    in->thread = NULL;
}

void inj_free(injector *in)
{
    if (!in)
        return;
    inj_stop(in);
    g_ptr_array_free(in->slots, TRUE);
    g_mutex_clear(&in->lock);
    g_async_queue_unref(in->kicks);
    g_free(in->mountpoint);
    g_free(in->mode);
    g_free(in);
}

int inj_type_once(injector *in, mailbox *mb, const char *id, const char *text, int timeout_ms,
                  char *why, size_t n)
{
    inj_slot *slot = NULL;
    inj_once *o;
    int64_t until = g_get_monotonic_time() + (int64_t)timeout_ms * 1000;
    int result;

    if (!in) {
        snprintf(why, n, "no injection backend (inject=none): nothing can be typed");
        return -1;
    }
    o = g_new0(inj_once, 1);
    g_atomic_ref_count_init(&o->ref);
    g_strlcpy(o->id, id, sizeof o->id);
    o->text = g_strdup(text);
    g_mutex_init(&o->m);
    g_cond_init(&o->cv);
    g_mutex_lock(&in->lock);
    for (guint i = 0; i < in->slots->len && !slot; i++)
        if (((inj_slot *)in->slots->pdata[i])->mb == mb)
            slot = in->slots->pdata[i];
    if (slot && !slot->once)
        slot->once = once_ref(o);
    else
        slot = NULL;
    g_mutex_unlock(&in->lock);
    if (!slot) {
        snprintf(why, n, "%s has no injector slot free for it", mb_id(mb));
        once_unref(o);
        return -1;
    }
    inj_kick(in);
    g_mutex_lock(&o->m);
    while (!o->result && g_cond_wait_until(&o->cv, &o->m, until))
        ;
    result = o->result;
    snprintf(why, n, "%s", result ? o->why : "not typed in time (the pane never took it)");
    g_mutex_unlock(&o->m);
    if (!result) { /* given up: the slot forgets it (a turn under way ends on its own ref) */
        g_mutex_lock(&in->lock);
        for (guint i = 0; i < in->slots->len; i++) {
            inj_slot *s = in->slots->pdata[i];
            if (s->once == o) {
                s->once = NULL;
                once_unref(o);
            }
        }
        g_mutex_unlock(&in->lock);
    }
    once_unref(o);
    return result == 1 ? 0 : -1;
}

char *inj_render_brief(const char *from, const char *request_id, const char *gid,
                       const char *mountpoint, const char *brief, size_t len)
{
    size_t n;
    char *body = san_text(brief ? brief : "", brief ? len : 0, &n);
    char *path = g_strdup_printf("%s/agents/%s/to/%s", mountpoint, gid, from);
    char *word = shell_word(path);
    char *head = g_strdup_printf("[fleet brief from %s, request %s - you are %s; write to %s: "
                                 "echo '...' > %s]",
                                 from, request_id, gid, from, word);
    char *safe = san_text(head, strlen(head), &n);
    char *text;
    for (char *c = safe; c && *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    text = g_strdup_printf("%s\n%s", safe ? safe : "", body ? body : "");
    free(safe);
    free(body);
    g_free(head);
    g_free(word);
    g_free(path);
    return text;
}
