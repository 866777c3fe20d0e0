/* SPDX-License-Identifier: Apache-2.0 */
/* fake-agent — a stand-in for a coding agent in a real tmux pane, for the
 * injection tests (t0710, t0720).
 *
 *   fake-agent FILE [PIDFILE]
 *   fake-agent --never-quiet
 *
 * Like an agent's TUI it puts its terminal in non-canonical mode with no
 * signals and no echo (every byte reaches it as it arrives) and asks for
 * bracketed paste; then it shows each byte it reads visibly, the way
 * `cat -v` does, both on the terminal and appended to FILE.  It writes its
 * pid to PIDFILE, so a test can make "the agent" exit (kill it) and leave
 * whatever started it — a shell — in the pane.  It is a compiled program so
 * that tmux's #{pane_current_command} shows its own name, fake-agent (a
 * script would show its interpreter); a copy under another name stands in
 * for a program that is not on inject_commands.
 *
 * --never-quiet stands in for an agent that never becomes ready (t1040):
 * it shows a new counter every 100 ms for ever, so its pane never goes
 * quiet. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

/* cat -v's rendering of one byte into out (at most 4 bytes); its length. */
static size_t visible(unsigned char c, char *out)
{
    size_t n = 0;
    if (c >= 128) {
        out[n++] = 'M';
        out[n++] = '-';
        c -= 128;
        if (c < 32) {
            out[n++] = '^';
            out[n++] = (char)(c + 64);
            return n;
        }
    } else if (c == '\t' || c == '\n') {
        out[n++] = (char)c;
        return n;
    } else if (c < 32) {
        out[n++] = '^';
        out[n++] = (char)(c + 64);
        return n;
    }
    if (c == 127) {
        out[n++] = '^';
        out[n++] = '?';
    } else {
        out[n++] = (char)c;
    }
    return n;
}

static void put(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

int main(int argc, char **argv)
{
    struct termios t;
    unsigned char in[4096];
    char out[4 * sizeof in];
    int log;

    if (argc == 2 && strcmp(argv[1], "--never-quiet") == 0) {
        for (unsigned long i = 0;; i++) {
            char line[64];
            int k = snprintf(line, sizeof line, "still starting %lu\r\n", i);
            put(1, line, (size_t)k);
            usleep(100 * 1000);
        }
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: fake-agent FILE [PIDFILE] | --never-quiet\n");
        return 2;
    }
    if (argc == 3) {
        FILE *f = fopen(argv[2], "w");
        if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
            perror(argv[2]);
            return 1;
        }
    }
    log = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (log < 0) {
        perror(argv[1]);
        return 1;
    }
    /* stty -echo -icanon -isig -iexten -ixon icrnl min 1 time 0 */
    if (tcgetattr(0, &t) == 0) {
        t.c_lflag &= ~(tcflag_t)(ECHO | ICANON | ISIG | IEXTEN);
        t.c_iflag &= ~(tcflag_t)IXON;
        t.c_iflag |= ICRNL;
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &t);
    }
    put(1, "\033[?2004h", 8); /* bracketed paste, as agent TUIs ask */
    for (;;) {
        ssize_t r = read(0, in, sizeof in);
        size_t n = 0;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            n += visible(in[i], out + n);
        put(1, out, n);
        put(log, out, n);
    }
    close(log);
    return 0;
}
