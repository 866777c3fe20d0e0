/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/inputline.c — see inputline.h. */
#include "herdr/inputline.h"

#include <string.h>

#include <glib.h>

bool il_waits(const char *line, const char *typed)
{
    char *l, *tail;
    const char *last;
    glong k, want;
    bool found;

    if (strstr(line, "[Pasted text #"))
        return true;
    l = g_strdup(line);
    g_strchomp(l);
    /* a box's right border ("│") after the text */
    while (g_str_has_suffix(l, "\xe2\x94\x82") || g_str_has_suffix(l, "|")) {
        l[strlen(l) - (g_str_has_suffix(l, "|") ? 1 : 3)] = '\0';
        g_strchomp(l);
    }
    tail = g_strdup(typed);
    g_strchomp(tail);
    last = strrchr(tail, '\n');
    last = last ? last + 1 : tail;
    want = MIN(g_utf8_strlen(last, -1), 8);
    k = MIN(MIN(g_utf8_strlen(last, -1), g_utf8_strlen(l, -1)), 16);
    found = k > 0 && k >= want &&
            !strcmp(g_utf8_offset_to_pointer(last, g_utf8_strlen(last, -1) - k),
                    g_utf8_offset_to_pointer(l, g_utf8_strlen(l, -1) - k));
    g_free(tail);
    g_free(l);
    return found;
}
