/* SPDX-License-Identifier: Apache-2.0 */
/* broker/uri.c — see uri.h.
 *
 * What may be shown of a URI: one that rabbitmq-c parses has its user-info
 * end at the first '@' before the first '/' (a raw '@', ':' or '/' in a
 * password does not parse: they must be percent-encoded), so everything
 * after the user's ':' up to that '@' is the password and becomes ***.  A
 * URI that does not parse may hold a password anywhere, cut in any place:
 * only scheme://host:port is shown, and only when that part looks like a
 * host and a port, never a fragment of the user-info.
 *
 * Lists: URIs are separated by whitespace or commas only where the next
 * URI begins (amqp:// or amqps://), so a password may hold ',', ';' or a
 * space. */
#include "broker/uri.h"

#include <amqp.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

static bool uri_scheme_ok(const char *uri)
{
    return g_str_has_prefix(uri, "amqp://") || g_str_has_prefix(uri, "amqps://");
}

bool br_uri_parses(const char *uri)
{
    struct amqp_connection_info info;
    char *buf = g_strdup(uri);
    int rc;

    amqp_default_connection_info(&info);
    rc = amqp_parse_url(buf, &info);
    g_free(buf);
    return rc == AMQP_STATUS_OK;
}

/* A host (name, IPv4 or [IPv6]) with an optional :port, nothing else. */
static bool looks_like_hostport(const char *s, size_t n)
{
    size_t i = 0;

    if (n == 0)
        return false;
    if (s[0] == '[') {
        for (i = 1; i < n && s[i] != ']'; i++)
            if (!g_ascii_isxdigit(s[i]) && s[i] != ':' && s[i] != '.')
                return false;
        if (i == n)
            return false;
        i++;
    } else {
        while (i < n && (g_ascii_isalnum(s[i]) || s[i] == '.' || s[i] == '-'))
            i++;
        if (i == 0)
            return false;
    }
    if (i == n)
        return true;
    if (s[i++] != ':' || i == n)
        return false;
    for (; i < n; i++)
        if (!g_ascii_isdigit(s[i]))
            return false;
    return true;
}

/* scheme://host:port of a URI that does not parse, or a placeholder. */
static char *uri_shown_unparsed(const char *uri)
{
    const char *sep = strstr(uri, "://"), *p, *at, *end;
    size_t i;

    if (sep == NULL || sep == uri)
        return g_strdup("(not a URI)");
    for (i = 0; uri + i < sep; i++)
        if (!g_ascii_isalnum(uri[i]) && uri[i] != '+' && uri[i] != '-' && uri[i] != '.')
            return g_strdup("(not a URI)");
    p = sep + 3;
    at = strrchr(p, '@'); /* a password may hold '/', '?' or '#' */
    if (at != NULL)
        p = at + 1;
    end = p + strcspn(p, "/?#");
    if (!looks_like_hostport(p, (size_t)(end - p)))
        return g_strdup_printf("%.*s://(unparsable)", (int)(sep - uri), uri);
    return g_strdup_printf("%.*s://%.*s (unparsable)", (int)(sep - uri), uri, (int)(end - p), p);
}

/* The user-info of a URI that parses: [*start, *at), or false. */
static bool uri_userinfo(const char *uri, const char **start, const char **at)
{
    const char *p = strstr(uri, "://");

    p = p != NULL ? p + 3 : uri;
    *start = p;
    p += strcspn(p, "@/");
    *at = p;
    return *p == '@';
}

bool br_uri_has_password(const char *uri)
{
    const char *at, *p;

    if (uri == NULL)
        return false;
    if (!br_uri_parses(uri)) {
        /* anything after a ':' before the last '@' may be a password */
        const char *sep = strstr(uri, "://");
        p = sep ? sep + 3 : uri;
        at = strrchr(p, '@');
        return at != NULL && memchr(p, ':', (size_t)(at - p)) != NULL;
    }
    return uri_userinfo(uri, &p, &at) && memchr(p, ':', (size_t)(at - p)) != NULL;
}

char *br_uri_redact(const char *uri)
{
    const char *at, *p, *colon;

    if (uri == NULL)
        return NULL;
    if (*uri != '\0' && !br_uri_parses(uri))
        return uri_shown_unparsed(uri);
    if (!uri_userinfo(uri, &p, &at))
        return g_strdup(uri);
    colon = memchr(p, ':', (size_t)(at - p));
    if (colon == NULL)
        return g_strdup(uri);
    return g_strdup_printf("%.*s***%s", (int)(colon + 1 - uri), uri, at);
}

int br_uri_check(const char *uri, const char *ca, char *why, size_t n)
{
    struct amqp_connection_info info;
    char *shown = br_uri_redact(uri), *buf;
    int rc = -1;

    if (!uri_scheme_ok(uri)) {
        snprintf(why, n, "broker URI %s: not amqp://... or amqps://...", shown);
        goto out;
    }
    buf = g_strdup(uri);
    amqp_default_connection_info(&info);
    if (amqp_parse_url(buf, &info) != AMQP_STATUS_OK) {
        snprintf(
            why, n,
            "broker URI %s does not parse: the form is amqp[s]://USER:PASSWORD@HOST:PORT/VHOST; "
            "percent-encode '@' ':' '/' '%%' '#' '?' in the user or password (%%40 %%3A %%2F "
            "%%25 %%23 %%3F)",
            shown);
        g_free(buf);
        goto out;
    }
    if (info.ssl && (ca == NULL || *ca == '\0')) {
        snprintf(why, n,
                 "broker URI %s is amqps:// but no ca= is set: rabbitmq-c has no system CA store; "
                 "give -o ca=FILE, the CA that signed the broker's certificate",
                 shown);
        g_free(buf);
        goto out;
    }
    g_free(buf);
    rc = 0;
out:
    g_free(shown);
    return rc;
}

/* The end of the URI starting at p: before a run of separators that is
 * followed by the next URI's scheme or by the end of the list. */
static const char *uri_list_end(const char *p, const char *sep)
{
    const char *q = p;

    for (;;) {
        size_t run;
        q += strcspn(q, sep);
        if (*q == '\0')
            return q;
        run = strspn(q, sep);
        if (q[run] == '\0' || uri_scheme_ok(q + run))
            return q;
        q += run;
    }
}

char **br_uri_split(const char *list)
{
    GPtrArray *out = g_ptr_array_new();
    const char *sep = " \t\r\n,";
    const char *p = list ? list : "";

    p += strspn(p, sep);
    while (*p != '\0') {
        const char *end = uri_list_end(p, sep);
        g_ptr_array_add(out, g_strndup(p, (size_t)(end - p)));
        p = end + strspn(end, sep);
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}
