/* SPDX-License-Identifier: Apache-2.0 */
/* names.c — the one place that decides what a lead name is and what text is.
 *
 * A lead name becomes a directory under peers/, part of a queue name
 * (lead.<name>.inbox) and a key file name (<name>.pub), so it must be safe in
 * all three: lowercase ASCII letters, digits, '_' and '-', not starting with
 * a separator, at most 63 bytes (leaves room inside AMQP's 255-byte short
 * strings and any file system's NAME_MAX).
 *
 * Message text is typed into a terminal and stored in JSON Lines files, so
 * only strict UTF-8 passes: overlong forms and surrogates are classic ways to
 * smuggle bytes past filters, and an embedded NUL would silently truncate the
 * text for every C consumer downstream. The decoder below follows the table
 * in RFC 3629 section 4 (well-formed byte sequences) directly.
 *
 * Agents (SPEC section 10) are named <name>@<coord_id>. The agent name is
 * herdr's rule (a letter first, at most 32), and neither part may hold an
 * '@', so a gid splits one way only and its host — the coord_id whose key
 * must sign for it — is read from the id itself. Groups take the lead-name
 * rule: a group becomes a routing key (broadcast.<g>) where '.', '*' and
 * '#' would mean something to the broker, and a directory under groups/. */
#include "fleetfs/wire/names.h"

#include <string.h>

static bool name_char_ok(char c, bool first)
{
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        return true;
    return !first && (c == '_' || c == '-');
}

bool name_valid(const char *s)
{
    size_t i;

    if (s == NULL || s[0] == '\0')
        return false;
    for (i = 0; s[i] != '\0'; i++) {
        if (i >= NAME_MAX_LEN || !name_char_ok(s[i], i == 0))
            return false;
    }
    return true;
}

/* Length of the well-formed sequence starting at p (at most n bytes
 * available), or 0 when it is ill-formed. */
static size_t names_utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len, i;

    if (c == 0x00)
        return 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0; /* continuation byte, C0/C1 overlong lead, or > U+10FFFF */
    if (n < len)
        return 0;
    /* The second byte's range is what excludes overlongs (E0, F0),
	 * surrogates (ED) and code points above U+10FFFF (F4). */
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    }
    return len;
}

bool text_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    if (s == NULL)
        return n == 0;
    while (i < n) {
        size_t len = names_utf8_seq(p + i, n - i);

        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

/* ---- agents, groups, addresses (SPEC section 10) ------------------------ */

bool agent_name_valid(const char *s)
{
    size_t i;

    if (s == NULL || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (i = 1; s[i] != '\0'; i++) {
        if (i >= AGENT_NAME_MAX_LEN || !name_char_ok(s[i], false))
            return false;
    }
    return true;
}

/* Splits a gid at its '@' into name and host (each NUL-terminated, sized
 * for its part); false when s is not a gid. */
static bool names_split_gid(const char *s, char name[AGENT_NAME_MAX_LEN + 1],
                            char host[NAME_MAX_LEN + 1])
{
    const char *at = s != NULL ? strchr(s, '@') : NULL;
    size_t n;

    if (at == NULL)
        return false;
    n = (size_t)(at - s);
    if (n == 0 || n > AGENT_NAME_MAX_LEN || strlen(at + 1) > NAME_MAX_LEN)
        return false;
    memcpy(name, s, n);
    name[n] = '\0';
    strcpy(host, at + 1);
    /* a second '@' fails name_valid on the host part */
    return agent_name_valid(name) && name_valid(host);
}

bool gid_valid(const char *s)
{
    char name[AGENT_NAME_MAX_LEN + 1], host[NAME_MAX_LEN + 1];

    return names_split_gid(s, name, host);
}

bool group_valid(const char *s)
{
    return name_valid(s);
}

bool id_valid(const char *s)
{
    return name_valid(s) || gid_valid(s);
}

bool id_host(const char *id, char out[NAME_MAX_LEN + 1])
{
    char name[AGENT_NAME_MAX_LEN + 1];

    out[0] = '\0';
    if (name_valid(id)) {
        strcpy(out, id);
        return true;
    }
    if (names_split_gid(id, name, out))
        return true;
    out[0] = '\0';
    return false;
}

bool addr_parse(const char *s, addr *out)
{
    memset(out, 0, sizeof(*out));
    if (s == NULL)
        return false;
    if (strncmp(s, GROUP_PREFIX, strlen(GROUP_PREFIX)) == 0) {
        const char *g = s + strlen(GROUP_PREFIX);

        if (!group_valid(g))
            return false;
        out->kind = ADDR_GROUP;
        strcpy(out->name, g);
        return true;
    }
    if (name_valid(s)) {
        out->kind = ADDR_LEAD;
        strcpy(out->name, s);
        strcpy(out->host, s);
        return true;
    }
    if (names_split_gid(s, out->name, out->host)) {
        out->kind = ADDR_AGENT;
        return true;
    }
    memset(out, 0, sizeof(*out));
    return false;
}

bool addr_matches(const char *to, const char *id, const char *const *groups)
{
    addr a;

    if (!addr_parse(to, &a) || !id_valid(id))
        return false;
    if (a.kind != ADDR_GROUP)
        return strcmp(to, id) == 0;
    if (strcmp(a.name, GROUP_ALL) == 0)
        return true;
    for (size_t i = 0; groups != NULL && groups[i] != NULL; i++)
        if (strcmp(groups[i], a.name) == 0)
            return true;
    return false;
}
