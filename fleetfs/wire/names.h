/* names.h — validation of the two kinds of text fleetfs accepts from outside:
 * lead names (path components, queue names, envelope from/to) and message
 * bodies (strict UTF-8). Pure functions, no state, safe from any thread. */
#ifndef FLEETFS_NAMES_H
#define FLEETFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define NAME_MAX_LEN 63

/* s matches [a-z0-9][a-z0-9_-]{0,62} as a whole string; NULL is invalid. */
bool name_valid(const char *s);

/* The n bytes at s are strict UTF-8: shortest form only, no UTF-16
 * surrogates, nothing above U+10FFFF, and no NUL byte anywhere. */
bool text_utf8_valid(const char *s, size_t n);

#endif
