/* fleetfs/log.h — one line per event on stderr: time, level, message.
 * A message says what happened, why, and what to do; it never carries a
 * secret (URIs go through uri_redact first).
 */
#ifndef FLEETFS_LOG_H
#define FLEETFS_LOG_H

void log_line(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_info(...) log_line("info", __VA_ARGS__)
#define log_warn(...) log_line("warn", __VA_ARGS__)
#define log_err(...) log_line("error", __VA_ARGS__)

#endif
