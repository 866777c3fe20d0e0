/* SPDX-License-Identifier: Apache-2.0 */
/* broker/uri.h — broker URIs as people write them: splitting a list,
 * checking one before it is used, printing one without its password.
 */
#ifndef FLEETFS_BROKER_URI_H
#define FLEETFS_BROKER_URI_H

#include <stdbool.h>
#include <stddef.h>

/* amqp://user:secret@h:p/v -> amqp://user:***@h:p/v; a URI that does not
 * parse -> scheme://host:port (unparsable), or less; g_free. NULL -> NULL. */
char *br_uri_redact(const char *uri);
/* rabbitmq-c parses it (amqp:// or amqps://, user-info percent-encoded). */
bool br_uri_parses(const char *uri);
/* The URI carries a password (a ':' in its user-info). */
bool br_uri_has_password(const char *uri);
/* 0, or -1 and why (the URI redacted): not amqp(s)://, does not parse, or
 * amqps:// without a CA file.  None of these heals by retrying. */
int br_uri_check(const char *uri, const char *ca, char *why, size_t n);
/* A list of URIs separated by whitespace or commas where the next URI
 * starts (amqp:// or amqps://), so a password may hold them; g_strfreev. */
char **br_uri_split(const char *list);

#endif
