/* broker/uri.c — see uri.h.  The user-info ends at the last '@' of the
 * URI, so a password may itself contain '@' or ':'. */
#include "broker/uri.h"

#include <glib.h>
#include <string.h>

static const char *uri_userinfo(const char *uri, const char **at)
{
    const char *p = strstr(uri, "://");

    p = p != NULL ? p + 3 : uri;
    *at = strrchr(p, '@');
    return p;
}

bool br_uri_has_password(const char *uri)
{
    const char *at, *p;

    if (uri == NULL)
        return false;
    p = uri_userinfo(uri, &at);
    return at != NULL && memchr(p, ':', (size_t)(at - p)) != NULL;
}

char *br_uri_redact(const char *uri)
{
    const char *at, *p, *colon;

    if (uri == NULL)
        return NULL;
    p = uri_userinfo(uri, &at);
    if (at == NULL)
        return g_strdup(uri);
    colon = memchr(p, ':', (size_t)(at - p));
    if (colon == NULL)
        return g_strdup(uri);
    return g_strdup_printf("%.*s***%s", (int)(colon + 1 - uri), uri, at);
}
