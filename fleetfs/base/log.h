/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/base/log.h — one line per event on stderr: time, level, message.
 * A message says what happened, why, and what to do; it never carries a
 * secret (URIs go through uri_redact first).
 */
#ifndef FLEETFS_LOG_H
#define FLEETFS_LOG_H

void log_line(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Text from outside (herdr's replies, the wire, the broker's reply texts,
 * tmux's errors) on its way to a log line, a status file or a receipt:
 * every control character in s — C0 (tab and newline too), DEL, and the
 * C1 range U+0080..U+009F — becomes '?' in place ("??" for a two-byte
 * C1), so it can neither move a terminal's cursor nor start a line of its
 * own in a `key: value` file.  Other text, UTF-8 included, is unchanged.
 * log_line does this to every message (after turning CR and LF into
 * spaces). */
void log_clean(char *s);

#define log_info(...) log_line("info", __VA_ARGS__)
#define log_warn(...) log_line("warn", __VA_ARGS__)
#define log_err(...) log_line("error", __VA_ARGS__)

#endif
