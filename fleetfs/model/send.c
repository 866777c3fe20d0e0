/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/send.c — one write, one message (SPEC 6, revised): the
 * checks a write gets before anything is published, the envelope signed
 * and encoded on the writer's thread, its publish handed to the broker
 * seam, and its outcome recorded in sent (sent.c, the log's state
 * machine) and told by whichever thread learns it: the publishing thread
 * when the seam publishes without waiting.  The JSON form (send.json,
 * ask.json, to/<target>.json) and resend come in here too.
 */
#include "fleetfs/model/mb_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/base/duration.h"
#include "fleetfs/base/log.h"
#include "fleetfs/wire/names.h"

static bool is_configured_peer(const mailbox *mb, const char *peer)
{
    for (char **p = mb->o->peers; p && *p; p++)
        if (strcmp(*p, peer) == 0)
            return true;
    return false;
}

/* The checks a write gets before anything is published. */
static fe_code send_input_ok(const mailbox *mb, const char *peer, const char *data, size_t len)
{
    if (len == 0)
        return FE_EMPTY;
    if (len > mb->o->max_message)
        return FE_TOO_BIG;
    if (!text_utf8_valid(data, len))
        return FE_BAD_UTF8;
    if (!addr_parse(peer, &(addr){0}))
        return FE_NO_PEER;
    return FE_OK;
}

/* The "published-unread" and "published; not known whether read" lines:
 * every send to a mailbox nobody reads would otherwise log one (and cost a
 * write(2) each).  One line per peer and kind (unread, unread and the peer
 * not live, unknown) per SEND_LOG_EVERY_MS; the first send of a streak that
 * is not logged says so once, the next line logged says how many were
 * not.  A new kind (the peer went stale) is logged at once.  `sent` records
 * every message, whatever the log says. */
static bool send_log_allowed(mailbox *mb, const char *to, const char *kind)
{
    char key[ADDR_MAX_LEN + 32];
    int r;
    snprintf(key, sizeof key, "%s\n%s", to, kind);
    g_mutex_lock(mb->lock);
    r = rate_take_locked(mb->h->send_logs, key, 1, SEND_LOG_EVERY_MS);
    g_mutex_unlock(mb->lock);
    if (r == -1)
        log_info("send: more sends to %s are %s: one line a minute for them (`sent` records "
                 "each)",
                 to,
                 !strcmp(kind, "unknown") ? "published without knowing whether read"
                                          : "published-unread");
    else if (r > 0)
        log_info("send: %d sends to %s were %s and not logged", r, to,
                 !strcmp(kind, "unknown") ? "published without knowing whether read"
                                          : "published-unread");
    return r >= 0;
}

/* Confirmed into the mailbox: published-unread when nobody reads it (the
 * probe at publish saw no consumer), else published.  A mailbox with a
 * reader but no heartbeat from its peer (another implementation of
 * doc/protocol.md, or presence off there) is published, with the missing
 * heartbeat in detail: it is read, only we cannot see by whom. */
static void send_published(mailbox *mb, const envelope *e, const char *json, bool no_consumer,
                           const char *unknown, char *const *members)
{
    char why[160] = "", detail[256];
    /* a lead's presence, or an agent's: its host's, and whether that
     * host's heartbeat lists it; a group has none of its own */
    bool away = !members && mb->hooks.peer_live &&
                mb->hooks.peer_live(mb->hooks.ud, e->to, why, sizeof why) == 0;
    if (!no_consumer && unknown && *unknown) {
        /* published without knowing whether it is read: say so, never
         * let "published" claim a reader nobody saw */
        sent_record(mb, e, json, "published", unknown, members);
        if (send_log_allowed(mb, e->to, "unknown"))
            log_info("send %s to %s: published; %s", e->msgId, e->to, unknown);
        return;
    }
    if (!no_consumer) {
        if (away)
            snprintf(detail, sizeof detail,
                     "the mailbox has a reader, but %s: not a fleetfs we can see, or its "
                     "presence is off",
                     why);
        sent_record(mb, e, json, "published", away ? detail : "", members);
        return;
    }
    snprintf(detail, sizeof detail, "no consumer%s%s", away ? "; " : "", away ? why : "");
    sent_record(mb, e, json, "published-unread", detail, members);
    if (send_log_allowed(mb, e->to, away ? "unread-away" : "unread"))
        log_info("send %s to %s: published-unread (%s); it waits in the mailbox until %s reads it",
                 e->msgId, e->to, detail, e->to);
}

/* The members a broadcast to g is expected to reach (presence's view at
 * send time), without the sender's host's own entities, which do not get
 * their own broadcast; NULL when the hook is not there. */
static char **group_members(mailbox *mb, const char *g)
{
    char **all, **out;
    GPtrArray *keep;
    char host[NAME_MAX_LEN + 1];
    if (!mb->hooks.group_members)
        return g_new0(char *, 1);
    all = mb->hooks.group_members(mb->hooks.ud, g);
    keep = g_ptr_array_new();
    for (char **m = all; m && *m; m++)
        if (!id_host(*m, host) || strcmp(host, mb->o->coord_id) != 0)
            g_ptr_array_add(keep, g_strdup(*m));
    g_ptr_array_add(keep, NULL);
    out = (char **)g_ptr_array_free(keep, FALSE);
    g_strfreev(all);
    return out;
}

/* A send on its way (SPEC section 6, revised): signed and encoded by the
 * writer's thread, its outcome recorded and told by whichever thread gets
 * it, the publishing thread when the broker seam publishes without
 * waiting. */
typedef struct {
    mailbox *mb; /* a ref */
    envelope e;  /* the header; body NULL (the writer's buffer is gone) */
    char *json;  /* the signed envelope, kept while unconfirmed */
    size_t jlen;
    char **members; /* a broadcast's, as presence knew them at send time */
    mb_send_done done;
    void *ud;
} send_job;

static void job_free(send_job *j)
{
    mb_unref(j->mb);
    free(j->json);
    g_strfreev(j->members);
    g_free(j);
}

/* The outcome res of j's publish: record it in sent (published, unread,
 * unconfirmed), apply what overtook it, log.  detail may be rewritten. */
static void send_settle(send_job *j, fe_code res, bool unread, char *detail, size_t dlen)
{
    mailbox *mb = j->mb;
    const envelope *e = &j->e;
    if (res == FE_OK)
        send_published(mb, e, j->json, unread, detail, j->members);
    else if (res == FE_TIMEOUT)
        sent_record(mb, e, j->json, "unconfirmed",
                    detail[0] ? detail
                              : "no confirm within send_timeout (the write returned ETIMEDOUT); "
                                "the broker may still take it; write its msgId to resend to "
                                "publish the same message again",
                    j->members);
    sent_apply_early(mb, e->msgId);
    if (res == FE_NO_MAILBOX && j->members)
        snprintf(detail, dlen, "no member of %s has a mailbox bound to it: nothing was sent",
                 e->to);
    else if (res == FE_NO_MAILBOX && strchr(e->to, '@'))
        snprintf(detail, dlen,
                 "no mailbox is bound to %s on %s: no such agent (ls agents/), or "
                 "it was retired; nothing was sent",
                 e->to, MB_EXCHANGE_MSG);
    if (res == FE_NO_MAILBOX && (j->members || strchr(e->to, '@')))
        /* the lead's hint (start its fleetfs, host add) does not fit here */
        log_warn("send %s to %s: %s: %s", e->msgId, e->to, fe_name(res), detail);
    else if (res != FE_OK)
        log_warn("send %s to %s: %s (%s)%s%s", e->msgId, e->to, fe_name(res), fe_hint(res),
                 detail[0] ? ": " : "", detail);
}

/* The broker seam's answer to a publish handed over (br_publish_done): on
 * the publishing thread, which records the `sent` line and tells the
 * writer itself: no hand-off back. */
static void send_answered(void *ud, fe_code res, bool unread, const char *bdetail)
{
    send_job *j = ud;
    char detail[512];
    g_strlcpy(detail, bdetail ? bdetail : "", sizeof detail);
    send_settle(j, res, unread, detail, sizeof detail);
    j->done(j->ud, res, detail);
    job_free(j);
}

/* Hand j's envelope to the broker by its route (SPEC 10): a lead's mailbox
 * through the default exchange (as ever), an agent's through fleet.msg
 * with its gid, a group through fleet.msg with broadcast.<g>: one
 * publish, the broker copies it to every member.  *handed: the seam took
 * it without waiting (send_answered is told, maybe already; j is not
 * ours any more); else the result is the outcome (or a refusal). */
static fe_code route_publish(send_job *j, bool *handed, bool *unread, char *detail, size_t dlen)
{
    mailbox *mb = j->mb;
    const envelope *e = &j->e;
    const mb_broker *br = &mb->h->br;
    int64_t timeout = mb->o->send_timeout_ms, exp, ttl = 0;
    char key[ADDR_MAX_LEN + 16], queue[ADDR_MAX_LEN + 16];
    const char *probe = NULL;
    addr a;
    fe_code res;

    *handed = false;
    if (!addr_parse(e->to, &a))
        return FE_NO_PEER;
    /* the AMQP per-message expiration: what is left of its lifetime, so
     * the broker drops it itself at expiresAt (at least 1 ms: 0 would mean
     * "deliver now or drop") */
    if (env_time_parse(e->expiresAt, &exp) == 0)
        ttl = MAX(exp - env_now_ms(), 1);
    if (a.kind == ADDR_LEAD) {
        bool create = is_configured_peer(mb, e->to);
        if (!br->publish_start)
            return br->publish(br->b, e->to, create, e->msgId, j->json, j->jlen, ttl, timeout,
                               unread, detail, dlen);
        res = br->publish_start(br->b, e->to, create, e->msgId, j->json, j->jlen, ttl, timeout,
                                send_answered, j, detail, dlen);
        *handed = res == FE_OK;
        return res;
    }
    if (!br->publish_route) {
        snprintf(detail, dlen, "this broker seam cannot route to agents or groups");
        return FE_INTERNAL;
    }
    if (a.kind == ADDR_AGENT) {
        snprintf(queue, sizeof queue, "agent.%s.inbox", e->to);
        g_strlcpy(key, e->to, sizeof key);
        probe = queue;
    } else {
        snprintf(key, sizeof key, "broadcast.%s", a.name);
    }
    if (!br->publish_route_start)
        return br->publish_route(br->b, MB_EXCHANGE_MSG, key, probe, e->msgId, j->json, j->jlen,
                                 ttl, timeout, unread, detail, dlen);
    res = br->publish_route_start(br->b, MB_EXCHANGE_MSG, key, probe, e->msgId, j->json, j->jlen,
                                  ttl, timeout, send_answered, j, detail, dlen);
    *handed = res == FE_OK;
    return res;
}

/* Publish json (e's envelope, json malloc'd: taken) for mb and record the
 * outcome.  While it waits, e's msgId is in `inflight`, where what
 * overtakes the record waits.  FE_OK: done is told (now or later, once);
 * anything else is the outcome, known at once, and done is not told. */
static fe_code send_go(mailbox *mb, const envelope *e, char *json, size_t jlen, mb_send_done done,
                       void *ud, char *detail, size_t dlen)
{
    send_job *j = g_new0(send_job, 1);
    bool unread = false, handed;
    fe_code res;

    j->mb = mb_ref(mb);
    j->e = *e;
    j->e.body = NULL; /* the writer's (or the decoder's): not ours */
    j->e.body_len = 0;
    j->json = json;
    j->jlen = jlen;
    j->members = g_str_has_prefix(e->to, GROUP_PREFIX)
                     ? group_members(mb, e->to + strlen(GROUP_PREFIX))
                     : NULL;
    j->done = done;
    j->ud = ud;
    g_mutex_lock(mb->lock);
    g_hash_table_insert(mb->inflight, g_strdup(e->msgId), NULL);
    g_mutex_unlock(mb->lock);
    res = route_publish(j, &handed, &unread, detail, dlen);
    if (handed)
        return FE_OK;
    send_settle(j, res, unread, detail, dlen);
    if (res == FE_OK)
        done(ud, res, detail);
    job_free(j);
    return res;
}

/* One message: validate, wrap with a lifetime of life_ms, sign and encode
 * (on the caller's thread), hand over; send_go's results.  ask (may be
 * NULL): the question of an ask, registered before it is handed over, so
 * that no answer can overtake it. */
static fe_code send_one(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                        size_t len, int64_t life_ms, mb_ask *ask, mb_send_done done, void *ud,
                        char *detail, size_t dlen)
{
    envelope e;
    char *json;
    size_t jlen;
    fe_code res;
    int64_t now = env_now_ms();

    detail[0] = '\0';
    if ((res = send_input_ok(mb, peer, data, len)) == FE_OK && reply_to && !env_id_valid(reply_to))
        res = FE_BAD_INPUT;
    if (res != FE_OK) {
        /* the writer sees only the errno: the log says which rule and what to do */
        log_warn("send to %s: refused, nothing was sent: %s (%s)", peer, fe_name(res),
                 fe_hint(res));
        return res;
    }

    memset(&e, 0, sizeof e);
    e.v = 1;
    g_strlcpy(e.type, ENV_TYPE_COORD, sizeof e.type);
    env_new_msgid(e.msgId);
    g_strlcpy(e.from, mb->id, sizeof e.from);
    g_strlcpy(e.to, peer, sizeof e.to);
    env_time_format(now, e.sentAt);
    env_time_format(now + life_ms, e.expiresAt);
    if (reply_to)
        g_strlcpy(e.replyTo, reply_to, sizeof e.replyTo);
    e.body = (char *)data;
    e.body_len = len;
    if (mb->h->key && sig_sign(mb->h->key, &e) < 0)
        return FE_INTERNAL;
    json = env_encode(&e, &jlen);
    if (!json)
        return FE_INTERNAL;
    if (ask) {
        g_mutex_lock(mb->lock);
        ask_register_locked(mb, ask, &e);
        g_mutex_unlock(mb->lock);
    }
    return send_go(mb, &e, json, jlen, done, ud, detail, dlen);
}

int64_t sent_default_life(const mailbox *mb)
{
    return mb->o->expires_in_ms > 0 ? mb->o->expires_in_ms : mb->o->message_ttl_ms;
}

fe_code mb_send_start(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                      size_t len, mb_send_done done, void *ud, char *detail, size_t dlen)
{
    if (len > 0 && data[len - 1] == '\n')
        len--; /* echo's newline is not part of the message */
    return send_one(mb, peer, reply_to, data, len, sent_default_life(mb), NULL, done, ud, detail,
                    dlen);
}

/* The blocking forms wait for done on a condition of their own (mb_int.h). */
void sent_wait_done(void *ud, fe_code res, const char *detail)
{
    sent_wait *w = ud;
    g_mutex_lock(&w->m);
    w->res = res;
    g_strlcpy(w->detail, detail ? detail : "", sizeof w->detail);
    w->done = true;
    g_cond_signal(&w->cv); /* under the lock: w lives on the waiter's stack */
    g_mutex_unlock(&w->m);
}

void sent_wait_init(sent_wait *w)
{
    memset(w, 0, sizeof *w);
    g_mutex_init(&w->m);
    g_cond_init(&w->cv);
}

fe_code sent_wait_end(sent_wait *w, fe_code started, char *detail, size_t dlen)
{
    fe_code res = started;
    if (started == FE_OK) {
        g_mutex_lock(&w->m);
        while (!w->done)
            g_cond_wait(&w->cv, &w->m);
        g_mutex_unlock(&w->m);
        res = w->res;
        if (detail)
            g_strlcpy(detail, w->detail, dlen);
    }
    g_mutex_clear(&w->m);
    g_cond_clear(&w->cv);
    return res;
}

fe_code sent_send_start(mailbox *mb, const char *peer, const char *reply_to, const char *data,
                        size_t len, int64_t life_ms, mb_ask *ask, mb_send_done done, void *ud,
                        char *detail, size_t dlen)
{
    fe_code res = send_one(mb, peer, reply_to, data, len, life_ms, ask, done, ud, detail, dlen);
    if (ask && res != FE_OK) {
        /* not asked: nothing is awaited (done's owner unregisters the ask
         * when the outcome comes later); an answer that comes all the same
         * arrives as an ordinary reply */
        g_mutex_lock(mb->lock);
        ask_unregister_locked(mb, ask);
        g_mutex_unlock(mb->lock);
    }
    return res;
}

fe_code mb_send(mailbox *mb, const char *peer, const char *reply_to, const char *data, size_t len,
                char *detail, size_t dlen)
{
    sent_wait w;
    sent_wait_init(&w);
    return sent_wait_end(
        &w, mb_send_start(mb, peer, reply_to, data, len, sent_wait_done, &w, detail, dlen), detail,
        dlen);
}

/* send.json: why it is refused (detail, the log), nothing published. */
static fe_code json_refused(const char *what, const char *to, char *detail, size_t dlen,
                            const char *fmt, ...) G_GNUC_PRINTF(5, 6);
static fe_code json_refused(const char *what, const char *to, char *detail, size_t dlen,
                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, dlen, fmt, ap);
    va_end(ap);
    log_warn("%s to %s: refused, nothing was sent: %s", what, to, detail);
    return FE_BAD_INPUT;
}

fe_code sent_parse_json(mailbox *mb, const char *to, const char *what, const char *data, size_t len,
                        int64_t default_life, char **body_out, int64_t *life, char **reply_out,
                        char *detail, size_t dlen)
{
    json_error_t jerr;
    json_t *j, *v;
    const char *key, *body, *reply_to = NULL;
    char who[MB_ID_MAX];
    fe_code res;

    detail[0] = '\0';
    *body_out = *reply_out = NULL;
    *life = default_life;
    if (memchr(data, '\0', len))
        return json_refused(what, to, detail, dlen, "a NUL byte in the JSON");
    j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return json_refused(what, to, detail, dlen,
                            "not one JSON object {\"body\": TEXT, \"expiresIn\": DURATION, "
                            "\"replyTo\": MSGID} (%s)",
                            j ? "not an object" : jerr.text);
    }
    json_object_foreach(j, key, v)
    {
        if (strcmp(key, "body") && strcmp(key, "expiresIn") && strcmp(key, "replyTo")) {
            res =
                json_refused(what, to, detail, dlen,
                             "unknown key \"%.40s\" (body, expiresIn and replyTo are known)", key);
            json_decref(j);
            return res;
        }
    }
    body = json_string_value(json_object_get(j, "body"));
    if (!body || strlen(body) != json_string_length(json_object_get(j, "body"))) {
        json_decref(j);
        return json_refused(what, to, detail, dlen,
                            "\"body\" (a string without NUL: the message) is required");
    }
    v = json_object_get(j, "expiresIn");
    if (v) {
        const char *s = json_string_value(v);
        char num[32];
        if (json_is_integer(v) && json_integer_value(v) > 0) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            s = num; /* a number is seconds, as in the options */
        }
        if (!s || parse_duration(s, life) < 0 || *life < 1000 || *life > mb->o->message_ttl_ms) {
            res = json_refused(what, to, detail, dlen,
                               "\"expiresIn\" must be a duration from 1s to message_ttl "
                               "(%lld ms), such as \"90s\", \"2m\" or a number of seconds",
                               (long long)mb->o->message_ttl_ms);
            json_decref(j);
            return res;
        }
    }
    v = json_object_get(j, "replyTo");
    if (v) {
        reply_to = json_string_value(v);
        /* only a message that `to` sent here can be answered (a group:
         * any message held or in history) */
        if (!reply_to || !env_id_valid(reply_to) ||
            !(g_str_has_prefix(to, GROUP_PREFIX) ? mb_sender_of(mb, reply_to, who, sizeof who)
                                                 : mb_known_from(mb, reply_to, to))) {
            res = json_refused(what, to, detail, dlen,
                               "\"replyTo\" must be the msgId of a message %s sent here (held or "
                               "in history)",
                               g_str_has_prefix(to, GROUP_PREFIX) ? "someone" : to);
            json_decref(j);
            return res;
        }
    }
    *body_out = g_strdup(body);
    *reply_out = g_strdup(reply_to);
    json_decref(j);
    return FE_OK;
}

fe_code mb_send_json_start(mailbox *mb, const char *to, const char *data, size_t len,
                           mb_send_done done, void *ud, char *detail, size_t dlen)
{
    char *body, *reply_to;
    int64_t life;
    fe_code res = sent_parse_json(mb, to, "send.json", data, len, sent_default_life(mb), &body,
                                  &life, &reply_to, detail, dlen);
    if (res == FE_OK)
        res = send_one(mb, to, reply_to, body, strlen(body), life, NULL, done, ud, detail, dlen);
    g_free(body);
    g_free(reply_to);
    return res;
}

fe_code mb_send_json(mailbox *mb, const char *to, const char *data, size_t len, char *detail,
                     size_t dlen)
{
    sent_wait w;
    sent_wait_init(&w);
    return sent_wait_end(
        &w, mb_send_json_start(mb, to, data, len, sent_wait_done, &w, detail, dlen), detail, dlen);
}

fe_code mb_resend_start(mailbox *mb, const char *data, size_t len, mb_send_done done, void *ud,
                        char *detail, size_t dlen)
{
    char id[ENV_ID_LEN + 1];
    char *json = NULL;
    bool known;
    envelope e;
    char why[200];
    fe_code res;

    detail[0] = '\0';
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
        len--;
    if (len != ENV_ID_LEN || memchr(data, '\0', len)) {
        snprintf(detail, dlen,
                 "write one msgId (32 lowercase hex digits) of an unconfirmed entry of sent");
        log_warn("resend: refused: %s", detail);
        return FE_BAD_INPUT;
    }
    memcpy(id, data, len);
    id[len] = '\0';
    if (!env_id_valid(id)) {
        snprintf(detail, dlen, "'%s' is not a msgId (32 lowercase hex digits, as in sent)", id);
        log_warn("resend: refused: %s", detail);
        return FE_BAD_INPUT;
    }
    json = sent_kept_envelope(mb, id, &known, detail, dlen);
    if (!json) {
        log_warn("resend: %s", detail);
        return known ? FE_BAD_INPUT : FE_NOT_HELD;
    }
    if (env_decode(json, strlen(json), SIZE_MAX, &e, why, sizeof why) < 0) {
        free(json);
        snprintf(detail, dlen, "the kept envelope of %s does not decode: %s", id, why);
        return FE_INTERNAL;
    }
    log_info("resend: publishing %s to %s again (same msgId and signature)", id, e.to);
    res = send_go(mb, &e, json, strlen(json), done, ud, detail, dlen);
    env_free(&e);
    return res;
}

fe_code mb_resend(mailbox *mb, const char *data, size_t len, char *detail, size_t dlen)
{
    sent_wait w;
    sent_wait_init(&w);
    return sent_wait_end(&w, mb_resend_start(mb, data, len, sent_wait_done, &w, detail, dlen),
                         detail, dlen);
}
