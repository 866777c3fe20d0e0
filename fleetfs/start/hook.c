/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/hook.c — `fleetfs hook [--log FILE]`, installed as an
 * agent's prompt-submit hook.
 *
 * It reads the JSON the agent hands its hook on stdin (Claude Code's
 * UserPromptSubmit: session_id, transcript_path, cwd, hook_event_name,
 * prompt; Codex and Gemini CLI send a prompt likewise), finds each header
 * fleetfs typed in the prompt ("[fleet message from X, msgId ID ... -
 * reply: echo '...' > PATH]") and writes "<msgId> <prompt length>\n
 * <prompt>" in one write(2) to the home's `submitted` file: PATH names
 * the mount and the home (MOUNT/leads/L/reply/ID, MOUNT/agents/G/reply/ID,
 * or MOUNT/peers/FROM/reply/ID for the lead: MOUNT/self).  The mount
 * compares the prompt with what it typed and sends the sender
 * `confirmed`.
 *
 * It prints nothing on stdout (Claude Code adds a UserPromptSubmit hook's
 * stdout to the prompt), always exits 0, and says what it could not do on
 * stderr and, with --log, in FILE.  It does one read and one open and
 * write per header: milliseconds.
 */
#include "fleetfs/start/hook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <jansson.h>

#include "fleetfs/inject/witness.h"

#define HOOK_INPUT_MAX (8 * 1024 * 1024)

static const char *log_path;

static void hook_log(const char *fmt, ...)
{
    va_list ap;
    char line[1024], when[40];
    time_t now = time(NULL);
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(stderr, "fleetfs hook: %s\n", line);
    if (log_path) {
        FILE *f = fopen(log_path, "a");
        if (f) {
            fprintf(f, "%s fleetfs hook: %s\n", when, line);
            fclose(f);
        }
    }
}

/* The home's submitted file for the reply path of a header, or NULL. */
static char *home_file(const char *path, const char *id)
{
    char *tail = g_strdup_printf("/reply/%s", id), *base, *out = NULL, *slash;
    if (!g_str_has_suffix(path, tail)) {
        g_free(tail);
        return NULL;
    }
    base = g_strndup(path, strlen(path) - strlen(tail));
    g_free(tail);
    slash = strrchr(base, '/');
    if (slash && slash > base) {
        char *kind_end = slash, *kind;
        *kind_end = '\0';
        kind = strrchr(base, '/');
        if (kind && !strcmp(kind, "/peers")) {
            *kind = '\0'; /* MOUNT/peers/FROM: the lead's own home */
            out = g_strdup_printf("%s/self/submitted", base);
        } else if (kind && (!strcmp(kind, "/leads") || !strcmp(kind, "/agents"))) {
            *kind_end = '/';
            out = g_strdup_printf("%s/submitted", base);
        }
    }
    g_free(base);
    return out;
}

static void report(const char *file, const char *id, const char *prompt, size_t len)
{
    size_t keep = MIN(len, (size_t)WIT_PROMPT_MAX);
    GString *buf = g_string_new(NULL);
    int fd;
    g_string_printf(buf, "%s %zu\n", id, len);
    g_string_append_len(buf, prompt, (gssize)keep);
    fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        hook_log("cannot open %s for %s (%s): is the fleet mounted?", file, id, strerror(errno));
    } else {
        ssize_t w = write(fd, buf->str, buf->len);
        if (w < 0)
            hook_log("%s refused the report of %s (%s)%s", file, id, strerror(errno),
                     errno == ENOENT ? ": fleetfs did not type it there since it started" : "");
        else if ((size_t)w != buf->len)
            hook_log("%s took %zd of %zu bytes of the report of %s", file, w, buf->len, id);
        close(fd);
    }
    g_string_free(buf, TRUE);
}

int hook_main(int argc, char **argv)
{
    GString *in = g_string_new(NULL);
    char chunk[65536];
    ssize_t r;
    json_t *root;
    json_error_t jerr;
    const char *prompt;
    size_t len;
    GRegex *re;
    GMatchInfo *m = NULL;
    int found = 0;

    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--log") && i + 1 < argc) {
            log_path = argv[++i];
        } else {
            fprintf(stderr, "usage: fleetfs hook [--log FILE]  (reads the agent's prompt-submit "
                            "JSON on stdin; see doc/agents.md)\n");
            return 0;
        }
    }
    while ((r = read(0, chunk, sizeof chunk)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || in->len > HOOK_INPUT_MAX) {
            hook_log("cannot read the hook's input (%s); nothing reported",
                     r < 0 ? strerror(errno) : "larger than 8 MiB");
            g_string_free(in, TRUE);
            return 0;
        }
        g_string_append_len(in, chunk, r);
    }
    root = json_loadb(in->str, in->len, 0, &jerr);
    g_string_free(in, TRUE);
    if (!root || !json_is_string(json_object_get(root, "prompt"))) {
        hook_log("the hook's input is not a JSON object with a prompt (%s); nothing reported",
                 root ? "no prompt string" : jerr.text);
        json_decref(root);
        return 0;
    }
    prompt = json_string_value(json_object_get(root, "prompt"));
    len = json_string_length(json_object_get(root, "prompt"));
    re = g_regex_new("\\[fleet message from [^,\\]\\n]+, msgId ([0-9a-f]{32})[^\\]\\n]* - "
                     "reply[^:\\]\\n]*: echo '\\.\\.\\.' > ([^\\]\\n]+)\\]",
                     G_REGEX_RAW, 0, NULL);
    g_regex_match_full(re, prompt, (gssize)len, 0, 0, &m, NULL);
    while (g_match_info_matches(m)) {
        char *id = g_match_info_fetch(m, 1), *quoted = g_match_info_fetch(m, 2);
        char *path = g_shell_unquote(quoted, NULL), *file = path ? home_file(path, id) : NULL;
        found++;
        if (file)
            report(file, id, prompt, len);
        else
            hook_log("the header of %s names no fleet home (%s); nothing reported", id, quoted);
        g_free(file);
        g_free(path);
        g_free(quoted);
        g_free(id);
        g_match_info_next(m, NULL);
    }
    g_match_info_free(m);
    g_regex_unref(re);
    json_decref(root);
    (void)found; /* a prompt with no fleet header is the person's own: nothing to say */
    return 0;
}
