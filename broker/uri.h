/* broker/uri.h — broker URIs as people write them: printing one without its
 * password, and saying what a URI asks for when the broker refuses it.
 */
#ifndef FLEETFS_BROKER_URI_H
#define FLEETFS_BROKER_URI_H

#include <stdbool.h>

/* amqp://user:secret@h:p/v -> amqp://user:***@h:p/v; g_free. NULL -> NULL. */
char *br_uri_redact(const char *uri);
/* The URI carries a password (a ':' in its user-info). */
bool br_uri_has_password(const char *uri);

#endif
