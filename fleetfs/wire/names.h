/* SPDX-License-Identifier: Apache-2.0 */
/* names.h — validation of the kinds of text fleetfs accepts from outside:
 * lead names, agent names, global agent ids, group names and addresses
 * (path components, queue names, routing keys, envelope from/to), and
 * message bodies (strict UTF-8). Pure functions, no state, safe from any
 * thread.
 *
 * The ids of SPEC section 10:
 *   coord_id   a lead, [a-z0-9][a-z0-9_-]{0,62}            "alpha"
 *   gid        an agent, <agent name>@<coord_id>            "w1@alpha"
 *              agent name [a-z][a-z0-9_-]{0,31} (herdr's rule), so a gid
 *              has exactly one '@' and is at most 32+1+63 = 96 bytes
 *   group      [a-z0-9][a-z0-9_-]{0,62} (the coord_id rule: it becomes a
 *              routing key broadcast.<g> and a directory groups/<g>);
 *              "all" is the implicit group of every entity
 *   address    what a message's `to` may hold: a coord_id, a gid, or
 *              "group:<g>" (at most 6+63 = 69 bytes)
 * An "id" is a coord_id or a gid: the entity that owns a mailbox. The host
 * of an id (id_host) is the coord_id whose key must sign for it. */
#ifndef FLEETFS_NAMES_H
#define FLEETFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define NAME_MAX_LEN 63
#define AGENT_NAME_MAX_LEN 32
#define GID_MAX_LEN (AGENT_NAME_MAX_LEN + 1 + NAME_MAX_LEN) /* 96 */
/* The longest id or address: a gid (a "group:<g>" is at most 69). */
#define ADDR_MAX_LEN GID_MAX_LEN
#define GROUP_PREFIX "group:"
#define GROUP_ALL "all"

/* s matches [a-z0-9][a-z0-9_-]{0,62} as a whole string; NULL is invalid. */
bool name_valid(const char *s);

/* s matches [a-z][a-z0-9_-]{0,31} as a whole string; NULL is invalid. */
bool agent_name_valid(const char *s);
/* s is <agent name>@<coord_id>: exactly one '@', both parts valid. */
bool gid_valid(const char *s);
/* s is a group name: the coord_id rule ([a-z0-9][a-z0-9_-]{0,62}); "all"
 * is valid (the group every entity is in). */
bool group_valid(const char *s);
/* s is an id: a coord_id or a gid. */
bool id_valid(const char *s);
/* The host (coord_id) that owns id: a coord_id is its own host, a gid's
 * host is the part after '@'. false (out = "") when id is neither. */
bool id_host(const char *id, char out[NAME_MAX_LEN + 1]);

typedef enum { ADDR_LEAD, ADDR_AGENT, ADDR_GROUP } addr_kind;

/* A parsed `to` value. */
typedef struct {
    addr_kind kind;
    char name[NAME_MAX_LEN + 1]; /* lead: the coord_id; agent: the name
                                  * before '@'; group: g (without "group:") */
    char host[NAME_MAX_LEN + 1]; /* lead: the coord_id; agent: the part
                                  * after '@'; group: "" (no one host) */
} addr;

/* Parses a `to` value: coord_id | gid | "group:<g>". false (and *out
 * zeroed) on anything else: "group:" alone, "group:" with an invalid g,
 * a bad id. */
bool addr_parse(const char *s, addr *out);

/* The check a receiver makes of a message's `to` (SPEC section 10): true
 * when to is a valid address naming id itself, or "group:<g>" where g is
 * "all" or one of groups (id's groups, NULL-terminated; NULL: none). The
 * lead and its agents are different entities: "w1@alpha" does not match
 * id "alpha". */
bool addr_matches(const char *to, const char *id, const char *const *groups);

/* The n bytes at s are strict UTF-8: shortest form only, no UTF-16
 * surrogates, nothing above U+10FFFF, and no NUL byte anywhere. */
bool text_utf8_valid(const char *s, size_t n);

#endif
