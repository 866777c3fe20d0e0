/* SPDX-License-Identifier: Apache-2.0 */
/* broker/death.c — a dead letter's x-death, read (death.h). */
#include "broker/death.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void br_dead_queue(const char *coord_id, char *out, size_t n)
{
    snprintf(out, n, "lead.%s.dead", coord_id);
}

static bool key_is(const amqp_table_entry_t *e, const char *k)
{
    size_t n = strlen(k);
    return e->key.len == n && memcmp(e->key.bytes, k, n) == 0;
}

/* A string value (long or short string, or bytes) into out. */
static void str_of(const amqp_field_value_t *v, char *out, size_t n)
{
    if (v->kind != AMQP_FIELD_KIND_UTF8 && v->kind != AMQP_FIELD_KIND_BYTES)
        return;
    snprintf(out, n, "%.*s", (int)v->value.bytes.len, (const char *)v->value.bytes.bytes);
    /* a NUL or a control character is not the broker's: cut it off there */
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = '\0';
            break;
        }
}

/* Any integer kind (and a timestamp) as int64; false for anything else. */
static bool int_of(const amqp_field_value_t *v, int64_t *out)
{
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8:
        *out = v->value.i8;
        return true;
    case AMQP_FIELD_KIND_U8:
        *out = v->value.u8;
        return true;
    case AMQP_FIELD_KIND_I16:
        *out = v->value.i16;
        return true;
    case AMQP_FIELD_KIND_U16:
        *out = v->value.u16;
        return true;
    case AMQP_FIELD_KIND_I32:
        *out = v->value.i32;
        return true;
    case AMQP_FIELD_KIND_U32:
        *out = v->value.u32;
        return true;
    case AMQP_FIELD_KIND_I64:
        *out = v->value.i64;
        return true;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP:
        *out = v->value.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->value.u64;
        return true;
    default:
        return false;
    }
}

/* The latest death: the first table of x-death. */
static void latest_death(const amqp_field_value_t *v, br_death *d)
{
    const amqp_table_t *t;
    if (v->kind != AMQP_FIELD_KIND_ARRAY || v->value.array.num_entries < 1 ||
        v->value.array.entries[0].kind != AMQP_FIELD_KIND_TABLE)
        return;
    t = &v->value.array.entries[0].value.table;
    for (int i = 0; i < t->num_entries; i++) {
        const amqp_table_entry_t *e = &t->entries[i];
        if (key_is(e, "reason"))
            str_of(&e->value, d->reason, sizeof d->reason);
        else if (key_is(e, "queue"))
            str_of(&e->value, d->queue, sizeof d->queue);
        else if (key_is(e, "time"))
            int_of(&e->value, &d->time_s);
        else if (key_is(e, "count"))
            int_of(&e->value, &d->count);
    }
}

void br_death_parse(const amqp_basic_properties_t *props, br_death *out)
{
    char first_reason[sizeof out->reason] = "", first_queue[sizeof out->queue] = "";
    const amqp_table_t *h;

    memset(out, 0, sizeof *out);
    if (!props)
        return;
    if (props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        str_of(
            &(amqp_field_value_t){.kind = AMQP_FIELD_KIND_BYTES, .value.bytes = props->message_id},
            out->msg_id, sizeof out->msg_id);
    if (!(props->_flags & AMQP_BASIC_HEADERS_FLAG))
        return;
    h = &props->headers;
    for (int i = 0; i < h->num_entries; i++) {
        const amqp_table_entry_t *e = &h->entries[i];
        if (key_is(e, "x-death"))
            latest_death(&e->value, out);
        else if (key_is(e, BR_HEADER_HOST))
            str_of(&e->value, out->host, sizeof out->host);
        else if (key_is(e, "x-first-death-reason"))
            str_of(&e->value, first_reason, sizeof first_reason);
        else if (key_is(e, "x-first-death-queue"))
            str_of(&e->value, first_queue, sizeof first_queue);
    }
    if (!out->reason[0] && !out->queue[0]) {
        memcpy(out->reason, first_reason, sizeof out->reason);
        memcpy(out->queue, first_queue, sizeof out->queue);
    }
}

void br_death_words(const br_death *d, char *out, size_t n)
{
    char at[48] = "";
    const char *q = d->queue[0] ? d->queue : "an unnamed queue";
    if (d->time_s > 0) {
        struct tm tm;
        time_t t = (time_t)d->time_s;
        if (gmtime_r(&t, &tm))
            strftime(at, sizeof at, " at %Y-%m-%dT%H:%M:%SZ", &tm);
    }
    if (!strcmp(d->reason, "expired"))
        snprintf(out, n, "expired in %s%s (unread past its lifetime)", q, at);
    else if (!strcmp(d->reason, "rejected"))
        snprintf(out, n, "rejected by the reader of %s%s", q, at);
    else if (!strcmp(d->reason, "maxlen"))
        snprintf(out, n, "maxlen: dropped from %s%s (the queue was full)", q, at);
    else if (d->reason[0])
        snprintf(out, n, "%s in %s%s", d->reason, q, at);
    else
        snprintf(out, n, "dead-lettered from %s%s (the broker gave no reason)", q, at);
}
