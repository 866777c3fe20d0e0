/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/status.c — what the status files say, in words a person can act
 * on.  Every value is either known or says why it is not: "unknown" always
 * comes with a detail line, never a guessed number.
 */
#include "fleetfs/face/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/names.h"

#define PROBE_MAX_AGE_MS 1000

static void fmt_time(int64_t ms, char out[40])
{
    env_time_format(ms, out);
}

/* A consumer's state in status words; link: the connection's (a consumer
 * not set up yet is "starting" while connected). */
static const char *cons_words(br_cons consumer, br_link link)
{
    switch (consumer) {
    case BR_CONS_OK:
        return "ok";
    case BR_CONS_WAITING:
        return "waiting";
    case BR_CONS_EXCLUSIVE:
        return "refused";
    case BR_CONS_MISMATCH:
        return "mismatch";
    case BR_CONS_ERROR:
        return "error";
    case BR_CONS_NONE:
        break;
    }
    return link == BR_CONNECTED ? "starting" : "none (broker not connected)";
}

/* control: whether requests to start agents here are taken (the consumer
 * of control.<me>, SPEC section 11), in the consumer line's words. */
static void control_line(GString *s, fleet *f, const br_status *st)
{
    br_box_status b;

    if (!g_atomic_pointer_get(&f->spd)) {
        g_string_append(s, "control: off (the control service did not start: see the log; "
                           "requests to start agents here wait in their queue)\n");
        return;
    }
    if (!br_control_status(f->br, &b)) {
        g_string_append(s, "control: starting\n");
        return;
    }
    g_string_append_printf(s, "control: %s%s%s\n", cons_words(b.consumer, st->link),
                           b.reason[0] ? ": " : "", b.reason);
}

/* lead.<me>.dead: where the dead letters of this host's messages come home */
static void dead_line(GString *s, fleet *f, const br_status *st)
{
    br_box_status b;
    if (!br_dead_status(f->br, &b)) {
        g_string_append(s, "dead_letters: starting\n");
        return;
    }
    g_string_append_printf(s, "dead_letters: %s%s%s", cons_words(b.consumer, st->link),
                           b.reason[0] ? ": " : "", b.reason);
    /* the broker may have dropped the oldest (doc/protocol.md section 4) */
    if (b.found_full)
        g_string_append_printf(s,
                               "; found full (%u) %u time%s: older dead letters may have been "
                               "dropped by the broker",
                               b.full_count, b.found_full, b.found_full == 1 ? "" : "s");
    g_string_append_c(s, '\n');
}

static void injector_line(GString *s, fleet *f)
{
    char *w = mb_injector_words(f->mb);
    g_string_append_printf(s, "injector: %s\n", w ? w : "starting");
    g_free(w);
}

/* ---- presence (doc/presence.md) ---------------------------------------- */

static void presence_root_lines(GString *s, fleet *f)
{
    char w[200];
    if (!f->pr)
        return;
    pr_link_words(f->pr, w, sizeof w);
    g_string_append_printf(s, "presence: %s\nrejected_heartbeat: %llu\nrejected_agents: %llu\n", w,
                           (unsigned long long)pr_rejected(f->pr),
                           (unsigned long long)pr_rejected_agents(f->pr));
    pr_view_words(f->pr, w, sizeof w);
    g_string_append_printf(s, "fleet_view: %s\n", w);
    pr_census_words(f->pr, w, sizeof w);
    g_string_append_printf(s, "census: %s\n", w);
    if (f->ro) {
        ro_status rs;
        ro_get_status(f->ro, &rs);
        if (rs.fallback)
            g_string_append(s, "fleet_view_note: the broker refused a fleet_view=groups "
                               "binding (this login's permissions predate it), so this host "
                               "hears the whole fleet (see the log)\n");
    }
}

static void presence_peer_lines(GString *s, fleet *f, const char *peer)
{
    pr_info i;
    char w[80];
    if (!f->pr || !pr_get(f->pr, peer, &i)) {
        g_string_append(s, "presence: never\nhost: unknown\nversion: unknown\nagent: unknown\n");
        return;
    }
    pr_words(&i, w, sizeof w);
    g_string_append_printf(s, "presence: %s\nhost: %s\nversion: %s\nagent: %s\n", w,
                           i.host[0] ? i.host : "unknown", i.version[0] ? i.version : "unknown",
                           i.agent[0] ? i.agent : "unknown");
    if (i.last_at[0])
        g_string_append_printf(s, "last_heartbeat: %s\nstarted: %s\n", i.last_at, i.started_at);
    if (pr_link_connecting(f->pr))
        g_string_append(s, "presence_note: this lead's own roster connection is still "
                           "connecting, so no peer has been heard yet\n");
    else if (!pr_link_up(f->pr))
        g_string_append(s, "presence_note: this lead's own roster connection is down (see "
                           "status), so every peer looks stale from here\n");
}

static json_t *probe_json(fleet *f, const char *id, const char *key)
{
    char queue[96];
    br_probe p;
    br_inbox_queue(id, queue, sizeof queue);
    memset(&p, 0, sizeof p);
    if (!br_probe_cached(f->br, queue, &p) || !p.valid || !p.present)
        return json_null();
    return json_integer(strcmp(key, "messages") == 0 ? p.messages : p.consumers);
}

/* ["all", g...]: an entity's groups as its line in the roster shows them. */
static json_t *groups_json(const char *const *groups)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(GROUP_ALL));
    for (const char *const *g = groups; g && *g; g++)
        json_array_append_new(a, json_string(*g));
    return a;
}

static json_t *agent_json(const char *gid, bool local, bool announced, const char *state,
                          json_t *groups)
{
    json_t *j = json_object();
    const char *at = strchr(gid, '@');
    json_object_set_new(j, "gid", json_string(gid));
    json_object_set_new(j, "name", json_stringn(gid, at ? (size_t)(at - gid) : strlen(gid)));
    json_object_set_new(j, "local", json_boolean(local));
    json_object_set_new(j, "announced", json_boolean(announced));
    json_object_set_new(j, "state", state ? json_string(state) : json_null());
    json_object_set_new(j, "groups", groups);
    return j;
}

static int cmp_gid(gconstpointer a, gconstpointer b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "gid")),
                  json_string_value(json_object_get(*(json_t *const *)b, "gid")));
}

/* The self line's agents: every local one (registered here), announced or
 * not yet; their own words, as agents/<gid>/status has them. */
static json_t *local_agents_json(fleet *f, GHashTable *announced)
{
    GPtrArray *all = mb_entities(f->mb), *items = g_ptr_array_new();
    json_t *a = json_array();
    for (guint i = 1; i < all->len; i++) {
        mailbox *mb = all->pdata[i];
        char **groups = mb_groups(mb), *words = mb_injector_words(mb);
        g_ptr_array_add(items,
                        agent_json(mb_id(mb), true, g_hash_table_contains(announced, mb_id(mb)),
                                   words ? words : "starting",
                                   groups_json((const char *const *)groups)));
        g_free(words);
        g_strfreev(groups);
    }
    g_ptr_array_sort(items, cmp_gid);
    for (guint i = 0; i < items->len; i++)
        json_array_append_new(a, items->pdata[i]);
    g_ptr_array_free(items, TRUE);
    g_ptr_array_free(all, TRUE);
    return a;
}

/* A heard lead's agents, from what presence heard (sorted by gid). */
static json_t *heard_agents_json(GPtrArray *agents, const char *host)
{
    json_t *a = json_array();
    for (guint i = 0; i < agents->len; i++) {
        const pr_agent_info *ai = agents->pdata[i];
        const char *g[ENV_HB_MAX_GROUPS + 1];
        if (ai->local || strcmp(ai->host, host) != 0)
            continue;
        for (size_t k = 0; k < ai->n_groups; k++)
            g[k] = ai->groups[k];
        g[ai->n_groups] = NULL;
        json_array_append_new(a, agent_json(ai->gid, false, true, ai->state, groups_json(g)));
    }
    return a;
}

/* roster: one line per lead.  Besides what presence knows of the lead,
 * its groups and its agents: ours for the self line, what its heartbeats
 * said for another (both null when they carry no agents extension: never
 * heard, or a fleetfs before agents). */
GString *st_roster(fleet *f)
{
    GString *s = g_string_new(NULL);
    GPtrArray *all, *agents;
    GHashTable *announced;
    if (!f->pr)
        return s;
    all = pr_list(f->pr);
    agents = pr_agents(f->pr);
    announced = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint k = 0; k < agents->len; k++) {
        pr_agent_info *ai = agents->pdata[k];
        if (ai->local)
            g_hash_table_add(announced, ai->gid);
    }
    for (guint k = 0; k < all->len; k++) {
        pr_info *i = all->pdata[k];
        json_t *j = json_object();
        char *line, *agent = NULL, **groups = NULL;
        if (i->self) {
            /* our own words, not the echo of our last heartbeat */
            agent = mb_injector_words(f->mb);
            g_strlcpy(i->host, f->host, sizeof i->host);
            g_strlcpy(i->version, FLEETFS_VERSION, sizeof i->version);
            groups = mb_groups(f->mb);
        } else {
            groups = pr_lead_groups(f->pr, i->id);
        }
        json_object_set_new(j, "coord_id", json_string(i->id));
        json_object_set_new(j, "self", json_boolean(i->self));
        json_object_set_new(j, "configured", json_boolean(i->configured));
        json_object_set_new(j, "inPeers", json_boolean(i->listed));
        json_object_set_new(j, "host", i->host[0] ? json_string(i->host) : json_null());
        json_object_set_new(j, "version", i->version[0] ? json_string(i->version) : json_null());
        json_object_set_new(j, "presence", json_string(pr_state_name(i->state)));
        json_object_set_new(j, "lastHeartbeat",
                            i->last_at[0] ? json_string(i->last_at) : json_null());
        json_object_set_new(j, "ageSeconds",
                            i->age_ms >= 0 ? json_integer(i->age_ms / 1000) : json_null());
        json_object_set_new(j, "startedAt",
                            i->started_at[0] ? json_string(i->started_at) : json_null());
        json_object_set_new(j, "messages", probe_json(f, i->id, "messages"));
        json_object_set_new(j, "consumers", probe_json(f, i->id, "consumers"));
        json_object_set_new(j, "agent",
                            agent         ? json_string(agent)
                            : i->agent[0] ? json_string(i->agent)
                                          : json_null());
        json_object_set_new(j, "groups",
                            groups ? groups_json((const char *const *)groups) : json_null());
        json_object_set_new(j, "agents",
                            i->self  ? local_agents_json(f, announced)
                            : groups ? heard_agents_json(agents, i->id)
                                     : json_null());
        line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (line)
            g_string_append_printf(s, "%s\n", line);
        free(line);
        g_free(agent);
        g_strfreev(groups);
        json_decref(j);
    }
    g_hash_table_destroy(announced);
    g_ptr_array_unref(agents);
    g_ptr_array_unref(all);
    return s;
}

GString *st_root(fleet *f)
{
    GString *s = g_string_new(NULL);
    br_status st;
    mb_counters n;
    unsigned held;
    GString *rej;
    char since[40];
    int64_t up = (g_get_monotonic_time() / 1000 - f->started_ms) / 1000;

    br_get_status(f->br, &st);
    mb_counters_total(f->mb, &n, &held); /* the lead's and its agents' */
    fmt_time(st.since_ms, since);
    if (f->opts->insecure) {
        char *w = mb_security_words(f->mb);
        g_string_append_printf(s, "security: %s\n", w);
        g_free(w);
    }
    g_string_append_printf(s, "coord_id: %s\nhost: %s\nversion: %s\n", f->opts->coord_id, f->host,
                           FLEETFS_VERSION);
    if (st.link == BR_CONNECTED && st.blocked)
        g_string_append_printf(s, "broker: blocked: %s\n", st.blocked_reason);
    else if (st.link == BR_CONNECTED)
        g_string_append_printf(s, "broker: connected\n");
    else
        g_string_append_printf(s, "broker: %s%s%s\n", br_link_name(st.link),
                               st.reason[0] ? ": " : "", st.reason);
    g_string_append_printf(s, "broker_uri: %s\nvhost: %s\ntls: %s\nbroker_since: %s\n",
                           st.uri[0] ? st.uri : "(none yet)", st.vhost[0] ? st.vhost : "(from URI)",
                           st.tls ? "on" : "off", since);
    if (f->uri_defaulted)
        g_string_append_printf(s,
                               "broker_uri_note: %s is unset and no broker_uri is configured: "
                               "trying the default\n",
                               f->opts->broker_uri_env);
    if (st.link == BR_CONNECTED && st.node[0])
        g_string_append_printf(s, "broker_node: %s (%s; heartbeat %d s)\nqueue_type: %s\n", st.node,
                               st.server, st.heartbeat_s, st.queue_type);
    else
        g_string_append_printf(s, "broker_node: none (not connected)\n");
    g_string_append_printf(s, "consumer: %s%s%s\n", cons_words(st.consumer, st.link),
                           st.consumer_reason[0] ? ": " : "", st.consumer_reason);
    control_line(s, f, &st);
    dead_line(s, f, &st);
    {
        char *w = mb_security_words(f->mb);
        g_string_append_printf(s, "signing: %s\n", f->opts->insecure ? "off" : w);
        g_free(w);
    }
    {
        char *w = mb_state_words(f->mb);
        g_string_append_printf(s, "state_dir: %s\n", w);
        g_free(w);
    }
    g_string_append_printf(s, "uptime: %llds\n", (long long)up);
    /* the limits a writer of send meets (fleetfs mcp bounds its waits by send_timeout) */
    if (f->opts->send_timeout_ms % 1000 == 0)
        g_string_append_printf(s, "send_timeout: %llds\n",
                               (long long)(f->opts->send_timeout_ms / 1000));
    else
        g_string_append_printf(s, "send_timeout: %lldms\n", (long long)f->opts->send_timeout_ms);
    g_string_append_printf(s, "max_message: %zu\n", f->opts->max_message);
    g_string_append_printf(s,
                           "sent: %llu\nreceived: %llu\nheld: %u\ninjected: %llu\nacked: %llu\n"
                           "rejected: %llu\ndead_lettered: %llu\nreceipts_waiting: %llu\n"
                           "receipts_dropped: %llu\ndead_letters_home: %llu\n"
                           "dead_letters_foreign: %llu\n",
                           (unsigned long long)n.sent, (unsigned long long)n.received, held,
                           (unsigned long long)n.injected, (unsigned long long)n.acked,
                           (unsigned long long)n.rejected, (unsigned long long)n.dead_lettered,
                           (unsigned long long)n.receipts_pending,
                           (unsigned long long)n.receipts_dropped, (unsigned long long)n.dead_home,
                           (unsigned long long)n.dead_foreign);
    /* consumed unread here: past their expiresAt (issue 36) */
    g_string_append_printf(s, "expired: %llu\n", (unsigned long long)n.expired);
    rej = mb_render_rejections(f->mb);
    g_string_append(s, rej->str);
    g_string_free(rej, TRUE);
    injector_line(s, f);
    presence_root_lines(s, f);
    return s;
}

/* The probe of queue, fresh or cached; false when nothing is known. */
static bool get_probe(fleet *f, const char *queue, bool fresh, br_probe *p)
{
    if (fresh) {
        fe_code r = br_probe_queue(f->br, queue, PROBE_MAX_AGE_MS, f->opts->probe_timeout_ms, p);
        return r == FE_OK || (p->valid && r == FE_NO_MAILBOX);
    }
    memset(p, 0, sizeof *p);
    if (!br_probe_cached(f->br, queue, p))
        return false;
    return p->valid;
}

static void probe_age(GString *s, const br_probe *p)
{
    int64_t age = g_get_monotonic_time() / 1000 - p->at_ms;
    g_string_append_printf(s, "probed: %lld.%01llds ago\n", (long long)(age / 1000),
                           (long long)((age % 1000) / 100));
}

static void unknown_detail(GString *s, fleet *f, const br_probe *p)
{
    br_status st;
    br_get_status(f->br, &st);
    if (st.link != BR_CONNECTED)
        g_string_append_printf(s, "detail: broker %s%s%s\n", br_link_name(st.link),
                               st.reason[0] ? ": " : "", st.reason);
    else
        g_string_append_printf(s, "detail: %s\n", p->detail[0] ? p->detail : "not probed yet");
}

GString *st_lead(fleet *f, bool fresh)
{
    GString *s = g_string_new(NULL);
    char queue[96];
    br_probe p;
    br_status st;
    mb_counters n;
    unsigned held;

    br_inbox_queue(f->opts->coord_id, queue, sizeof queue);
    mb_counters_get(f->mb, &n, &held);
    br_get_status(f->br, &st);
    g_string_append_printf(s, "mailbox: %s\n", queue);
    if (get_probe(f, queue, fresh, &p) && p.present)
        g_string_append_printf(s, "messages: %u\n", p.messages);
    else
        g_string_append_printf(s, "messages: unknown\n");
    g_string_append_printf(s, "held: %u\n", held);
    {
        char **groups = mb_groups(f->mb), *joined = g_strjoinv(" ", groups);
        g_string_append_printf(s, "groups: all%s%s\n", *joined ? " " : "", joined);
        g_free(joined);
        g_strfreev(groups);
    }
    if (p.valid && p.present)
        g_string_append_printf(s, "consumers: %u\n", p.consumers);
    else
        g_string_append_printf(s, "consumers: unknown\n");
    g_string_append_printf(s, "consumer: %s%s%s\n", cons_words(st.consumer, st.link),
                           st.consumer_reason[0] ? ": " : "", st.consumer_reason);
    injector_line(s, f);
    if (p.valid)
        probe_age(s, &p);
    else
        unknown_detail(s, f, &p);
    return s;
}

GString *st_peer(fleet *f, const char *peer, bool fresh)
{
    GString *s = g_string_new(NULL);
    char queue[96];
    br_probe p;
    bool known;

    br_inbox_queue(peer, queue, sizeof queue);
    known = get_probe(f, queue, fresh, &p);
    g_string_append_printf(s, "peer: %s\n", peer);
    if (!known) {
        g_string_append_printf(s, "mailbox: unknown\nmessages: unknown\nconsumers: unknown\n"
                                  "state: unknown\n");
    } else if (!p.present) {
        g_string_append_printf(s, "mailbox: absent\nmessages: 0\nconsumers: 0\nstate: absent\n");
        if (p.create_refused)
            g_string_append_printf(s,
                                   "detail: no mailbox: that host was never added (this broker "
                                   "login may not create %s; fleetfs-broker host add %s)\n",
                                   queue, peer);
    } else {
        g_string_append_printf(s, "mailbox: present\nmessages: %u\nconsumers: %u\nstate: %s\n",
                               p.messages, p.consumers,
                               p.consumers > 0 ? "reading" : "not-reading");
    }
    presence_peer_lines(s, f, peer);
    if (known)
        probe_age(s, &p);
    else
        unknown_detail(s, f, &p);
    return s;
}

/* agents/<gid>/status (SPEC 10): its mailbox as the broker says, its
 * presence (its host's), host, agent state and groups; for a local agent
 * also what fleetfs holds and its injector. */
GString *st_agent(fleet *f, const char *gid, bool fresh)
{
    GString *s = g_string_new(NULL);
    char queue[ADDR_MAX_LEN + 16], host[NAME_MAX_LEN + 1] = "", w[200];
    br_probe p;
    bool known;
    mailbox *mb = mb_find(f->mb, gid);
    pr_agent_info ai;
    bool heard = f->pr && pr_agent_get(f->pr, gid, &ai);

    br_agent_queue(gid, queue, sizeof queue);
    id_host(gid, host);
    known = get_probe(f, queue, fresh, &p);
    g_string_append_printf(s, "agent: %s\nhost: %s\nlocal: %s\n", gid, host, mb ? "yes" : "no");
    if (!known)
        g_string_append_printf(s, "mailbox: unknown\nmessages: unknown\nconsumers: unknown\n");
    else if (!p.present)
        g_string_append_printf(s, "mailbox: absent\nmessages: 0\nconsumers: 0\n");
    else
        g_string_append_printf(s, "mailbox: present\nmessages: %u\nconsumers: %u\n", p.messages,
                               p.consumers);
    if (mb) {
        mb_counters n;
        unsigned held;
        char **groups = mb_groups(mb), *joined = g_strjoinv(" ", groups);
        char *inj = mb_injector_words(mb);
        mb_counters_get(mb, &n, &held);
        g_string_append_printf(s, "held: %u\ngroups: all%s%s\ninjector: %s\n", held,
                               *joined ? " " : "", joined, inj ? inj : "starting");
        g_string_append_printf(s,
                               "sent: %llu\nreceived: %llu\ninjected: %llu\nacked: %llu\n"
                               "rejected: %llu\nexpired: %llu\n",
                               (unsigned long long)n.sent, (unsigned long long)n.received,
                               (unsigned long long)n.injected, (unsigned long long)n.acked,
                               (unsigned long long)n.rejected, (unsigned long long)n.expired);
        g_free(inj);
        g_free(joined);
        g_strfreev(groups);
        mb_unref(mb);
    } else if (heard) {
        pr_agent_words(&ai, w, sizeof w);
        g_string_append_printf(s, "presence: %s\nagent_state: %s\ngroups: all", w, ai.state);
        for (size_t i = 0; i < ai.n_groups; i++)
            g_string_append_printf(s, " %s", ai.groups[i]);
        g_string_append_c(s, '\n');
    } else {
        g_string_append_printf(s, "presence: never (no heartbeat of %s has named it)\n", host);
    }
    if (known)
        probe_age(s, &p);
    else
        unknown_detail(s, f, &p);
    return s;
}

void st_probe(fleet *f, const char *id)
{
    char queue[96];
    br_probe p;
    br_inbox_queue(id, queue, sizeof queue);
    /* timeout 0: hand the probe to the broker thread and go on; its answer
     * lands in the cache the status files read.  The notifier that calls
     * this never waits on the broker. */
    br_probe_queue(f->br, queue, PROBE_MAX_AGE_MS - 100, 0, &p);
}

const char *st_readme(void)
{
    return "This is a fleetfs mount: the mailboxes of a fleet's lead agents as files.\n"
           "\n"
           "  status                  this daemon: broker link, counters, injector\n"
           "  self                    -> leads/<this lead>\n"
           "  leads/<me>/inbox        messages waiting for this lead, JSON Lines, oldest first;\n"
           "                          an open inbox keeps growing with arrivals (tail -f works)\n"
           "  leads/<me>/ack          write a msgId per line, or 'all', to consume messages\n"
           "  leads/<me>/sent         what this lead sent, with each message's delivery state\n"
           "  leads/<me>/history      the last messages consumed here, and how\n"
           "  leads/<me>/status       own mailbox: messages in the broker, held, consumers\n"
           "  leads/<me>/resend       write the msgId of an unconfirmed send to publish it again\n"
           "  peers/<id>/send         one write is one message to <id>\n"
           "  peers/<id>/reply/<msgId>  one write answers message <msgId> from <id>\n"
           "  peers/<id>/ask          open read-write: one write is a question, a read waits\n"
           "                          for <id>'s answer (ETIMEDOUT at its lifetime, 2m);\n"
           "                          ask.json takes {body, expiresIn}; agents/<gid>/ask too"
           "  peers/<id>/status       the peer's mailbox: present/absent, backlog, readers;\n"
           "                          its presence (live/stale/left/never) and agent state\n"
           "  roster                  every lead this host hears, one JSON line each, its groups\n"
           "                          and its agents (jq reads it)\n"
           "  census                  a write hears the whole fleet once (one interval; at most\n"
           "                          one per census_every, else EAGAIN), a read its roster lines\n"
           "  agents/<gid>/send       one write is one message from this lead to that agent\n"
           "  agents/<gid>/status     the agent's mailbox, presence, state and groups\n"
           "  agents/<local gid>/     a local agent's home: inbox ack history sent resend reply/,\n"
           "                          and to/<id or group:g> (to/<id>.json as send.json) to\n"
           "                          send as that agent; to/<id>.ask asks as it; claims/\n"
           "                          as below, taken and released as that agent\n"
           "  groups/<g>/send         one message to every member of g (one publish)\n"
           "  groups/<g>/members      the ids in g, one per line\n"
           "  hosts/<h>/status        presence, last heartbeat, profiles offered, agents there\n"
           "  hosts/<h>/spawn         one JSON object {profile, name, dir?, brief?}: ask h to\n"
           "                          start an agent (h's own profile decides what runs)\n"
           "  hosts/<h>/spawns        what became of each request to h, one JSON line each\n"
           "  hosts/<h>/stop          write an agent id name@h: ask h to stop it\n"
           "  claims/                 the fleet's claims: mkdir claims/NAME takes NAME for the\n"
           "                          whole fleet (a lease), rmdir releases; NAME/holder (JSON)\n"
           "\n"
           "Errors of a write to send: EINVAL empty or not UTF-8, EMSGSIZE too large,\n"
           "ECOMM broker not connected, ETIMEDOUT no confirm in time (state unknown:\n"
           "it is unconfirmed in sent; write its msgId to resend, never send it anew),\n"
           "ENOSPC peer mailbox full, ENXIO peer mailbox missing and not creatable.\n"
           "Wake on arrivals: inotifywait -e modify leads/<me>/inbox, or tail -f it.\n"
           "Wake on peers coming and going: inotifywait -e create,delete,attrib peers\n"
           "See fleetfs(1).\n";
}
