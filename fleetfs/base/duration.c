/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/base/duration.c — durations as people write them in options and
 * profiles ("5s", "1500ms", "2m", "7d"); see duration.h.
 */
#include "fleetfs/base/duration.h"

#include <glib.h>
#include <string.h>

int parse_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *sfx;
        double ms;
    } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}, {"", 1000},
    };
    const char *p = s;
    double v;
    size_t i;

    if (s == NULL || *p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (p - s > 24)
        return -1;
    /* Only digits and one '.' precede p, so strtod cannot meet hex,
     * exponents, inf or nan. */
    v = g_ascii_strtod(s, NULL);
    for (i = 0; i < G_N_ELEMENTS(units); i++) {
        if (strcmp(p, units[i].sfx) == 0)
            break;
    }
    if (i == G_N_ELEMENTS(units))
        return -1;
    v = v * units[i].ms + 0.5;
    if (v < 1 || v >= (double)DURATION_MAX_MS + 1)
        return -1;
    *ms = (int64_t)v; /* rounds to the nearest millisecond */
    return 0;
}
