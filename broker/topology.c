/* SPDX-License-Identifier: Apache-2.0 */
/* broker/topology.c — the one table of mailbox arguments.
 *
 * Types matter as much as values: RabbitMQ compares arguments by value, and
 * a compatible peer must send the same AMQP field types (doc/protocol.md):
 * integers as signed 64-bit ('l'), strings as long strings ('S').
 */
#include "broker/topology.h"

#include "broker/death.h"

#include <stdio.h>
#include <string.h>

#include <glib.h>

static amqp_table_entry_t entry_i64(const char *key, int64_t v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_I64;
    e.value.value.i64 = v;
    return e;
}

static amqp_table_entry_t entry_str(const char *key, const char *v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(v);
    return e;
}

amqp_table_t topo_mailbox_args(const br_config *cfg, amqp_table_entry_t *entries)
{
    amqp_table_t t;
    entries[0] = entry_i64("x-max-length", cfg->max_length);
    entries[1] = entry_str("x-overflow", "reject-publish");
    entries[2] = entry_i64("x-message-ttl", cfg->message_ttl_ms);
    entries[3] = entry_str("x-dead-letter-exchange", TOPO_DLX);
    entries[4] = entry_str("x-queue-type", cfg->queue_type ? cfg->queue_type : "classic");
    t.num_entries = TOPO_MAILBOX_ARGS;
    t.entries = entries;
    return t;
}

amqp_table_t topo_agent_args(const br_config *cfg, amqp_table_entry_t *entries, bool expires)
{
    amqp_table_t t = topo_mailbox_args(cfg, entries);
    if (expires && cfg->agent_expires_ms > 0)
        entries[t.num_entries++] = entry_i64("x-expires", cfg->agent_expires_ms);
    return t;
}

amqp_table_t topo_dlq_args(const br_config *cfg, amqp_table_entry_t *entries)
{
    amqp_table_t t;
    entries[0] = entry_i64("x-max-length", TOPO_DLQ_MAX_LENGTH);
    entries[1] = entry_str("x-queue-type", cfg->queue_type ? cfg->queue_type : "classic");
    t.num_entries = TOPO_DLQ_ARGS;
    t.entries = entries;
    return t;
}

amqp_table_t topo_dead_binding(const char *host, amqp_table_entry_t *entries)
{
    amqp_table_t t;
    entries[0] = entry_str("x-match", "all");
    entries[1] = entry_str(BR_HEADER_HOST, host);
    t.num_entries = 2;
    t.entries = entries;
    return t;
}

amqp_table_t topo_roster_args(amqp_table_entry_t *entries)
{
    amqp_table_t t;
    entries[0] = entry_i64("x-max-length", TOPO_ROSTER_QUEUE_MAX);
    t.num_entries = TOPO_ROSTER_ARGS;
    t.entries = entries;
    return t;
}

void topo_roster_key(const char *host, const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "roster.%s.%s", host && host[0] ? host : "_", coord_id);
}

static size_t key_len(const char *host, const char *const *groups, size_t from, size_t to,
                      const char *coord_id)
{
    size_t len = strlen("roster.") + strlen(host) + 1 + strlen(coord_id);
    for (size_t i = from; i < to; i++)
        len += strlen(TOPO_ROSTER_GROUP_WORD) + strlen(groups[i]) + 1;
    return len;
}

GPtrArray *topo_roster_keys(const char *host, const char *const *groups, const char *coord_id)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    size_t n = groups ? g_strv_length((gchar **)groups) : 0, i = 0;

    if (!host || !host[0] || key_len(host, groups, 0, n, coord_id) > TOPO_ROSTER_KEY_MAX)
        host = "_";
    do {
        GString *k = g_string_new("roster.");
        size_t j = i;
        g_string_append(k, host);
        /* as many groups as fit, at least one (a group name is short) */
        while (j < n &&
               (j == i || key_len(host, groups, i, j + 1, coord_id) <= TOPO_ROSTER_KEY_MAX))
            j++;
        for (; i < j; i++)
            g_string_append_printf(k, ".%s%s", TOPO_ROSTER_GROUP_WORD, groups[i]);
        g_string_append_printf(k, ".%s", coord_id);
        g_ptr_array_add(out, g_string_free(k, FALSE));
    } while (i < n);
    return out;
}

void topo_roster_bind_lead(const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "roster.#.%s", coord_id);
}

void topo_roster_self_key(const char *host, const char *coord_id, char *out, size_t n)
{
    if (!host || !host[0] ||
        strlen(host) + 2 * strlen(coord_id) + sizeof "roster..s=." > TOPO_ROSTER_KEY_MAX + 1)
        host = "_";
    snprintf(out, n, "roster.%s.%s%s.%s", host, TOPO_ROSTER_SELF_WORD, coord_id, coord_id);
}

void topo_roster_bind_self(const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "roster.#.%s%s.#", TOPO_ROSTER_SELF_WORD, coord_id);
}

void topo_roster_bind_group(const char *group, char *out, size_t n)
{
    snprintf(out, n, "roster.#.%s%s.#", TOPO_ROSTER_GROUP_WORD, group);
}

bool topo_roster_group_due(int64_t now, int64_t last_group, int64_t last_group_iv, int64_t iv,
                           int64_t group_iv, uint32_t phase, bool forced)
{
    int64_t gi = last_group_iv > 0 ? MIN(last_group_iv, group_iv) : group_iv, off;

    if (forced || last_group < 0 || gi <= iv)
        return true;
    if (now < last_group || now - last_group >= gi + iv)
        return true; /* the clock jumped back, or a beat was missed */
    off = (int64_t)(phase % (uint32_t)gi);
    return (now + off) / gi != (last_group + off) / gi;
}

uint32_t topo_group_phase(const char *group)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)group; c && *c; c++)
        h = h * 33 + *c;
    return group ? h : 0;
}

bool topo_group_beat(topo_group_beats *g, int64_t mono, int64_t wall, int64_t iv, int64_t group_iv,
                     uint32_t phase, bool forced)
{
    forced = forced || g->force || mono < g->until;
    if (!topo_roster_group_due(wall, g->last, g->last_iv, iv, MAX(group_iv, iv), phase, forced))
        return false;
    g->last = wall;
    g->last_iv = MAX(group_iv, iv);
    g->force = false;
    return true;
}

void topo_roster_ask_key(const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "%s%s", TOPO_ROSTER_ASK_PREFIX, coord_id);
}

void topo_consumer_queue(bool inbox, const char *id, char *out, size_t n)
{
    snprintf(out, n, "lead.%s.%s", id, inbox ? "inbox" : "receipts");
}

void br_inbox_queue(const char *id, char *out, size_t n)
{
    topo_consumer_queue(true, id, out, n);
}

void br_agent_queue(const char *gid, char *out, size_t n)
{
    snprintf(out, n, "agent.%s.inbox", gid);
}

void br_control_queue(const char *id, char *out, size_t n)
{
    snprintf(out, n, "control.%s", id);
}

void topo_receipts_queue(const char *id, char *out, size_t n)
{
    topo_consumer_queue(false, id, out, n);
}

void topo_roster_queue(const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "roster.%s.%08x%08x", coord_id, g_random_int(), g_random_int());
}
