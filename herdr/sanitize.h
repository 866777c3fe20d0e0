/* SPDX-License-Identifier: Apache-2.0 */
/* sanitize.h — make arbitrary bytes safe to type into a terminal program.
 *
 * herdr types text verbatim: an ESC sequence or control byte in a message
 * would reach the agent's program as keystrokes (a bracketed-paste
 * terminator ESC[201~ followed by text and a CR submits it, an arrow key
 * moves a selection). Everything typed into a pane goes through san_text()
 * first. See sanitize.c for the exact rules. */
#ifndef FLEETFS_HERDR_SANITIZE_H
#define FLEETFS_HERDR_SANITIZE_H

#include <stdbool.h>
#include <stddef.h>

/* Returns a NUL-terminated, malloc'd copy of in[0..len) with every control
 * character and escape sequence removed and invalid UTF-8 dropped; CRLF and
 * lone CR become LF. The result is valid UTF-8 whose only bytes below 0x20
 * are '\n' and '\t', with no DEL and no C1 code point. *outlen (may be NULL)
 * receives its length, which is never more than len. NULL only when out of
 * memory. */
char *san_text(const char *in, size_t len, size_t *outlen);

/* True when san_text() would return in[0..len) unchanged. */
bool san_is_clean(const char *in, size_t len);

/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). NUL bytes count as valid. */
bool san_utf8_valid(const char *s, size_t len);

#endif
