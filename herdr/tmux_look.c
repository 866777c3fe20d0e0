/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/tmux_look.c — what the tmux backend reads off a pane around
 * typing (tmux_int.h): whether a person is using it (a client's keys, a
 * draft in the input line), whether typed text still waits unsubmitted,
 * and the one carriage return that submits.
 *
 * A person's keys: tmux stamps a client's activity time (seconds) on each
 * key it reads from that client's terminal; a client whose current pane is
 * ours and whose stamp is younger than quiet_ms holds typing.  Keys sent
 * by programs (send-keys, paste-buffer: fleetfs's own typing) stamp no
 * client.
 *
 * The input line: the screen line the cursor is on.  A draft is text
 * between a prompt marker ("> ", "❯ ", "› ") at the start of that line
 * (after blanks or a box's border) and the cursor; a draft of several
 * lines whose cursor is on a later one is not seen this way; text waiting
 * unsubmitted is what fleetfs typed ending right before the cursor on its
 * line (or Claude Code's "[Pasted text #N" placeholder for a long paste):
 * a TUI shows a submitted prompt above its input line, never at the
 * cursor.  Where
 * no marker is found, no draft is seen: the activity stamp is then the
 * only signal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#include "herdr/inputline.h"
#include "herdr/tmux_int.h"

int tl_person(const char *pane, int quiet_ms, int *ago_s)
{
    const char *args[] = {"list-clients", "-F", "#{client_activity}\t#{pane_id}", NULL};
    char why[256], *out = NULL;
    int64_t now = (int64_t)time(NULL), youngest = -1;

    if (!tb_run(args, NULL, &out, why, sizeof why))
        return -1;
    gchar **lines = g_strsplit(out, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        char *tab = strchr(*l, '\t');
        if (!tab || strcmp(tab + 1, pane) != 0)
            continue;
        int64_t at = g_ascii_strtoll(*l, NULL, 10);
        if (at > youngest)
            youngest = at;
    }
    g_strfreev(lines);
    g_free(out);
    if (youngest < 0)
        return 0;
    *ago_s = (int)MAX(now - youngest, 0);
    /* stamps are whole seconds: a stamp of this second is up to 1 s old */
    return (now - youngest) * 1000 < quiet_ms ? 1 : 0;
}

/* The screen line the cursor is on, up to the cursor; NULL when tmux
 * cannot tell. */
static char *cursor_line(const char *pane)
{
    const char *pos[] = {"display-message", "-p", "-t", pane, "#{cursor_x}\t#{cursor_y}", NULL};
    char why[256], *out = NULL, *text = NULL, row[16];
    int x, y;

    if (!tb_run(pos, NULL, &out, why, sizeof why))
        return NULL;
    if (sscanf(out, "%d\t%d", &x, &y) != 2) {
        g_free(out);
        return NULL;
    }
    g_free(out);
    snprintf(row, sizeof row, "%d", y);
    const char *cap[] = {"capture-pane", "-p", "-t", pane, "-S", row, "-E", row, NULL};
    if (!tb_run(cap, NULL, &text, why, sizeof why))
        return NULL;
    g_strchomp(text);
    /* cut at column x (in characters: a prompt marker takes one column) */
    if (x < g_utf8_strlen(text, -1))
        *g_utf8_offset_to_pointer(text, x) = '\0';
    return text;
}

/* Only blanks and a box's borders: what may stand before a prompt marker
 * at the start of an input line ("│ > ", "  › "). */
static bool only_frame(const char *s, const char *end)
{
    while (s < end) {
        gunichar c = g_utf8_get_char(s);
        if (!g_unichar_isspace(c) && c != '|' && !(c >= 0x2500 && c <= 0x257f))
            return false;
        s = g_utf8_next_char(s);
    }
    return true;
}

int tl_draft(const char *pane)
{
    static const char *const markers[] = {"> ", "\xe2\x9d\xaf ", "\xe2\x80\xba "};
    char *line = cursor_line(pane);
    const char *after = NULL;
    int draft = 0;

    if (!line)
        return -1;
    /* a marker counts only at the line's start (a "> " inside a line is
     * text, say a shell redirection) */
    for (size_t i = 0; i < G_N_ELEMENTS(markers) && !after; i++) {
        const char *hit = strstr(line, markers[i]);
        if (hit && only_frame(line, hit))
            after = hit + strlen(markers[i]);
    }
    if (after)
        draft = !only_frame(after, after + strlen(after));
    g_free(line);
    return after ? draft : -1;
}

int tl_waits(const char *pane, const char *typed)
{
    char *line = cursor_line(pane);
    int found;

    if (!line)
        return -1;
    found = il_waits(line, typed);
    g_free(line);
    return found;
}

bool tl_carriage_return(const char *pane, char *why, size_t n)
{
    /* the byte itself (-H 0d), not the key name Enter: a name can be
     * mapped or ignored; a carriage return is what a terminal sends */
    const char *cr[] = {"send-keys", "-t", pane, "-H", "0d", NULL};
    return tb_run(cr, NULL, NULL, why, n);
}
