/* fleetfs/log.c — stderr logging, one event per line, safe from any thread
 * (a single fprintf under the stdio lock). */
#include "fleetfs/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

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
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ fleetfs %s: %s\n", stamp, (long)(tv.tv_usec / 1000), level, msg);
}
