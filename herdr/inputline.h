/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/inputline.h — whether typed text still waits in an agent's input
 * line, judged from one screen line (tmux: the cursor's line up to the
 * cursor; herdr: a line near the bottom of the visible screen). */
#ifndef FLEETFS_HERDR_INPUTLINE_H
#define FLEETFS_HERDR_INPUTLINE_H

#include <stdbool.h>

/* true when line ends (trailing blanks and a box's right border aside)
 * with the end of the last line of typed — its last 16 characters, at
 * least 8 or that whole last line — or shows Claude Code's
 * "[Pasted text #N" placeholder for a long paste. */
bool il_waits(const char *line, const char *typed);

#endif
