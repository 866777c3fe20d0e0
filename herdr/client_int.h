/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/client_int.h — shared by client.c (transport) and reply.c
 * (parsing); not for users of the client. */
#ifndef FLEETFS_HERDR_CLIENT_INT_H
#define FLEETFS_HERDR_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "herdr/client.h"

/* Replies are bounded like herdr bounds requests. */
#define HD_LINE_MAX (1024 * 1024)

/* Sets r to kind/code and a sanitised message; returns kind. */
__attribute__((format(printf, 4, 5))) int hd_set_reply(hd_reply *r, int kind, const char *code,
                                                       const char *fmt, ...);
/* Sanitised, single-line, truncated at a UTF-8 boundary. */
void hd_copy_text(char *dst, size_t cap, const char *src, size_t len);
/* result is an object whose "type" is type. */
bool hd_has_type(const json_t *result, const char *type);

#endif
