/* fleetfs/status.c — what the status files say, in words a person can act
 * on.  Every value is either known or says why it is not: "unknown" always
 * comes with a detail line, never a guessed number.
 */
#include "fleetfs/status.h"

#include <stdio.h>
#include <string.h>

#include "fleetfs/envelope.h"

#define PROBE_MAX_AGE_MS 1000

static void fmt_time(int64_t ms, char out[40])
{
    env_time_format(ms, out);
}

static const char *cons_words(const br_status *st)
{
    switch (st->consumer) {
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
    return st->link == BR_CONNECTED ? "starting" : "none (broker not connected)";
}

static void injector_line(GString *s, fleet *f)
{
    char *w = mb_injector_words(f->mb);
    g_string_append_printf(s, "injector: %s\n", w ? w : "starting");
    g_free(w);
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
    mb_counters_get(f->mb, &n, &held);
    fmt_time(st.since_ms, since);
    if (f->opts->insecure) {
        char *w = mb_security_words(f->mb);
        g_string_append_printf(s, "security: %s\n", w);
        g_free(w);
    }
    g_string_append_printf(s, "coord_id: %s\nhost: %s\nversion: %s\n", f->opts->coord_id, f->host,
                           FLEETFS_VERSION);
    if (st.link == BR_CONNECTED)
        g_string_append_printf(s, "broker: connected\n");
    else
        g_string_append_printf(s, "broker: %s%s%s\n", br_link_name(st.link),
                               st.reason[0] ? ": " : "", st.reason);
    g_string_append_printf(s, "broker_uri: %s\nvhost: %s\ntls: %s\nbroker_since: %s\n",
                           st.uri[0] ? st.uri : "(none yet)", st.vhost[0] ? st.vhost : "(from URI)",
                           st.tls ? "on" : "off", since);
    g_string_append_printf(s, "consumer: %s%s%s\n", cons_words(&st),
                           st.consumer_reason[0] ? ": " : "", st.consumer_reason);
    {
        char *w = mb_security_words(f->mb);
        g_string_append_printf(s, "signing: %s\n", f->opts->insecure ? "off" : w);
        g_free(w);
    }
    g_string_append_printf(s, "uptime: %llds\n", (long long)up);
    g_string_append_printf(s,
                           "sent: %llu\nreceived: %llu\nheld: %u\ninjected: %llu\nacked: %llu\n"
                           "rejected: %llu\ndead_lettered: %llu\nreceipts_waiting: %llu\n",
                           (unsigned long long)n.sent, (unsigned long long)n.received, held,
                           (unsigned long long)n.injected, (unsigned long long)n.acked,
                           (unsigned long long)n.rejected, (unsigned long long)n.dead_lettered,
                           (unsigned long long)n.receipts_pending);
    rej = mb_render_rejections(f->mb);
    g_string_append(s, rej->str);
    g_string_free(rej, TRUE);
    injector_line(s, f);
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
    if (p.valid && p.present)
        g_string_append_printf(s, "consumers: %u\n", p.consumers);
    else
        g_string_append_printf(s, "consumers: unknown\n");
    g_string_append_printf(s, "consumer: %s%s%s\n", cons_words(&st),
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
    } else {
        g_string_append_printf(s, "mailbox: present\nmessages: %u\nconsumers: %u\nstate: %s\n",
                               p.messages, p.consumers,
                               p.consumers > 0 ? "reading" : "not-reading");
    }
    g_string_append_printf(s, "presence: unknown (heartbeats are not built yet)\n"
                              "host: unknown\nversion: unknown\n");
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
           "  peers/<id>/status       the peer's mailbox: present/absent, backlog, readers\n"
           "\n"
           "Errors of a write to send: EINVAL empty or not UTF-8, EMSGSIZE too large,\n"
           "ECOMM broker not connected, ETIMEDOUT no confirm in time (state unknown:\n"
           "it is unconfirmed in sent; write its msgId to resend, never send it anew),\n"
           "ENOSPC peer mailbox full, ENXIO peer mailbox missing and not creatable.\n"
           "Wake on arrivals: inotifywait -e modify leads/<me>/inbox, or tail -f it.\n"
           "See fleetfs(1).\n";
}
