/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/tools.c — the eight fleet_* tools, done through the mounted
 * files and nothing else (SPEC section 12).
 *
 * Why only files: the MCP server then can do exactly what a shell in the
 * same account can do, no more — it holds no broker login and no signing
 * key, and every rule (who may send, size limits, the peer list) is the
 * daemon's, enforced once, at the files.  So these files open, read and
 * write paths under the mount and turn errnos into words (this one: the
 * table, send, list and status; home.c: inbox, ack, sent and resend, the
 * home's own files; ask.c: fleet_ask; claim.c: the claim tools;
 * toolkit.c: what they all share, reading and writing a file whole, an
 * errno in words, a result; tools_int.h between them):
 *
 *   fleet_send    one write(2) to the file of the address (see
 *                 mcp_fleet_send_path: peers/<to>/send, agents/<gid>/send,
 *                 groups/<g>/send, a reply/<msgId>, or for an agent
 *                 agents/<me>/to/<to>); the msgId is found afterwards in
 *                 the home's sent (the entry to <to> that was not there
 *                 before the write)
 *   fleet_ask     ask.c: one question written to an ask file (the lead's
 *                 peers/<to>/ask.json or agents/<gid>/ask.json, an agent's
 *                 agents/<me>/to/<to>.ask.json), its answer read back
 *   fleet_list    roster (every lead heard) and the names in peers/, the
 *                 agents (agents/ and each one's status), the groups
 *                 (groups/ and each one's members)
 *   fleet_inbox   <home>/inbox, one page of it (limit, after)
 *   fleet_ack     one write of msgIds to <home>/ack: those named, and/or
 *                 those this server showed up to one (through); never
 *                 "all", which would consume what arrived unseen; ids
 *                 not in the inbox are named first, and nothing is acked
 *   fleet_sent    <home>/sent, the last entries or one msgId's
 *   fleet_resend  one write of an unconfirmed msgId to <home>/resend
 *   fleet_status  status and <home>/status, or the status of a peer lead
 *                 or an agent
 *
 * The home is the lead's (self -> leads/<me>/) or, for a server started
 * with --as <gid>, that local agent's agents/<gid>/ (SPEC section 10):
 * the same files, so the same code; only the send paths differ, since an
 * agent sends as itself through agents/<gid>/to/.
 *
 * An empty body is refused here: a zero-byte write(2) never reaches the
 * daemon (the kernel answers it), so the file could not say EINVAL.  A
 * failed write is a result with isError true whose text says what the
 * errno means (SPEC section 5) and what to do; never an abort.  How long
 * a call may block is bounded by the caller (serve.c), not here.
 *
 */
#include "fleetfs/mcp/claim.h"
#include "fleetfs/mcp/tools.h"
#include "fleetfs/mcp/tools_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fleetfs/os/os.h"
#include "fleetfs/wire/names.h"

/* ---- the tool table: what an agent reads ------------------------------ */

#define COORD_RE "[a-z0-9][a-z0-9_-]{0,62}"
#define ID_PATTERN "^([a-z][a-z0-9_-]{0,31}@)?" COORD_RE "$"
#define TO_PATTERN "^(([a-z][a-z0-9_-]{0,31}@)?|group:)" COORD_RE "$"
#define ID_SCHEMA "{\"type\":\"string\",\"pattern\":\"^[0-9a-f]{32}$\""

/* the handlers (below, and home.c's in tools_int.h), each in its row of
 * the table */
static json_t *t_send(void *ctx, json_t *args);
static json_t *t_list(void *ctx, json_t *args);
static json_t *t_status(void *ctx, json_t *args);

/* hints for a client deciding what to confirm with its user: reading
 * changes nothing; an ack consumes for good; every tool talks to the
 * fleet (an open world: other hosts and agents) */
#define READ_ONLY "{\"readOnlyHint\":true,\"openWorldHint\":true}"
#define WRITES "{\"readOnlyHint\":false,\"destructiveHint\":false,\"openWorldHint\":true}"
#define DESTROYS                                                                 \
    "{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false," \
    "\"openWorldHint\":true}"

const mcp_tool mcp_fleet_tools[] = {
    {"fleet_send", "Send a message to a lead, an agent or a group",
     "Send one text message to a lead (coord_id), an agent (name@host) or every member of a group "
     "(group:<g>); it returns once the broker has it, with the msgId to follow in fleet_sent. Give "
     "replyTo (a msgId from fleet_inbox) and its sender as `to` to answer that message.",
     "{\"type\":\"object\",\"properties\":{"
     "\"to\":{\"type\":\"string\",\"pattern\":\"" TO_PATTERN "\","
     "\"description\":\"a lead's coord_id, an agent's gid (name@coord_id) or group:<g>, as "
     "fleet_list shows them\"},"
     "\"body\":{\"type\":\"string\",\"minLength\":1,"
     "\"description\":\"the message text (UTF-8, up to max_message: 64 KiB by default)\"},"
     "\"replyTo\":" ID_SCHEMA ",\"description\":\"msgId of the message from `to` this answers\"},"
     "\"expiresIn\":{\"type\":[\"string\",\"integer\"],\"description\":\"how long the message "
     "matters: a duration (90s, 2m, 1h) or seconds, 1s to the fleet's message_ttl; past it the "
     "receiver never shows or types it and fleet_sent says expired\"}},"
     "\"required\":[\"to\",\"body\"],\"additionalProperties\":false}",
     WRITES, t_send},
    {"fleet_ask", "Ask a lead or an agent and wait for the answer",
     "Send one question to a lead (coord_id) or an agent (name@host) and wait up to `timeout` "
     "seconds, the question's lifetime, for the reply that answers it: that answer is returned "
     "to you alone and never shows in fleet_inbox. No answer in time is an error saying the "
     "question expired (a later answer then arrives in fleet_inbox); other calls wait meanwhile.",
     "{\"type\":\"object\",\"properties\":{"
     "\"to\":{\"type\":\"string\",\"pattern\":\"" ID_PATTERN "\","
     "\"description\":\"a lead's coord_id or an agent's gid, as fleet_list shows them\"},"
     "\"body\":{\"type\":\"string\",\"minLength\":1,\"description\":\"the question\"},"
     "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" MCP_ASK_MAX_S
     ",\"default\":" MCP_ASK_DEFAULT_S ",\"description\":\"seconds to wait for the answer: "
     "the question's lifetime\"}},"
     "\"required\":[\"to\",\"body\"],\"additionalProperties\":false}",
     WRITES, mt_ask},
    {"fleet_list", "List the leads, agents and groups",
     "List who you can message: the leads (presence, host, version), the agents (gid, host, "
     "local, presence, state, groups) and the groups with their members. fleet_status {peer} "
     "tells whether one's mailbox is being read.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", READ_ONLY, t_list},
    {"fleet_inbox", "Read your inbox",
     "Read the messages that arrived for you and are not consumed yet, oldest first (msgId, from, "
     "sentAt, body, replyTo), one page at a time: up to `limit` messages after the msgId `after` "
     "(from the start without it), fewer when more would take the whole result "
     "past " INBOX_RESULT_MAX_TEXT
     " (one larger message comes alone); `more` says whether more follow "
     "(call again with after: the page's `last`). Acknowledge what you have dealt with by "
     "fleet_ack.",
     "{\"type\":\"object\",\"properties\":{"
     "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" INBOX_LIMIT_MAX_S
     ",\"default\":" INBOX_LIMIT_DEFAULT_S ",\"description\":\"at most this many messages\"},"
     "\"after\":" ID_SCHEMA ",\"description\":\"the msgId after which the page starts: the "
     "previous page's last\"}},\"additionalProperties\":false}",
     READ_ONLY, mt_inbox},
    {"fleet_ack", "Acknowledge inbox messages",
     "Consume messages from your inbox once dealt with: the msgIds you read (msgIds), and/or every "
     "message fleet_inbox has shown you up to and including one msgId (through). A message you "
     "were not shown is never consumed; nothing is acknowledged when a msgId is not in the inbox.",
     "{\"type\":\"object\",\"properties\":{"
     "\"msgIds\":{\"type\":\"array\",\"items\":" ID_SCHEMA "},\"minItems\":1,"
     "\"description\":\"msgIds fleet_inbox showed you\"},"
     "\"through\":" ID_SCHEMA ",\"description\":\"a msgId fleet_inbox showed you: it and every "
     "message shown before it\"}},"
     "\"anyOf\":[{\"required\":[\"msgIds\"]},{\"required\":[\"through\"]}],"
     "\"additionalProperties\":false}",
     DESTROYS, mt_ack},
    {"fleet_sent", "What happened to sent messages",
     "Show the delivery state of messages you sent (published, injected, confirmed, acked, "
     "unconfirmed, rejected, expired, ...), the latest ones or one msgId's.",
     "{\"type\":\"object\",\"properties\":{\"msgId\":" ID_SCHEMA
     ",\"description\":\"only this message\"},"
     "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"default\":20,"
     "\"description\":\"how many of the latest to show\"}},\"additionalProperties\":false}",
     READ_ONLY, mt_sent},
    {"fleet_resend", "Publish an unconfirmed message again",
     "Publish again, under the same msgId, a message fleet_sent lists as unconfirmed (its send "
     "timed out): the receiver keeps one copy even if the first did arrive. Never send such a "
     "text anew with fleet_send.",
     "{\"type\":\"object\",\"properties\":{\"msgId\":" ID_SCHEMA
     ",\"description\":\"the unconfirmed message's msgId (fleet_sent)\"}},"
     "\"required\":[\"msgId\"],\"additionalProperties\":false}",
     WRITES, mt_resend},
    {"fleet_status", "Fleet, lead or agent status",
     "Without peer: the daemon and your own mailbox (is the broker connected, what is held). With "
     "peer: that lead's or agent's mailbox (messages, readers), presence and, for an agent, its "
     "state and groups.",
     "{\"type\":\"object\",\"properties\":{\"peer\":{\"type\":\"string\","
     "\"pattern\":\"" ID_PATTERN "\",\"description\":\"a lead's coord_id or an agent's "
     "gid\"}},"
     "\"additionalProperties\":false}",
     READ_ONLY, t_status},
    MCP_CLAIM_TOOLS,
};
const size_t mcp_fleet_ntools = G_N_ELEMENTS(mcp_fleet_tools);

mcp_fleet *mcp_fleet_new(const char *mnt, const char *as)
{
    mcp_fleet *f = g_new0(mcp_fleet, 1);
    f->mnt = g_strdup(mnt);
    f->as = g_strdup(as);
    g_mutex_init(&f->lock);
    f->shown = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    f->next_order = 1;
    return f;
}

void mcp_fleet_free(mcp_fleet *f)
{
    if (!f)
        return;
    g_hash_table_destroy(f->shown);
    g_mutex_clear(&f->lock);
    g_free(f->mnt);
    g_free(f->as);
    g_free(f);
}

char *mcp_fleet_send_path(const char *as, const char *me, const char *to, const char *ref,
                          char **why)
{
    addr a;
    *why = NULL;
    if (!addr_parse(to, &a)) {
        *why = g_strdup_printf("'%s' is not a lead's coord_id, an agent's gid (name@coord_id) "
                               "or group:<g>; fleet_list shows them",
                               to);
        return NULL;
    }
    if (ref && a.kind == ADDR_GROUP) {
        *why = g_strdup_printf("a reply goes to the one who sent the message, not to a group: "
                               "give `to` that sender (the `from` of %s in fleet_inbox)",
                               ref);
        return NULL;
    }
    if (as && !strcmp(to, as)) {
        *why = g_strdup_printf("'%s' is yourself", to);
        return NULL;
    }
    if (as)
        return ref ? g_strdup_printf("agents/%s/reply/%s", as, ref)
                   : g_strdup_printf("agents/%s/to/%s", as, to);
    if (ref)
        return a.kind == ADDR_LEAD ? g_strdup_printf("peers/%s/reply/%s", to, ref)
                                   : g_strdup_printf("leads/%s/reply/%s", me, ref);
    switch (a.kind) {
    case ADDR_LEAD:
        return g_strdup_printf("peers/%s/send", to);
    case ADDR_AGENT:
        return g_strdup_printf("agents/%s/send", to);
    case ADDR_GROUP:
    default:
        return g_strdup_printf("groups/%s/send", a.name);
    }
}

/* NULL when `peer` names a lead or an agent (fleet_status); else the
 * error result */
static json_t *check_peer(const char *tool, const char *arg, const char *peer)
{
    if (id_valid(peer))
        return NULL;
    return mt_fail("%s: %s '%s' is not a lead's coord_id ([a-z0-9][a-z0-9_-]{0,62}) or an agent's "
                   "gid (name@coord_id); fleet_list shows them",
                   tool, arg, peer);
}

/* ---- the tools --------------------------------------------------------- */

static GHashTable *sent_ids(const who *w)
{
    char path[PATH_MAX];
    GString *s = NULL;
    GHashTable *ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    json_t *arr, *e;
    size_t i;
    snprintf(path, sizeof path, "%s/sent", w->home);
    if (mt_read_all(path, &s) != 0)
        return ids;
    arr = mt_json_lines(s);
    json_array_foreach(arr, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "msgId"));
        if (id)
            g_hash_table_add(ids, g_strdup(id));
    }
    json_decref(arr);
    g_string_free(s, TRUE);
    return ids;
}

/* after a send to `to`: the one new sent entry to it, or NULL */
static json_t *new_sent_entry(const who *w, const char *to, GHashTable *before)
{
    char path[PATH_MAX];
    GString *s = NULL;
    json_t *arr, *e, *found = NULL;
    size_t i;
    int n = 0;
    snprintf(path, sizeof path, "%s/sent", w->home);
    if (mt_read_all(path, &s) != 0)
        return NULL;
    arr = mt_json_lines(s);
    json_array_foreach(arr, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "msgId"));
        const char *t = json_string_value(json_object_get(e, "to"));
        if (id && t && !strcmp(t, to) && !g_hash_table_contains(before, id)) {
            found = e;
            n++;
        }
    }
    found = n == 1 ? json_incref(found) : NULL;
    json_decref(arr);
    g_string_free(s, TRUE);
    return found;
}

/* who sent message ref, as the home's inbox or history says (g_free), or
 * NULL when neither knows it */
static char *sender_of(const who *w, const char *ref)
{
    static const char *const files[] = {"inbox", "history"};
    char *from = NULL;
    for (size_t f = 0; f < G_N_ELEMENTS(files) && !from; f++) {
        char path[PATH_MAX];
        GString *s = NULL;
        json_t *arr, *e;
        size_t i;
        snprintf(path, sizeof path, "%s/%s", w->home, files[f]);
        if (mt_read_all(path, &s) != 0)
            continue;
        arr = mt_json_lines(s);
        json_array_foreach(arr, i, e)
        {
            const char *id = json_string_value(json_object_get(e, "msgId"));
            const char *fr = json_string_value(json_object_get(e, "from"));
            if (id && fr && !strcmp(id, ref) && !from)
                from = g_strdup(fr);
        }
        json_decref(arr);
        g_string_free(s, TRUE);
    }
    return from;
}

/* fleet_send with expiresIn: the send.json form of the file
 * mcp_fleet_send_path names (a reply's replyTo goes inside the JSON) */
static char *send_json_path(const char *as, const char *to)
{
    addr a;
    if (!addr_parse(to, &a))
        return NULL;
    if (as)
        return g_strdup_printf("agents/%s/to/%s.json", as, to);
    return a.kind == ADDR_LEAD    ? g_strdup_printf("peers/%s/send.json", to)
           : a.kind == ADDR_AGENT ? g_strdup_printf("agents/%s/send.json", to)
                                  : g_strdup_printf("groups/%s/send.json", a.name);
}

static json_t *t_send(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"to", "body", "replyTo", "expiresIn", NULL};
    json_t *err = mt_only_keys(args, "fleet_send", keys);
    json_t *jto = json_object_get(args, "to"), *jbody = json_object_get(args, "body");
    json_t *jref = json_object_get(args, "replyTo"), *entry, *res;
    json_t *jexp = json_object_get(args, "expiresIn");
    char *payload = NULL;
    const char *to, *ref = NULL;
    char path[PATH_MAX], what[160], *rel, *why, *from;
    GHashTable *before;
    int e;

    if (err)
        return err;
    if (!json_is_string(jto) || !json_is_string(jbody))
        return mt_fail("fleet_send: needs `to` (a coord_id, gid or group:<g>) and `body` (text), "
                       "both strings");
    to = json_string_value(jto);
    if (jref && !json_is_null(jref)) {
        if (!json_is_string(jref) || !mt_is_msgid(json_string_value(jref)))
            return mt_fail("fleet_send: replyTo must be a msgId (32 hex digits) from fleet_inbox");
        ref = json_string_value(jref);
    }
    if ((e = mt_who_me(w)))
        return mt_fail_errno(w, e, "fleet_send", NULL, NULL);
    if (jexp && !json_is_null(jexp) &&
        !(json_is_string(jexp) || (json_is_integer(jexp) && json_integer_value(jexp) > 0)))
        return mt_fail("fleet_send: expiresIn must be a duration such as \"90s\" or \"2m\", or "
                       "a number of seconds; nothing was sent");
    rel = mcp_fleet_send_path(w->as, w->me, to, ref, &why);
    if (!rel) {
        res = mt_fail("fleet_send: %s; nothing was sent", why);
        g_free(why);
        return res;
    }
    if (jexp && !json_is_null(jexp)) {
        /* the same one write as send.json takes, checked there (EINVAL) */
        json_t *j = json_pack("{s:O,s:O}", "body", jbody, "expiresIn", jexp);
        if (ref)
            json_object_set_new(j, "replyTo", json_string(ref));
        payload = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        g_free(rel);
        rel = send_json_path(w->as, to);
    }
    snprintf(path, sizeof path, "%s/%s", w->mnt, rel);
    g_free(rel);
    snprintf(what, sizeof what, "fleet_send to %s", to);
    if (json_string_length(jbody) == 0) {
        free(payload);
        return mt_fail("%s: the body is empty, so nothing was sent (the send file refuses an empty "
                       "message with EINVAL); send some text",
                       what);
    }
    /* a reply through the home's reply/ answers whoever sent ref: make
     * sure that is `to` (peers/<to>/reply/ checks it itself) */
    if (ref && (w->as || strchr(to, '@')) && (from = sender_of(w, ref))) {
        res = strcmp(from, to) ? mt_fail("%s: message %s is from %s, not from %s, and a reply goes "
                                         "to its sender; nothing was sent: give to: %s",
                                         what, ref, from, to, from)
                               : NULL;
        g_free(from);
        if (res) {
            free(payload);
            return res;
        }
    }
    before = sent_ids(w);
    e = payload ? mt_write_once(path, payload, strlen(payload))
                : mt_write_once(path, json_string_value(jbody), json_string_length(jbody));
    free(payload);
    if (e == EINVAL && jexp && !json_is_null(jexp)) {
        g_hash_table_destroy(before);
        return mt_fail("%s: expiresIn was refused (EINVAL): give a duration from 1s to the "
                       "fleet's message_ttl, such as \"90s\" or \"2m\"; nothing was sent",
                       what);
    }
    if (e == ETIMEDOUT && (entry = new_sent_entry(w, to, before))) {
        /* its msgId is what a resend needs */
        char *t = mcp_fleet_errno_text(e, what, w->mnt, w->home, to, NULL);
        res = mt_fail("%s. Its msgId: %s", t, json_string_value(json_object_get(entry, "msgId")));
        g_free(t);
        json_decref(entry);
        g_hash_table_destroy(before);
        return res;
    }
    if (e) {
        g_hash_table_destroy(before);
        /* a reply path that does not resolve: the peer may be unknown too */
        if (e == ENOENT && ref && !w->as && !strchr(to, '@')) {
            char peerdir[PATH_MAX];
            snprintf(peerdir, sizeof peerdir, "%s/peers/%s", w->mnt, to);
            if (access(peerdir, F_OK) < 0)
                ref = NULL;
        }
        return mt_fail_errno(w, e, what, to, ref);
    }
    entry = new_sent_entry(w, to, before);
    g_hash_table_destroy(before);
    if (!entry)
        return mt_ok_json(json_pack(
            "{s:b,s:n,s:s,s:s}", "sent", 1, "msgId", "to", to, "note",
            "the broker has it; its msgId could not be told apart in your sent log (another send "
            "to the same address ran at the same time): fleet_sent shows the latest"));
    res = json_pack("{s:b,s:O,s:O,s:O}", "sent", 1, "msgId", json_object_get(entry, "msgId"), "to",
                    json_object_get(entry, "to"), "state", json_object_get(entry, "state"));
    if (json_object_get(entry, "recipients"))
        json_object_set(res, "recipients", json_object_get(entry, "recipients"));
    if (ref)
        json_object_set_new(res, "replyTo", json_string(ref));
    json_decref(entry);
    return mt_ok_json(res);
}

/* "key: value" lines -> object of strings */
static json_t *status_fields(const GString *s)
{
    json_t *o = json_object();
    gchar **lines = g_strsplit(s->str, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        char *colon = strstr(*l, ": ");
        if (!colon || colon == *l)
            continue;
        *colon = '\0';
        json_object_set_new(o, *l, json_string(colon + 2));
    }
    g_strfreev(lines);
    return o;
}

/* the names in mnt/dir (an unreadable dir: none) */
static GPtrArray *dir_names(const char *mnt, const char *dir)
{
    char path[PATH_MAX];
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    DIR *d;
    snprintf(path, sizeof path, "%s/%s", mnt, dir);
    if (!(d = opendir(path)))
        return out;
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.')
            g_ptr_array_add(out, g_strdup(de->d_name));
    closedir(d);
    return out;
}

static int cmp_str_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* agents/: each with what its status says */
static json_t *list_agents(const who *w)
{
    static const char *const keys[] = {"host", "presence", "agent_state"};
    GPtrArray *names = dir_names(w->mnt, "agents");
    json_t *out = json_array();
    g_ptr_array_sort(names, cmp_str_ptr);
    for (guint i = 0; i < names->len; i++) {
        const char *gid = names->pdata[i];
        char path[PATH_MAX];
        GString *s = NULL;
        json_t *st, *a = json_pack("{s:s}", "gid", gid), *g;
        bool local;
        snprintf(path, sizeof path, "%s/agents/%s/status", w->mnt, gid);
        st = mt_read_all(path, &s) == 0 ? status_fields(s) : json_object();
        if (s)
            g_string_free(s, TRUE);
        for (size_t k = 0; k < G_N_ELEMENTS(keys); k++)
            if (json_object_get(st, keys[k]))
                json_object_set(a, keys[k], json_object_get(st, keys[k]));
        local = !g_strcmp0(json_string_value(json_object_get(st, "local")), "yes");
        json_object_set_new(a, "local", json_boolean(local));
        /* a local agent's status has no presence: it is served here */
        if (local && !json_object_get(a, "presence"))
            json_object_set_new(a, "presence", json_string("here"));
        json_object_set_new(a, "groups", json_array());
        g = json_object_get(st, "groups");
        if (json_is_string(g)) {
            gchar **gs = g_strsplit_set(json_string_value(g), ", ", -1);
            for (gchar **x = gs; *x; x++)
                if (**x && strcmp(*x, "-") && strcmp(*x, "none"))
                    json_array_append_new(json_object_get(a, "groups"), json_string(*x));
            g_strfreev(gs);
        }
        if (w->as && !strcmp(gid, w->as))
            json_object_set_new(a, "self", json_true());
        json_array_append_new(out, a);
        json_decref(st);
    }
    g_ptr_array_free(names, TRUE);
    return out;
}

/* groups/: each with its members */
static json_t *list_groups(const who *w)
{
    GPtrArray *names = dir_names(w->mnt, "groups");
    json_t *out = json_array();
    g_ptr_array_sort(names, cmp_str_ptr);
    for (guint i = 0; i < names->len; i++) {
        char path[PATH_MAX];
        GString *s = NULL;
        json_t *m = json_array();
        snprintf(path, sizeof path, "%s/groups/%s/members", w->mnt, (char *)names->pdata[i]);
        if (mt_read_all(path, &s) == 0) {
            gchar **lines = g_strsplit(s->str, "\n", -1);
            for (gchar **l = lines; *l; l++)
                if (**l)
                    json_array_append_new(m, json_string(*l));
            g_strfreev(lines);
            g_string_free(s, TRUE);
        }
        json_array_append_new(out,
                              json_pack("{s:s,s:s+,s:o}", "group", (char *)names->pdata[i], "to",
                                        GROUP_PREFIX, (char *)names->pdata[i], "members", m));
    }
    g_ptr_array_free(names, TRUE);
    return out;
}

static json_t *t_list(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {NULL};
    json_t *err = mt_only_keys(args, "fleet_list", keys);
    char path[PATH_MAX], lead[NAME_MAX_LEN + 1];
    GString *s = NULL;
    DIR *d;
    json_t *roster, *leads, *e;
    GHashTable *seen;
    size_t i;
    int rc;

    if (err)
        return err;
    if ((rc = mt_whoami(w->mnt, lead)) || (rc = mt_who_me(w)))
        return mt_fail_errno(w, rc, "fleet_list", NULL, NULL);
    snprintf(path, sizeof path, "%s/peers", w->mnt);
    d = opendir(path);
    if (!d)
        return mt_fail_errno(w, errno, "fleet_list", NULL, NULL);
    snprintf(path, sizeof path, "%s/roster", w->mnt);
    rc = mt_read_all(path, &s);
    roster = rc == 0 ? mt_json_lines(s) : json_array();
    if (s)
        g_string_free(s, TRUE);
    leads = json_array();
    seen = g_hash_table_new(g_str_hash, g_str_equal);
    json_array_foreach(roster, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "coord_id"));
        if (!id)
            continue;
        g_hash_table_add(seen, (gpointer)id);
        json_array_append(leads, e);
    }
    for (struct dirent *de; (de = readdir(d));) {
        const char *n = de->d_name;
        if (n[0] == '.' || g_hash_table_contains(seen, n))
            continue;
        json_array_append_new(leads,
                              json_pack("{s:s,s:b,s:b,s:s}", "coord_id", n, "self",
                                        !strcmp(n, lead), "inPeers", 1, "presence", "never"));
    }
    closedir(d);
    g_hash_table_destroy(seen);
    e = json_pack("{s:s,s:o,s:o,s:o,s:s}", "me", w->me, "leads", leads, "agents", list_agents(w),
                  "groups", list_groups(w), "note",
                  "send to a lead with inPeers true (by coord_id), to an agent by gid, to a group "
                  "as group:<g>; fleet_status {peer} tells whether a mailbox is being read");
    json_decref(roster);
    return mt_ok_json(e);
}

static json_t *t_status(void *ctx, json_t *args)
{
    who *w = ctx;
    static const char *const keys[] = {"peer", NULL};
    json_t *err = mt_only_keys(args, "fleet_status", keys);
    json_t *jpeer = json_object_get(args, "peer"), *res, *st;
    char path[PATH_MAX];
    GString *a = NULL, *b = NULL;
    int rc;

    if (err)
        return err;
    if (jpeer && !json_is_null(jpeer)) {
        const char *peer = json_string_value(jpeer);
        if (!peer)
            return mt_fail("fleet_status: peer must be a string (a coord_id or a gid)");
        if ((err = check_peer("fleet_status", "peer", peer)))
            return err;
        snprintf(path, sizeof path, "%s/%s/%s/status", w->mnt,
                 strchr(peer, '@') ? "agents" : "peers", peer);
        if ((rc = mt_read_all(path, &a)))
            return mt_fail_errno(w, rc, "fleet_status", peer, NULL);
        res = mcp_result_text(a->str, false);
        json_object_set_new(res, "structuredContent", status_fields(a));
        g_string_free(a, TRUE);
        return res;
    }
    snprintf(path, sizeof path, "%s/status", w->mnt);
    if ((rc = mt_read_all(path, &a)))
        return mt_fail_errno(w, rc, "fleet_status", NULL, NULL);
    snprintf(path, sizeof path, "%s/status", w->home);
    if ((rc = mt_read_all(path, &b))) {
        g_string_free(a, TRUE);
        return mt_fail_errno(w, rc, "fleet_status", NULL, NULL);
    }
    st = json_pack("{s:o,s:o}", "daemon", status_fields(a), "mailbox", status_fields(b));
    g_string_prepend(a, "# the daemon (status)\n");
    if (w->as)
        g_string_append_printf(a, "\n# your mailbox (agents/%s/status)\n%s", w->as, b->str);
    else
        g_string_append_printf(a, "\n# your mailbox (self/status)\n%s", b->str);
    res = mcp_result_text(a->str, false);
    json_object_set_new(res, "structuredContent", st);
    g_string_free(a, TRUE);
    g_string_free(b, TRUE);
    return res;
}

json_t *mcp_fleet_call(mcp_fleet *f, const mcp_tool *tool, json_t *args)
{
    who w = {.f = f, .mnt = f->mnt, .as = f->as};
    if (f->as)
        snprintf(w.home, sizeof w.home, "%s/agents/%s", f->mnt, f->as);
    else
        snprintf(w.home, sizeof w.home, "%s/self", f->mnt);
    if (!tool || !tool->run)
        return mt_fail("no tool %s", tool ? tool->name : "(none)");
    return tool->run(&w, args);
}

char *mcp_fleet_check_as(const char *mnt, const char *gid)
{
    char path[PATH_MAX], host[NAME_MAX_LEN + 1], lead[NAME_MAX_LEN + 1];
    int rc;
    if (!gid_valid(gid))
        return g_strdup_printf("'%s' is not an agent's gid (name@coord_id, the name "
                               "[a-z][a-z0-9_-]{0,31})",
                               gid);
    snprintf(path, sizeof path, "%s/agents/%s/inbox", mnt, gid);
    if (access(path, F_OK) == 0)
        return NULL;
    rc = errno;
    if ((rc == ENOENT || rc == ENOTDIR) && mt_whoami(mnt, lead) == 0) {
        id_host(gid, host);
        if (strcmp(host, lead))
            return g_strdup_printf("%s is not a local agent of the mount at %s: its host is %s, "
                                   "this mount's lead is %s; run `fleetfs mcp --as` on %s's host",
                                   gid, mnt, host, lead, gid);
        return g_strdup_printf("%s is not a local agent of the mount at %s (no agents/%s/inbox); "
                               "its operator registers it with agents=%.*s or `mkdir %s/agents/%s`",
                               gid, mnt, gid, (int)(strchr(gid, '@') - gid), gid, mnt, gid);
    }
    return g_strdup_printf("cannot check %s at %s (%s); is fleetfs mounted there?", gid, path,
                           g_strerror(rc));
}

int mcp_fleet_send_timeout(const char *mnt)
{
    char path[PATH_MAX];
    GString *s = NULL;
    const char *p;
    int t = 0;
    snprintf(path, sizeof path, "%s/status", mnt);
    if (mt_read_all(path, &s) != 0)
        return 0;
    p = strstr(s->str, "\nsend_timeout: ");
    if (p) {
        char *end;
        long v = strtol(p + strlen("\nsend_timeout: "), &end, 10);
        t = g_str_has_prefix(end, "ms") ? (int)((v + 999) / 1000) : (int)v;
    }
    g_string_free(s, TRUE);
    return t > 0 ? t : 0;
}
