/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_config.c — libFuzzer target for the config file parser and the
 * option strings that reach opts_set.
 *
 * A config file is the operator's, but it may be generated, edited by a
 * script, or half-written; a daemon that crashes on a bad line instead of
 * naming it fails the same operator who would read the message. The input
 * is written to a temporary file (GKeyFile reads files) and loaded into a
 * fresh fs_opts; then the first line, split at '=', goes through opts_set
 * as a -o option would, and the whole input through the URI helpers. */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/config/options.h"

static char *fz_path;
static int fz_fd = -1;

static void fz_cleanup(void)
{
    unlink(fz_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_fd = g_file_open_tmp("fuzz-config-XXXXXX.conf", &fz_path, NULL);
    if (fz_fd < 0)
        abort();
    atexit(fz_cleanup);
    return 0;
}

static void fz_write(const uint8_t *data, size_t size)
{
    size_t off = 0;
    ssize_t n;

    if (ftruncate(fz_fd, 0) < 0)
        abort();
    while (off < size) {
        n = pwrite(fz_fd, data + off, size - off, (off_t)off);
        if (n <= 0)
            abort();
        off += (size_t)n;
    }
}

static void fz_option_line(const char *text)
{
    char *line = g_strndup(text, strcspn(text, "\n"));
    char *eq = strchr(line, '='), *err = NULL;
    fs_opts o;

    opts_init(&o);
    if (eq != NULL) {
        *eq = '\0';
        if (opts_known(line) && opts_set(&o, line, eq + 1, &err) < 0 && err == NULL)
            abort(); /* a refusal always says why */
        g_free(err);
    }
    opts_free(&o);
    g_free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *red, **uris;
    char *err = NULL;
    fs_opts o;

    fz_write(data, size);
    opts_init(&o);
    if (opts_load_file(&o, fz_path, true, &err) < 0 && err == NULL)
        abort();
    g_free(err);
    opts_free(&o);

    text = g_strndup((const char *)data, size);
    fz_option_line(text);
    red = uri_redact(text);
    /* a password is shown as *** in a URI that parses; one that does not
     * parse is shown as scheme://host:port (unparsable) at most */
    if (red != NULL && uri_has_password(text) && strstr(red, ":***@") == NULL &&
        (strchr(red, '@') != NULL ||
         (strstr(red, "(unparsable)") == NULL && strstr(red, "(not a URI)") == NULL)))
        abort();
    g_free(red);
    uris = uri_split(text);
    g_strfreev(uris);
    g_free(text);
    return 0;
}
