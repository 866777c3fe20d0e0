/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/base/log.c — stderr logging, one event per line, safe from any thread
 * (a single fprintf under the stdio lock); and log_clean, which keeps text
 * from outside from steering a terminal or a line-based file (log.h). */
#include "fleetfs/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

void log_clean(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            p[0] = p[1] = '?', p++;
    }
}

void log_line(const char *level, const char *fmt, ...)
{
    char msg[2048];
    char stamp[32];
    struct timeval tv;
    struct tm tm;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    log_clean(msg);
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ fleetfs %s: %s\n", stamp, (long)(tv.tv_usec / 1000), level, msg);
}
