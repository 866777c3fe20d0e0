/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/home.c — the tools of the home's own files (tools.c has the
 * table): fleet_inbox pages through <home>/inbox and remembers what it
 * showed; fleet_ack writes to <home>/ack only msgIds the agent named or
 * was shown (never "all": a message that arrived unseen stays);
 * fleet_sent reads <home>/sent; fleet_resend writes an unconfirmed msgId
 * to <home>/resend. */
#include "fleetfs/mcp/tools_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the inbox as an array, or an errno */
static int read_inbox(const who *w, json_t **out)
{
    char path[PATH_MAX];
    GString *s = NULL;
    int rc;
    snprintf(path, sizeof path, "%s/inbox", w->home);
    if ((rc = mt_read_all(path, &s)))
        return rc;
    *out = mt_json_lines(s);
    g_string_free(s, TRUE);
    return 0;
}

static const char *msg_id(json_t *m)
{
    return json_string_value(json_object_get(m, "msgId"));
}

/* when msgId id was first shown by this server; 0: never */
static gsize shown_order(mcp_fleet *f, const char *id)
{
    gsize o;
    g_mutex_lock(&f->lock);
    o = GPOINTER_TO_SIZE(g_hash_table_lookup(f->shown, id));
    g_mutex_unlock(&f->lock);
    return o;
}

/* remember a page as shown, and forget what has left the inbox (so the
 * set stays as small as the inbox) */
static void shown_add(mcp_fleet *f, json_t *inbox, json_t *page)
{
    GHashTable *in = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTableIter it;
    gpointer k;
    size_t i;
    json_t *m;
    json_array_foreach(inbox, i, m)
    {
        if (msg_id(m))
            g_hash_table_add(in, (gpointer)msg_id(m));
    }
    g_mutex_lock(&f->lock);
    g_hash_table_iter_init(&it, f->shown);
    while (g_hash_table_iter_next(&it, &k, NULL))
        if (!g_hash_table_contains(in, k))
            g_hash_table_iter_remove(&it);
    json_array_foreach(page, i, m)
    {
        const char *id = msg_id(m);
        if (id && !g_hash_table_contains(f->shown, id))
            g_hash_table_insert(f->shown, g_strdup(id), GSIZE_TO_POINTER(f->next_order++));
    }
    g_mutex_unlock(&f->lock);
    g_hash_table_destroy(in);
}

/* What one inbox entry adds to fleet_inbox's answer line, in bytes.  The
 * result carries the page twice: as structuredContent (compact JSON) and
 * as its text (the page as indented JSON, escaped once more into a JSON
 * string), so a control character in a body is 6 bytes in the one
 * (\u0001) and 7 in the other (\\u0001): both renderings are measured,
 * not the body's raw length.  In the page an entry is two levels deeper
 * than alone (two more spaces a line) and has its separators: the slack. */
static size_t entry_cost(json_t *m)
{
    char *compact = json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY);
    char *text = json_dumps(m, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    json_t *str = text ? json_string(text) : NULL;
    char *esc = str ? json_dumps(str, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    size_t lines = 1, cost;
    for (const char *p = text; p && *p; p++)
        lines += *p == '\n';
    /* a rendering that failed (no memory): count the entry as a full page */
    cost = compact && esc ? strlen(compact) + strlen(esc) + 2 * lines + 8 : INBOX_PAGE_BYTES;
    free(compact);
    free(text);
    free(esc);
    json_decref(str);
    return cost;
}

/* fleet_inbox {limit, after}: one page of the inbox, in its order.  The
 * page starts after `after` when that is still in the inbox; when it has
 * left (acked since, or typed into the pane), after every message this
 * server showed no later than it, so acking a page before reading the
 * next skips nothing and repeats nothing. */
json_t *mt_inbox(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"limit", "after", NULL};
    json_t *err = mt_only_keys(args, "fleet_inbox", keys);
    json_t *jlim = json_object_get(args, "limit"), *jafter = json_object_get(args, "after");
    json_t *inbox, *page, *m;
    const char *after = NULL;
    json_int_t limit = INBOX_LIMIT_DEFAULT;
    size_t i, start = 0, bytes = 0;
    gsize after_order = 0;
    bool more = false;
    int rc;

    if (err)
        return err;
    if (jlim && !json_is_null(jlim)) {
        if (!json_is_integer(jlim) || json_integer_value(jlim) < 1 ||
            json_integer_value(jlim) > INBOX_LIMIT_MAX)
            return mt_fail("fleet_inbox: limit must be an integer from 1 to %d", INBOX_LIMIT_MAX);
        limit = json_integer_value(jlim);
    }
    if (jafter && !json_is_null(jafter)) {
        if (!json_is_string(jafter) || !mt_is_msgid(json_string_value(jafter)))
            return mt_fail("fleet_inbox: after must be a msgId (32 hex digits): the `last` of the "
                           "page before");
        after = json_string_value(jafter);
    }
    if ((rc = mt_who_me(w)))
        return mt_fail_errno(w, rc, "fleet_inbox", NULL, NULL);
    if ((rc = read_inbox(w, &inbox)))
        return mt_fail_errno(w, rc, "fleet_inbox", NULL, NULL);
    if (after) {
        bool found = false;
        json_array_foreach(inbox, i, m)
        {
            if (!found && !g_strcmp0(msg_id(m), after)) {
                found = true;
                start = i + 1;
            }
        }
        if (!found && !(after_order = shown_order(w->f, after))) {
            json_decref(inbox);
            return mt_fail("fleet_inbox: %s (after) is not in your inbox and was not shown by "
                           "fleet_inbox here; read from the start (without after)",
                           after);
        }
    }
    page = json_array();
    for (i = start; i < json_array_size(inbox); i++) {
        const char *id;
        size_t len;
        m = json_array_get(inbox, i);
        id = msg_id(m);
        if (after_order && id) {
            gsize o = shown_order(w->f, id);
            if (o && o <= after_order)
                continue;
        }
        len = entry_cost(m);
        if (json_array_size(page) >= (size_t)limit ||
            (json_array_size(page) > 0 && bytes + len > INBOX_PAGE_BYTES)) {
            more = true;
            break;
        }
        bytes += len;
        json_array_append(page, m);
    }
    shown_add(w->f, inbox, page);
    m = json_pack("{s:s,s:I,s:I,s:b,s:o}", "me", w->me, "total", (json_int_t)json_array_size(inbox),
                  "count", (json_int_t)json_array_size(page), "more", more, "messages", page);
    if (json_array_size(page) > 0 && msg_id(json_array_get(page, json_array_size(page) - 1)))
        json_object_set_new(m, "last",
                            json_string(msg_id(json_array_get(page, json_array_size(page) - 1))));
    json_decref(inbox);
    return mt_ok_json(m);
}

/* fleet_ack {msgIds, through}: never a blind "all": the ids named, and
 * with through every message this server showed no later than it that is
 * still in the inbox; one write of exactly those ids to the ack file */
json_t *mt_ack(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"msgIds", "through", NULL};
    json_t *err = mt_only_keys(args, "fleet_ack", keys);
    json_t *ids = json_object_get(args, "msgIds"), *jthrough = json_object_get(args, "through");
    json_t *inbox, *e, *acked;
    const char *through = NULL;
    char path[PATH_MAX];
    GString *text, *missing;
    GHashTable *held, *chosen;
    size_t i;
    int rc;

    if (err)
        return err;
    if (json_is_string(ids) && !strcmp(json_string_value(ids), "all"))
        return mt_fail("fleet_ack: \"all\" is not accepted: it would also consume messages that "
                       "arrived after you read your inbox, unseen; nothing was acknowledged: give "
                       "the msgIds you read, or through: the last msgId fleet_inbox showed you");
    if (ids && !json_is_null(ids) && (!json_is_array(ids) || json_array_size(ids) == 0))
        return mt_fail("fleet_ack: msgIds must be a non-empty list of msgIds from fleet_inbox; "
                       "nothing was acknowledged");
    if (jthrough && !json_is_null(jthrough)) {
        if (!json_is_string(jthrough) || !mt_is_msgid(json_string_value(jthrough)))
            return mt_fail("fleet_ack: through must be a msgId (32 hex digits) fleet_inbox showed "
                           "you; nothing was acknowledged");
        through = json_string_value(jthrough);
    }
    if (!json_is_array(ids) && !through)
        return mt_fail("fleet_ack: needs msgIds (the msgIds you read) or through (a msgId "
                       "fleet_inbox showed you); nothing was acknowledged");
    json_array_foreach(ids, i, e)
    {
        if (!json_is_string(e) || !mt_is_msgid(json_string_value(e)))
            return mt_fail("fleet_ack: msgIds[%zu] is not a msgId (32 hex digits); nothing was "
                           "acknowledged",
                           i);
    }
    if ((rc = read_inbox(w, &inbox)))
        return mt_fail_errno(w, rc, "fleet_ack", NULL, NULL);
    held = g_hash_table_new(g_str_hash, g_str_equal);
    json_array_foreach(inbox, i, e)
    {
        if (msg_id(e))
            g_hash_table_add(held, (gpointer)msg_id(e));
    }
    chosen = g_hash_table_new(g_str_hash, g_str_equal);
    text = g_string_new(NULL);
    missing = g_string_new(NULL);
    acked = json_array();
    json_array_foreach(ids, i, e)
    {
        const char *id = json_string_value(e);
        if (!g_hash_table_contains(held, id))
            g_string_append_printf(missing, "%s%s", missing->len ? ", " : "", id);
        else if (!g_hash_table_contains(chosen, id))
            g_hash_table_add(chosen, (gpointer)id);
    }
    if (through) {
        gsize upto = shown_order(w->f, through);
        if (!upto) {
            err = mt_fail("fleet_ack: %s (through) was not shown to you by fleet_inbox here; "
                          "nothing was acknowledged: read fleet_inbox, then ack through its last",
                          through);
        } else {
            json_array_foreach(inbox, i, e)
            {
                gsize o = msg_id(e) ? shown_order(w->f, msg_id(e)) : 0;
                if (o && o <= upto)
                    g_hash_table_add(chosen, (gpointer)msg_id(e));
            }
        }
    }
    if (!err && missing->len)
        err = mt_fail("fleet_ack: not in your inbox: %s (already acknowledged, or typed into your "
                      "pane); nothing was acknowledged: take the ids from fleet_inbox",
                      missing->str);
    /* in the inbox's order: the ack file takes one msgId a line */
    json_array_foreach(inbox, i, e)
    {
        if (msg_id(e) && g_hash_table_contains(chosen, msg_id(e))) {
            g_string_append_printf(text, "%s\n", msg_id(e));
            json_array_append_new(acked, json_string(msg_id(e)));
        }
    }
    if (!err && text->len == 0)
        err = mt_ok_json(json_pack("{s:b,s:I,s:o,s:s}", "acked", 0, "count", (json_int_t)0,
                                   "msgIds", json_array(), "note",
                                   "nothing to acknowledge: what you were shown up to that msgId "
                                   "has left the inbox already"));
    if (!err) {
        snprintf(path, sizeof path, "%s/ack", w->home);
        rc = mt_write_once(path, text->str, text->len);
        if (rc == ENOENT)
            err = mt_fail("fleet_ack: one of the messages left the inbox meanwhile (ENOENT: not "
                          "held); nothing was acknowledged: read fleet_inbox again");
        else if (rc == EINVAL)
            err = mt_fail("fleet_ack: the ack file refused the list (EINVAL); nothing was "
                          "acknowledged");
        else if (rc)
            err = mt_fail_errno(w, rc, "fleet_ack", NULL, NULL);
        else
            err = mt_ok_json(json_pack("{s:b,s:I,s:O}", "acked", 1, "count",
                                       (json_int_t)json_array_size(acked), "msgIds", acked));
    }
    g_hash_table_destroy(chosen);
    g_hash_table_destroy(held);
    json_decref(acked);
    json_decref(inbox);
    g_string_free(text, TRUE);
    g_string_free(missing, TRUE);
    return err;
}

json_t *mt_sent(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"msgId", "limit", NULL};
    json_t *err = mt_only_keys(args, "fleet_sent", keys);
    json_t *jid = json_object_get(args, "msgId"), *jlim = json_object_get(args, "limit");
    json_t *all, *e, *out;
    char path[PATH_MAX];
    GString *s = NULL;
    json_int_t limit = SENT_DEFAULT;
    size_t i, n;
    int rc;

    if (err)
        return err;
    if (jid && !json_is_null(jid) && (!json_is_string(jid) || !mt_is_msgid(json_string_value(jid))))
        return mt_fail("fleet_sent: msgId must be 32 hex digits (from fleet_send's answer)");
    if (jlim && !json_is_null(jlim)) {
        if (!json_is_integer(jlim) || json_integer_value(jlim) < 1 ||
            json_integer_value(jlim) > 1000)
            return mt_fail("fleet_sent: limit must be an integer from 1 to 1000");
        limit = json_integer_value(jlim);
    }
    snprintf(path, sizeof path, "%s/sent", w->home);
    if ((rc = mt_read_all(path, &s)))
        return mt_fail_errno(w, rc, "fleet_sent", NULL, NULL);
    all = mt_json_lines(s);
    g_string_free(s, TRUE);
    if (json_is_string(jid)) {
        json_t *hit = NULL;
        json_array_foreach(all, i, e)
        {
            const char *id = json_string_value(json_object_get(e, "msgId"));
            if (id && !strcmp(id, json_string_value(jid)))
                hit = e;
        }
        if (!hit) {
            json_decref(all);
            return mt_fail("fleet_sent: no message %s in your sent log (it keeps the latest ones "
                           "you sent); call fleet_sent without msgId for the list",
                           json_string_value(jid));
        }
        out = json_incref(hit);
        json_decref(all);
        return mt_ok_json(out);
    }
    n = json_array_size(all);
    out = json_array();
    for (i = n > (size_t)limit ? n - (size_t)limit : 0; i < n; i++)
        json_array_append(out, json_array_get(all, i));
    json_decref(all);
    return mt_ok_json(json_pack("{s:I,s:I,s:o}", "total", (json_int_t)n, "shown",
                                (json_int_t)json_array_size(out), "messages", out));
}

/* fleet_resend {msgId}: the msgId written to the home's resend file; the
 * state afterwards from sent */
json_t *mt_resend(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"msgId", NULL};
    json_t *err = mt_only_keys(args, "fleet_resend", keys);
    json_t *jid = json_object_get(args, "msgId"), *all, *e, *hit = NULL, *res;
    char path[PATH_MAX], what[80], line[40];
    const char *id, *to = NULL;
    GString *s = NULL;
    size_t i;
    int rc;

    if (err)
        return err;
    if (!json_is_string(jid) || !mt_is_msgid(json_string_value(jid)))
        return mt_fail("fleet_resend: msgId must be a msgId (32 hex digits) that fleet_sent lists "
                       "as unconfirmed; nothing was sent");
    id = json_string_value(jid);
    snprintf(what, sizeof what, "fleet_resend %s", id);
    snprintf(path, sizeof path, "%s/sent", w->home);
    if ((rc = mt_read_all(path, &s)))
        return mt_fail_errno(w, rc, what, NULL, NULL);
    all = mt_json_lines(s);
    g_string_free(s, TRUE);
    json_array_foreach(all, i, e)
    {
        if (!g_strcmp0(msg_id(e), id))
            hit = e;
    }
    if (!hit) {
        json_decref(all);
        return mt_fail("%s: no message %s in your sent log (ENOENT); nothing was sent: take the "
                       "msgId from fleet_sent",
                       what, id);
    }
    to = json_string_value(json_object_get(hit, "to"));
    if (g_strcmp0(json_string_value(json_object_get(hit, "state")), "unconfirmed")) {
        res = mt_fail("%s: its state is %s, not unconfirmed, so there is nothing to resend "
                      "(EINVAL); nothing was sent",
                      what, json_string_value(json_object_get(hit, "state")));
        json_decref(all);
        return res;
    }
    snprintf(path, sizeof path, "%s/resend", w->home);
    snprintf(line, sizeof line, "%s\n", id);
    rc = mt_write_once(path, line, strlen(line));
    if (rc == EINVAL)
        res = mt_fail("%s: no longer unconfirmed (EINVAL: its state changed meanwhile); nothing "
                      "was sent: fleet_sent {msgId} shows its state",
                      what);
    else if (rc)
        res = mt_fail_errno(w, rc, what, to, NULL);
    else
        res = mt_ok_json(json_pack("{s:b,s:s,s:s?}", "resent", 1, "msgId", id, "to", to));
    json_decref(all);
    return res;
}
