/* SPDX-License-Identifier: Apache-2.0 */
/* fake-tui — a stand-in for an agent's TUI in a real tmux pane, for the
 * typing tests (t0711-t0719): what it records is what the tests count.
 *
 *   fake-tui RECORD [--swallow-ms N] [--hook CMD] [--session ID]
 *            [--transcript PATH] [--pidfile FILE] [--prompt STR]
 *
 * Like Claude Code, Codex and the like it puts its terminal in raw mode
 * (no echo, no canonical lines, no signals, no CR-to-NL: Enter arrives as
 * the carriage return it is) and asks for bracketed paste (ESC[?2004h).
 * It keeps one input line: a paste (between ESC[200~ and ESC[201~) and
 * keys typed outside a paste (a person's draft, typed through an attached
 * tmux client) both go into it; DEL erases a character.  A carriage
 * return submits the input line — unless it arrives within N ms of a
 * paste's end (--swallow-ms, default 0): a TUI that still treats the
 * paste as in progress swallows it, as real ones do, and the text stays.
 *
 * It appends {"ready":true} to RECORD once its terminal is set up; then
 * each submission one JSON line:
 *   {"n":K,"text":"...","hook_ms":M,"hook_rc":R}
 * (n counts from 1; text is exactly what was submitted, a paste's CRs
 * turned into LFs; hook_ms/hook_rc only with --hook).  Each paste's end
 * appends {"pasted":true}, each swallowed carriage return
 * {"swallowed":true,"after_paste_ms":M}.
 * With --hook CMD, every submission first runs `sh -c CMD` with the JSON
 * Claude Code hands a UserPromptSubmit hook on its stdin: session_id,
 * transcript_path, cwd, hook_event_name "UserPromptSubmit", prompt; it
 * waits for it, as Claude Code does.
 *
 * The screen shows what was submitted so far, then the input line after
 * "> " (--prompt: another marker, "" none) (a newline in it starts a new screen line), the cursor at its end:
 * what `tmux capture-pane` sees, as on a real TUI.  A compiled program,
 * so #{pane_current_command} shows fake-tui. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define INPUT_MAX (1 << 20)

static char input[INPUT_MAX];
static size_t input_len;
static char *last_sub[4];
static int nsub;
static const char *prompt_marker = "> ";

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void puts1(const char *s)
{
    put(1, s, strlen(s));
}

/* s as a JSON string (quotes included) on f */
static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void redraw(void)
{
    puts1("\033[H\033[2J");
    for (int i = nsub > 4 ? nsub - 4 : 0; i < nsub; i++) {
        char line[80];
        snprintf(line, sizeof line, "submitted %d: %.50s\r\n", i + 1, last_sub[i % 4]);
        for (char *c = line; *c; c++)
            if (*c == '\n' && c[1] != '\0')
                *c = ' ';
        puts1(line);
    }
    puts1(prompt_marker);
    for (size_t i = 0; i < input_len; i++)
        put(1, input[i] == '\n' ? "\r\n  " : &input[i], input[i] == '\n' ? 4 : 1);
}

/* Runs the hook with the JSON on its stdin; its exit status, its time. */
static int run_hook(const char *cmd, const char *session, const char *transcript, int *ms)
{
    char cwd[4096], tmpl[] = "/tmp/fake-tui-hook.XXXXXX";
    long long t0 = now_ms();
    int fd = mkstemp(tmpl), status = -1;
    FILE *f;
    pid_t pid;

    if (fd < 0)
        return -1;
    unlink(tmpl);
    f = fdopen(fd, "w+");
    if (!getcwd(cwd, sizeof cwd))
        strcpy(cwd, "/");
    fputs("{\"session_id\":", f);
    json_str(f, session, strlen(session));
    fputs(",\"transcript_path\":", f);
    json_str(f, transcript, strlen(transcript));
    fputs(",\"cwd\":", f);
    json_str(f, cwd, strlen(cwd));
    fputs(",\"permission_mode\":\"default\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":",
          f);
    json_str(f, input, input_len);
    fputs("}\n", f);
    fflush(f);
    lseek(fd, 0, SEEK_SET);
    pid = fork();
    if (pid == 0) {
        dup2(fd, 0);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    fclose(f);
    *ms = (int)(now_ms() - t0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void submit(FILE *rec, const char *hook, const char *session, const char *transcript)
{
    int ms = 0, rc = 0;
    if (input_len == 0)
        return;
    if (hook)
        rc = run_hook(hook, session, transcript, &ms);
    fprintf(rec, "{\"n\":%d,\"text\":", nsub + 1);
    json_str(rec, input, input_len);
    if (hook)
        fprintf(rec, ",\"hook_ms\":%d,\"hook_rc\":%d", ms, rc);
    fputs("}\n", rec);
    fflush(rec);
    free(last_sub[nsub % 4]);
    last_sub[nsub % 4] = strndup(input, input_len);
    nsub++;
    input_len = 0;
}

int main(int argc, char **argv)
{
    const char *record = NULL, *hook = NULL, *session = "fake-session-1", *pidfile = NULL;
    const char *transcript = "/tmp/fake-tui-transcript.jsonl";
    long swallow_ms = 0;
    long long paste_end = -1;
    struct termios t;
    FILE *rec;
    int in_paste = 0;
    char esc[16];
    size_t esc_len = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--swallow-ms") && i + 1 < argc)
            swallow_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--hook") && i + 1 < argc)
            hook = argv[++i];
        else if (!strcmp(argv[i], "--session") && i + 1 < argc)
            session = argv[++i];
        else if (!strcmp(argv[i], "--transcript") && i + 1 < argc)
            transcript = argv[++i];
        else if (!strcmp(argv[i], "--pidfile") && i + 1 < argc)
            pidfile = argv[++i];
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc)
            prompt_marker = argv[++i];
        else if (!record && argv[i][0] != '-')
            record = argv[i];
        else {
            fprintf(stderr, "usage: fake-tui RECORD [--swallow-ms N] [--hook CMD] [--session ID] "
                            "[--transcript PATH] [--pidfile FILE] [--prompt STR]\n");
            return 2;
        }
    }
    if (!record) {
        fprintf(stderr, "fake-tui: no RECORD file\n");
        return 2;
    }
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
            perror(pidfile);
            return 1;
        }
    }
    rec = fopen(record, "a");
    if (!rec) {
        perror(record);
        return 1;
    }
    /* raw mode, as cfmakeraw: Enter reaches us as \r */
    if (tcgetattr(0, &t) == 0) {
        t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
        t.c_oflag &= ~(tcflag_t)OPOST;
        t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
        t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
        t.c_cflag |= CS8;
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &t);
    }
    puts1("\033[?2004h"); /* bracketed paste, as agent TUIs ask */
    redraw();
    fputs("{\"ready\":true}\n", rec); /* the terminal is set up: a test may type */
    fflush(rec);
    for (;;) {
        unsigned char buf[4096];
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++) {
            unsigned char c = buf[i];
            if (esc_len > 0 || c == 0x1b) {
                /* an escape sequence: ESC [ params final */
                if (esc_len < sizeof esc)
                    esc[esc_len++] = (char)c;
                if (esc_len == 1 || (esc_len == 2 && c == '['))
                    continue;
                if (esc_len > 2 && c >= 0x20 && c < 0x40 && esc_len < sizeof esc)
                    continue;
                if (esc_len == 6 && !memcmp(esc, "\033[200~", 6))
                    in_paste = 1;
                else if (esc_len == 6 && !memcmp(esc, "\033[201~", 6)) {
                    in_paste = 0;
                    paste_end = now_ms();
                    fputs("{\"pasted\":true}\n", rec);
                    fflush(rec);
                }
                esc_len = 0; /* any other sequence is ignored */
                continue;
            }
            if (c == '\r' && !in_paste) {
                long long since = paste_end < 0 ? -1 : now_ms() - paste_end;
                if (since >= 0 && since < swallow_ms) {
                    fprintf(rec, "{\"swallowed\":true,\"after_paste_ms\":%lld}\n", since);
                    fflush(rec);
                } else {
                    submit(rec, hook, session, transcript);
                }
            } else if (c == 0x7f || c == 0x08) {
                if (input_len > 0)
                    input_len--;
            } else if ((c == '\r' || c == '\n' || c == '\t' || c >= 0x20) &&
                       input_len < INPUT_MAX) {
                input[input_len++] = c == '\r' ? '\n' : (char)c;
            }
        }
        redraw();
    }
    fclose(rec);
    return 0;
}
