/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/reply.c — herdr's replies, which are untrusted input: the reply
 * envelope (hd_parse_reply), the error codes, and the pane and agent
 * records.  Pure functions over JSON text, so captured lines are unit-tested
 * and fuzzed (tests/fuzz/fuzz_herdr_reply.c) without a socket.  Strings
 * herdr sends for display (labels, titles, error messages) pass through
 * san_text before they are stored, so they are safe to log or render.
 * The transport (connect, one request per connection, deadlines) is
 * client.c's. */
#include "herdr/client.h"
#include "herdr/client_int.h"
#include "herdr/sanitize.h"
#include "fleetfs/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- replies */

void hd_reply_clear(hd_reply *r)
{
    json_decref(r->result);
    memset(r, 0, sizeof(*r));
}

const char *hd_kind_name(int kind)
{
    switch (kind) {
    case HD_OK:
        return "ok";
    case HD_ERR_REMOTE:
        return "remote";
    case HD_ERR_DOWN:
        return "down";
    case HD_ERR_TIMEOUT:
        return "timeout";
    case HD_ERR_CLOSED:
        return "closed";
    case HD_ERR_PROTOCOL:
        return "protocol";
    }
    return "?";
}

/* Sanitised, single-line, truncated at a UTF-8 boundary. */
void hd_copy_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n;
    char *s = san_text(src, len, &n);

    dst[0] = '\0';
    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\n' || s[i] == '\t')
            s[i] = ' ';
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    free(s);
}

int hd_set_reply(hd_reply *r, int kind, const char *code, const char *fmt, ...)
{
    char msg[sizeof(r->message)];
    va_list ap;

    json_decref(r->result);
    r->result = NULL;
    r->kind = kind;
    snprintf(r->code, sizeof(r->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hd_copy_text(r->message, sizeof(r->message), msg, strlen(msg));
    return kind;
}

static int parse_error(json_t *err, const char *id, const char *expect_id, hd_reply *out)
{
    const char *code, *msg;

    if (!json_is_object(err))
        return hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "error is not an object");
    /* herdr answers malformed requests with id "": accept that, and a
	 * missing id, but not someone else's id. */
    if (id && *id && expect_id && strcmp(id, expect_id) != 0)
        return hd_set_reply(out, HD_ERR_PROTOCOL, "id_mismatch", "error for another request");
    code = json_string_value(json_object_get(err, "code"));
    msg = json_string_value(json_object_get(err, "message"));
    hd_set_reply(out, HD_ERR_REMOTE, "", "%s", "");
    hd_copy_text(out->code, sizeof(out->code), code ? code : "unknown", code ? strlen(code) : 7);
    if (msg)
        hd_copy_text(out->message, sizeof(out->message), msg, strlen(msg));
    return out->kind;
}

int hd_parse_reply(const char *line, size_t len, const char *expect_id, hd_reply *out)
{
    json_error_t jerr;
    json_t *root, *err, *res, *idv;
    const char *id;

    hd_reply_clear(out);
    if (len > 0 && line[len - 1] == '\n')
        len--;
    if (len > HD_LINE_MAX)
        return hd_set_reply(out, HD_ERR_PROTOCOL, "too_large", "reply longer than 1 MiB");
    if (memchr(line, '\n', len))
        return hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "more than one line");
    root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "unparsable reply: %s", jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "reply is not an object");
    }
    idv = json_object_get(root, "id");
    id = json_string_value(idv);
    err = json_object_get(root, "error");
    res = json_object_get(root, "result");
    if (idv && !id)
        hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "id is not a string");
    else if (err && res)
        hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "both result and error");
    else if (err)
        parse_error(err, id, expect_id, out);
    else if (!res)
        hd_set_reply(out, HD_ERR_PROTOCOL, "bad_json", "neither result nor error");
    else if (expect_id && (!id || strcmp(id, expect_id) != 0))
        hd_set_reply(out, HD_ERR_PROTOCOL, "id_mismatch", "result for another request");
    else if (!json_is_object(res))
        hd_set_reply(out, HD_ERR_PROTOCOL, "bad_result", "result is not an object");
    else
        out->result = json_incref(res);
    json_decref(root);
    return out->kind;
}

/* ----------------------------------------------------------- result types */

hd_status hd_status_parse(const char *s)
{
    static const struct {
        const char *name;
        hd_status st;
    } t[] = {
        {"idle", HD_IDLE},
        {"done", HD_DONE},
        {"working", HD_WORKING},
        {"blocked", HD_BLOCKED},
    };

    for (size_t i = 0; s && i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(s, t[i].name))
            return t[i].st;
    return HD_UNKNOWN;
}

const char *hd_status_name(hd_status s)
{
    switch (s) {
    case HD_IDLE:
        return "idle";
    case HD_DONE:
        return "done";
    case HD_WORKING:
        return "working";
    case HD_BLOCKED:
        return "blocked";
    case HD_UNKNOWN:
        break;
    }
    return "unknown";
}

/* An identifier: copied exactly or refused. Absent, null or non-string
 * optional ids are "". */
static int copy_id(char *dst, size_t cap, const json_t *v, bool required)
{
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0;

    dst[0] = '\0';
    if (!s || n == 0)
        return required ? -1 : 0;
    if (n >= cap || strlen(s) != n)
        return -1;
    memcpy(dst, s, n + 1);
    log_clean(dst); /* herdr's, but a hostile name must not steer a log or status line */
    return 0;
}

static void copy_field(char *dst, size_t cap, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    dst[0] = '\0';
    if (json_is_string(v))
        hd_copy_text(dst, cap, json_string_value(v), json_string_length(v));
}

int hd_parse_pane(const json_t *obj, hd_pane *out)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj) ||
        copy_id(out->pane_id, sizeof(out->pane_id), json_object_get(obj, "pane_id"), true) ||
        copy_id(out->workspace_id, sizeof(out->workspace_id), json_object_get(obj, "workspace_id"),
                false) ||
        copy_id(out->tab_id, sizeof(out->tab_id), json_object_get(obj, "tab_id"), false) ||
        copy_id(out->name, sizeof(out->name), json_object_get(obj, "name"), false))
        return -1;
    copy_field(out->label, sizeof(out->label), obj, "label");
    copy_field(out->title, sizeof(out->title), obj, "title");
    copy_field(out->agent, sizeof(out->agent), obj, "agent");
    out->focused = json_is_true(json_object_get(obj, "focused"));
    out->status = hd_status_parse(json_string_value(json_object_get(obj, "agent_status")));
    return 0;
}

int hd_parse_agent(const json_t *obj, hd_agent *out)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj) ||
        copy_id(out->pane_id, sizeof(out->pane_id), json_object_get(obj, "pane_id"), true) ||
        copy_id(out->name, sizeof(out->name), json_object_get(obj, "name"), false))
        return -1;
    copy_field(out->agent, sizeof(out->agent), obj, "agent");
    out->status = hd_status_parse(json_string_value(json_object_get(obj, "agent_status")));
    out->launch_pending = json_is_true(json_object_get(obj, "launch_pending"));
    return 0;
}

bool hd_has_type(const json_t *result, const char *type)
{
    const char *t = json_string_value(json_object_get(result, "type"));

    return t && !strcmp(t, type);
}

int hd_parse_version(const json_t *result, hd_version *out)
{
    const json_t *p = json_object_get(result, "protocol");

    memset(out, 0, sizeof(*out));
    if (!hd_has_type(result, "pong"))
        return -1;
    copy_field(out->version, sizeof(out->version), result, "version");
    out->protocol = json_is_integer(p) ? (long)json_integer_value(p) : -1;
    if (out->protocol >= 0)
        snprintf(out->text, sizeof(out->text), "herdr %s protocol %ld",
                 *out->version ? out->version : "(no version)", out->protocol);
    else
        snprintf(out->text, sizeof(out->text), "herdr %s protocol ?",
                 *out->version ? out->version : "(no version)");
    return 0;
}
