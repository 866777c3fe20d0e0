/* fleetfs/inject.c — the injector thread (design in inject.h).
 *
 * At most once.  Before typing, "injecting <msgId>" is appended to
 * state_dir/inject.journal and fsync'd; after the backend took the text,
 * "injected <msgId>".  A message the journal knows comes back (a
 * redelivery after a restart or a lost ack) and is consumed without being
 * typed again: as injected when it was, as uncertain when fleetfs stopped
 * between the two lines.  "not-typed" records a refusal (nothing reached
 * the pane), so a later crash does not turn it into uncertain.
 *
 * The gate.  The agent must be idle or done — never blocked, where typing
 * can press a modal's default button — and it is asked twice: once to
 * decide, once right before typing.  herdr's agent.prompt refuses a
 * blocked agent itself as a third line of defence.
 *
 * Confirmation.  After typing, the agent must leave idle/done (its turn
 * started) within CONFIRM_MS for a "confirmed" receipt; otherwise the
 * sender keeps "injected" and the log says it was not confirmed.
 */
#include "fleetfs/inject.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/store/applog.h"
#include "fleetfs/log.h"
#include "herdr/sanitize.h"

#define RETRY_WAIT_MS 1000
#define BUSY_POLL_MS 500
#define CONFIRM_MS 5000
#define CONFIRM_POLL_MS 200
#define JOURNAL_KEEP 5000

struct injector {
    const fs_opts *o;
    char *mountpoint; /* for the reply command in the header */
    mailbox *mb;
    inj_backend *be;
    GThread *thread;
    GAsyncQueue *kicks;
    gint stopping;
    /* journal: broker-independent record of what was typed (an applog,
     * APPLOG_FSYNC: at most once must survive a power loss too) */
    char *journal_path;
    applog *journal_log;   /* NULL when it cannot be opened */
    char journal_err[160]; /* why it cannot be written, for the words */
    GHashTable *journal;   /* msgId -> last word (static string) */
    GQueue journal_order;  /* msgIds, oldest first (owned by the hash table) */
    char *words;           /* last state shown, to log changes once */
};

/* ------------------------------------------------------------------ */
/* journal                                                             */

static const char *journal_word(const char *w)
{
    static const char *words[] = {"injecting", "injected", "not-typed", "uncertain"};
    for (size_t i = 0; i < G_N_ELEMENTS(words); i++)
        if (strcmp(words[i], w) == 0)
            return words[i];
    return NULL;
}

static void journal_set(injector *in, const char *id, const char *word)
{
    gpointer key;
    if (g_hash_table_contains(in->journal, id)) {
        /* insert keeps the stored key (journal_order points at it) and
         * frees the copy passed here */
        g_hash_table_insert(in->journal, g_strdup(id), (gpointer)word);
        return;
    }
    key = g_strdup(id);
    g_hash_table_insert(in->journal, key, (gpointer)word);
    g_queue_push_tail(&in->journal_order, key);
    while (in->journal_order.length > JOURNAL_KEEP)
        g_hash_table_remove(in->journal, g_queue_pop_head(&in->journal_order));
}

static void journal_open(injector *in)
{
    GPtrArray *lines = NULL;
    char *err = NULL;
    in->journal_log = applog_open(in->journal_path, APPLOG_FSYNC, 128, &lines, &err);
    if (!in->journal_log) {
        g_strlcpy(in->journal_err, err, sizeof in->journal_err);
        g_free(err);
        return;
    }
    for (guint i = 0; i < lines->len; i++) {
        gchar **f = g_strsplit(lines->pdata[i], " ", 2);
        const char *w = f[0] ? journal_word(f[0]) : NULL;
        if (w && f[1] && env_id_valid(f[1]))
            journal_set(in, f[1], w);
        g_strfreev(f);
    }
    g_ptr_array_free(lines, TRUE);
}

/* Rewrite the journal with the last word of each remembered msgId. */
static void journal_compact(injector *in)
{
    GString *s = g_string_new(NULL);
    for (GList *l = in->journal_order.head; l; l = l->next)
        g_string_append_printf(s, "%s %s\n", (char *)g_hash_table_lookup(in->journal, l->data),
                               (char *)l->data);
    if (applog_rewrite(in->journal_log, s, in->journal_order.length) < 0)
        log_warn("inject: cannot rewrite %s (%s); it keeps growing until it can", in->journal_path,
                 g_strerror(errno));
    g_string_free(s, TRUE);
}

/* Durable before it returns: the at-most-once promise rests on it. */
static bool journal_write(injector *in, const char *word, const char *id)
{
    char line[64];
    snprintf(line, sizeof line, "%s %s", word, id);
    if (!in->journal_log || applog_append(in->journal_log, line) < 0) {
        if (in->journal_log)
            g_strlcpy(in->journal_err, strerror(errno), sizeof in->journal_err);
        return false;
    }
    journal_set(in, id, journal_word(word));
    if (applog_lines(in->journal_log) > 4 * JOURNAL_KEEP)
        journal_compact(in);
    return true;
}

/* ------------------------------------------------------------------ */

static void say(injector *in, const char *words)
{
    if (in->words && strcmp(in->words, words) == 0)
        return;
    g_free(in->words);
    in->words = g_strdup(words);
    if (g_str_has_prefix(words, "stalled"))
        log_warn("inject: %s", words);
    else
        log_info("inject: %s", words);
    mb_set_injector(in->mb, words);
}

/* Sleep up to ms, waking early on a kick or stop. */
static void nap(injector *in, int ms)
{
    gpointer k = g_async_queue_timeout_pop(in->kicks, (guint64)ms * 1000);
    while (k)
        k = g_async_queue_try_pop(in->kicks);
}

/* path as a shell word: as it is when it needs no quoting */
static char *shell_word(const char *path)
{
    for (const char *p = path; *p; p++)
        if (!g_ascii_isalnum(*p) && !strchr("/._-+", *p))
            return g_shell_quote(path);
    return g_strdup(path);
}

char *inj_render(const envelope *e, const char *mountpoint)
{
    size_t n;
    char *body = san_text(e->body ? e->body : "", e->body_len, &n);
    char *path = g_strdup_printf("%s/peers/%s/reply/%s", mountpoint, e->from, e->msgId);
    char *word = shell_word(path);
    char *re = e->replyTo[0] ? g_strdup_printf(", in reply to %s", e->replyTo) : g_strdup("");
    char *head = g_strdup_printf("[fleet message from %s, msgId %s%s - reply: echo '...' > %s]",
                                 e->from, e->msgId, re, word);
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
static void finish(injector *in, const envelope *e, const char *how, const char *detail)
{
    fe_code r = mb_consume(in->mb, e->msgId, how, detail);
    if (r != FE_OK)
        log_err("inject: %s %s, but it was no longer ours to consume (%s)", how, e->msgId,
                fe_hint(r));
    else
        log_info("inject: %s from %s: %s (%s)", e->msgId, e->from, how, detail);
}

/* Ready means idle or done; anything else says why not. */
static ib_verdict gate(injector *in, const ib_target *t, char *why, size_t n)
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

/* After typing: did the agent's turn start? */
static bool confirm(injector *in, const ib_target *t)
{
    gint64 end = g_get_monotonic_time() + (gint64)CONFIRM_MS * 1000;
    char why[256];
    if (!in->be->has_status)
        return false;
    while (g_get_monotonic_time() < end && !g_atomic_int_get(&in->stopping)) {
        hd_status st = HD_UNKNOWN;
        if (in->be->status(in->be, t, &st, why, sizeof why) == IB_OK && st != HD_IDLE &&
            st != HD_DONE && st != HD_UNKNOWN)
            return true;
        g_usleep(CONFIRM_POLL_MS * 1000);
    }
    return false;
}

/* Returns after one attempt; the caller loops. */
static void deliver(injector *in, const envelope *e)
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
    text = inj_render(e, in->mountpoint);
    /* right before typing, once more: a blocked agent must never get keys */
    v = gate(in, &t, why, sizeof why);
    if (v != IB_OK || !journal_write(in, "injecting", e->msgId)) {
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
    typed = in->be->type(in->be, &t, text, why, sizeof why);
    g_free(text);
    if (typed == IT_REFUSED) {
        /* nothing reached the pane: the journal must say so before the
         * message is offered again, or a crash would make it uncertain */
        while (!journal_write(in, "not-typed", e->msgId) && !g_atomic_int_get(&in->stopping)) {
            snprintf(words, sizeof words,
                     "stalled: cannot record in %s that %s was not typed (%s); retrying",
                     in->journal_path, e->msgId, in->journal_err);
            say(in, words);
            nap(in, RETRY_WAIT_MS);
        }
        mb_claim(in->mb, e->msgId, false);
        snprintf(words, sizeof words, "waiting: %s", why);
        say(in, words);
        nap(in, RETRY_WAIT_MS);
        return;
    }
    if (typed == IT_UNKNOWN) {
        journal_write(in, "uncertain", e->msgId);
        finish(in, e, "uncertain", why);
        return;
    }
    journal_write(in, "injected", e->msgId);
    /* fault injection for the crash tests (tests/integration/t0700): die
     * like kill -9 between typing and acking */
    if (g_getenv("FLEETFS_TEST_DIE_AFTER_TYPING"))
        raise(SIGKILL);
    snprintf(words, sizeof words, "typed into %s", t.name);
    finish(in, e, "injected", words);
    if (confirm(in, &t))
        mb_send_receipt(in->mb, e, "confirmed", "the agent left idle: its turn started");
    else if (in->be->has_status)
        log_warn("inject: %s typed into %s, but the agent did not leave idle within %d ms; "
                 "the sender sees injected, not confirmed",
                 e->msgId, t.name, CONFIRM_MS);
}

static gpointer inj_main(gpointer p)
{
    injector *in = p;
    while (!g_atomic_int_get(&in->stopping)) {
        envelope e;
        if (!mb_next_for_injection(in->mb, &e)) {
            char words[256];
            snprintf(words, sizeof words, "ready: nothing to deliver (backend %s)", in->be->name);
            say(in, words);
            nap(in, RETRY_WAIT_MS);
            continue;
        }
        deliver(in, &e);
        env_free(&e);
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

injector *inj_start(const fs_opts *o, mailbox *mb, const char *mountpoint)
{
    injector *in;
    inj_backend *be = NULL;
    const char *mode = o->inject;

    /* the backends' plain values (herdr/backend.h): they never see fs_opts */
    char **commands = g_strsplit(o->inject_commands ? o->inject_commands : "", ":", -1);
    ib_config cfg = {.coord_id = o->coord_id,
                     .inject_target = o->inject_target,
                     .state_dir = o->state_dir,
                     .inject_commands = (const char *const *)commands};
    if (!strcmp(mode, "auto"))
        mode = herdr_socket_present() ? "herdr" : "none";
    if (!strcmp(mode, "herdr"))
        be = inj_backend_herdr(&cfg);
    else if (!strcmp(mode, "tmux"))
        be = inj_backend_tmux(&cfg);
    g_strfreev(commands);
    if (!be) {
        mb_set_injector(mb, !strcmp(o->inject, "auto")
                                ? "off (inject=auto found no herdr socket: messages wait in "
                                  "inbox for a script to read and ack)"
                                : "off (inject=none: messages wait in inbox for a script to "
                                  "read and ack)");
        return NULL;
    }
    in = g_new0(injector, 1);
    in->o = o;
    in->mb = mb;
    in->mountpoint = g_strdup(mountpoint);
    in->be = be;
    in->kicks = g_async_queue_new();
    in->journal = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in->journal_path = g_build_filename(o->state_dir, "inject.journal", NULL);
    journal_open(in);
    say(in, "starting");
    in->thread = g_thread_new("injector", inj_main, in);
    return in;
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
    in->be->free(in->be);
    applog_close(in->journal_log);
    g_queue_clear(&in->journal_order);
    g_hash_table_destroy(in->journal);
    g_async_queue_unref(in->kicks);
    g_free(in->journal_path);
    g_free(in->mountpoint);
    g_free(in->words);
    g_free(in);
}
