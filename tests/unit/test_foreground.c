/* SPDX-License-Identifier: Apache-2.0 */
/* test_foreground.c — the decision "may a message be typed into what runs
 * in this pane" (herdr/foreground.h): shells never, interpreters' prompts
 * never, the allow-list decides the rest, wrappers that only wait for a
 * child are looked through, and tmux and /proc must agree.  fg_read
 * against a real terminal is exercised by tests/integration/t0720. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "herdr/foreground.h"

static const char *const allow[] = {"claude", "codex", "aider", "gemini", "fake-agent", NULL};

/* A process for the tables below: "argv words separated by spaces". */
static fg_proc P(int pid, int ppid, const char *cmdline, const char *wchan, const char *comm)
{
    fg_proc p = {.pid = pid, .ppid = ppid, .pgrp = 100};
    p.argv = g_strsplit(cmdline, " ", -1);
    g_strlcpy(p.wchan, wchan ? wchan : "", sizeof p.wchan);
    g_strlcpy(p.comm, comm ? comm : "", sizeof p.comm);
    return p;
}

static void release(fg_proc *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g_strfreev(p[i].argv);
}

static fg_verdict judge1(const char *tmux_cmd, const char *cmdline, const char *comm)
{
    fg_proc p[1] = {P(100, 1, cmdline, "n_tty_read", comm)};
    fg_verdict v = fg_judge(tmux_cmd, p, 1, 100, allow);
    release(p, 1);
    return v;
}

static void shells_are_never_agents(void **state)
{
    static const char *const sh[] = {"sh",     "bash",   "dash",     "zsh", "fish", "ksh",
                                     "mksh",   "tcsh",   "csh",      "nu",  "pwsh", "xonsh",
                                     "elvish", "-bash",  "/bin/zsh", "ssh", "sudo", "su",
                                     "tmux",   "screen", "login",    NULL};
    (void)state;
    for (const char *const *s = sh; *s; s++) {
        char tmux_name[FG_NAME_MAX];
        fg_verdict v;
        assert_true(fg_is_shell(*s));
        fg_tmux_name(*s, tmux_name);
        v = judge1(tmux_name, *s, NULL);
        assert_int_equal(v.kind, FG_SHELL);
        /* tmux's name alone (no /proc) says the same */
        v = fg_judge(tmux_name, NULL, 0, 0, allow);
        assert_int_equal(v.kind, FG_SHELL);
    }
    /* listed or not: a shell stays a shell */
    const char *const with_bash[] = {"bash", NULL};
    fg_verdict v = fg_judge("bash", NULL, 0, 0, with_bash);
    assert_int_equal(v.kind, FG_SHELL);
    assert_string_equal(v.name, "bash");
}

static void a_shell_renamed_is_still_a_shell(void **state)
{
    (void)state;
    /* exec -a claude bash: argv0 says claude, the kernel says bash */
    fg_verdict v = judge1("claude", "claude", "bash");
    assert_int_equal(v.kind, FG_SHELL);
    assert_string_equal(v.name, "bash");
    v = judge1("claude", "claude", "claude");
    assert_int_equal(v.kind, FG_AGENT);
}

static void the_allow_list_decides(void **state)
{
    fg_verdict v;
    (void)state;
    v = judge1("claude", "claude", "claude");
    assert_int_equal(v.kind, FG_AGENT);
    assert_string_equal(v.name, "claude");
    v = judge1("claude", "/usr/local/bin/claude --resume", "claude");
    assert_int_equal(v.kind, FG_AGENT);
    v = judge1("vim", "vim notes.md", "vim");
    assert_int_equal(v.kind, FG_UNLISTED);
    assert_string_equal(v.name, "vim");
    /* no list: nothing is an agent */
    fg_proc p[1] = {P(100, 1, "claude", "", "claude")};
    v = fg_judge("claude", p, 1, 100, NULL);
    assert_int_equal(v.kind, FG_UNLISTED);
    release(p, 1);
    /* tmux alone */
    v = fg_judge("codex", NULL, 0, 0, allow);
    assert_int_equal(v.kind, FG_AGENT);
    v = fg_judge("top", NULL, 0, 0, allow);
    assert_int_equal(v.kind, FG_UNLISTED);
    v = fg_judge("", NULL, 0, 0, allow);
    assert_int_equal(v.kind, FG_NOTHING);
}

static void interpreters_are_known_by_their_program(void **state)
{
    fg_verdict v;
    (void)state;
    v = judge1("python3", "/usr/bin/python3 /home/u/.local/bin/aider --model x", "python3");
    assert_int_equal(v.kind, FG_AGENT);
    assert_string_equal(v.name, "aider");
    v = judge1("python3.12", "python3.12 -m aider", "python3.12");
    assert_int_equal(v.kind, FG_AGENT);
    v = judge1("node", "node --no-warnings /usr/bin/gemini", "node");
    assert_int_equal(v.kind, FG_AGENT);
    assert_string_equal(v.name, "gemini");
    v = judge1("node", "node -r ./hook.js /opt/codex/bin/codex.js", "node");
    assert_int_equal(v.kind, FG_AGENT);
    assert_string_equal(v.name, "codex");
    v = judge1("node", "node /srv/app/server.js", "node");
    assert_int_equal(v.kind, FG_UNLISTED);
    assert_string_equal(v.name, "server");
    /* an interpreter with no program is a prompt: never, even when listed */
    v = judge1("python3", "python3", "python3");
    assert_int_equal(v.kind, FG_INTERPRETER);
    v = judge1("node", "node -e 1", "node");
    assert_int_equal(v.kind, FG_INTERPRETER);
    const char *const with_python[] = {"python3", NULL};
    fg_proc p[1] = {P(100, 1, "python3 -i", "", "python3")};
    v = fg_judge("python3", p, 1, 100, with_python);
    assert_int_equal(v.kind, FG_INTERPRETER);
    release(p, 1);
    /* tmux alone cannot look into an interpreter: a prompt, to be safe */
    v = fg_judge("python3", NULL, 0, 0, allow);
    assert_int_equal(v.kind, FG_INTERPRETER);
    assert_true(fg_is_interpreter("python3.11"));
    assert_true(fg_is_interpreter("/usr/bin/node"));
    assert_false(fg_is_interpreter("pythonista"));
}

static void a_waiting_wrapper_is_looked_through(void **state)
{
    fg_verdict v;
    (void)state;
    /* bash -c 'claude; exec bash': bash waits for its only child */
    fg_proc a[2] = {P(100, 1, "bash -c claude;exec bash", "do_wait", "bash"),
                    P(101, 100, "claude", "ep_poll", "claude")};
    v = fg_judge("bash", a, 2, 100, allow);
    assert_int_equal(v.kind, FG_AGENT);
    assert_string_equal(v.name, "claude");
    assert_string_equal(v.via, "bash");
    release(a, 2);

    /* the same shell reading the terminal itself (claude in the background
     * of the same group): the shell gets what is typed */
    fg_proc b[2] = {P(100, 1, "bash script", "n_tty_read", "bash"),
                    P(101, 100, "claude", "ep_poll", "claude")};
    v = fg_judge("bash", b, 2, 100, allow);
    assert_int_equal(v.kind, FG_SHELL);
    release(b, 2);

    /* a pipeline (cat | tee) under a waiting shell: no single child */
    fg_proc c[3] = {P(100, 1, "bash recorder", "do_wait", "bash"),
                    P(101, 100, "cat -v", "n_tty_read", "cat"),
                    P(102, 100, "tee -a f", "pipe_read", "tee")};
    v = fg_judge("bash", c, 3, 100, allow);
    assert_int_equal(v.kind, FG_SHELL);
    assert_string_equal(v.name, "bash");
    release(c, 3);

    /* an agent waiting for a shell it started: the shell reads the terminal */
    fg_proc d[2] = {P(100, 1, "python3 /usr/bin/aider", "do_wait", "python3"),
                    P(101, 100, "bash -i", "n_tty_read", "bash")};
    v = fg_judge("python3", d, 2, 100, allow);
    assert_int_equal(v.kind, FG_SHELL);
    assert_string_equal(v.via, "aider");
    release(d, 2);

    /* a waiting shell whose child is some other program */
    fg_proc e[2] = {P(100, 1, "bash -c sleep 100;bash", "do_wait", "bash"),
                    P(101, 100, "sleep 100", "hrtimer_nanosleep", "sleep")};
    v = fg_judge("bash", e, 2, 100, allow);
    assert_int_equal(v.kind, FG_UNLISTED);
    assert_string_equal(v.name, "sleep");
    release(e, 2);
}

static void tmux_and_proc_must_agree(void **state)
{
    fg_verdict v;
    (void)state;
    fg_proc p[1] = {P(100, 1, "claude", "", "claude")};
    v = fg_judge("bash", p, 1, 100, allow);
    assert_int_equal(v.kind, FG_UNSURE);
    assert_string_equal(v.name, "bash");
    assert_string_equal(v.other, "claude");
    /* the leader is not in the list read: judge tmux's name */
    v = fg_judge("bash", p, 1, 999, allow);
    assert_int_equal(v.kind, FG_SHELL);
    release(p, 1);
    /* a zombie leader (empty command line) */
    fg_proc z[1] = {P(100, 1, "", "", "")};
    v = fg_judge("", z, 1, 100, allow);
    assert_int_equal(v.kind, FG_NOTHING);
    release(z, 1);
}

static void words_say_what_to_do(void **state)
{
    char why[512];
    fg_verdict v;
    (void)state;
    v = fg_judge("bash", NULL, 0, 0, allow);
    fg_explain(&v, "tmux pane %3 titled delta", why, sizeof why);
    assert_string_equal(why,
                        "stalled: tmux pane %3 titled delta runs bash, not an agent: start the "
                        "agent there, or list its command in inject_commands");
    v = fg_judge("vim", NULL, 0, 0, allow);
    fg_explain(&v, "tmux pane %3 titled delta", why, sizeof why);
    assert_string_equal(why, "stalled: tmux pane %3 titled delta runs vim, which is not in "
                             "inject_commands: start the agent there, or add vim to "
                             "inject_commands if it is one");
    v = fg_judge("", NULL, 0, 0, allow);
    fg_explain(&v, "tmux pane %3 titled delta", why, sizeof why);
    assert_non_null(strstr(why, "runs nothing"));
}

static void command_names(void **state)
{
    (void)state;
    assert_true(fg_command_ok("claude"));
    assert_true(fg_command_ok("cursor-agent"));
    assert_true(fg_command_ok("python3.12"));
    assert_false(fg_command_ok(""));
    assert_false(fg_command_ok("bash"));
    assert_false(fg_command_ok("/usr/bin/claude"));
    assert_false(fg_command_ok("cla ude"));
    /* every default is acceptable */
    char **d = g_strsplit(FG_DEFAULT_COMMANDS, ":", -1);
    for (char **s = d; *s; s++)
        assert_true(fg_command_ok(*s));
    g_strfreev(d);
}

static void tmux_names(void **state)
{
    char n[FG_NAME_MAX];
    (void)state;
    fg_tmux_name("/usr/bin/python3", n);
    assert_string_equal(n, "python3");
    fg_tmux_name("-bash", n);
    assert_string_equal(n, "bash");
    fg_tmux_name("npm exec foo", n);
    assert_string_equal(n, "npm");
    fg_tmux_name("./fake-agent", n);
    assert_string_equal(n, "./fake-agent");
}

/* fg_read refuses a pid that does not exist, and a process without a
 * controlling terminal (this one, under scripts/run-unit). */
static void read_without_a_terminal(void **state)
{
    fg_proc *p = NULL;
    size_t n = 7;
    int leader = 0;
    (void)state;
    assert_int_equal(fg_read(0, NULL, &p, &n, &leader), -1);
    assert_int_equal(fg_read(999999999, NULL, &p, &n, &leader), -1);
    assert_null(p);
    assert_int_equal(n, 0);
    int tty = open("/dev/tty", O_RDONLY | O_CLOEXEC);
    if (tty >= 0) {
        close(tty);
        skip(); /* run from a terminal: this process has one */
    }
    assert_int_equal(fg_read(getpid(), NULL, &p, &n, &leader), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shells_are_never_agents),
        cmocka_unit_test(a_shell_renamed_is_still_a_shell),
        cmocka_unit_test(the_allow_list_decides),
        cmocka_unit_test(interpreters_are_known_by_their_program),
        cmocka_unit_test(a_waiting_wrapper_is_looked_through),
        cmocka_unit_test(tmux_and_proc_must_agree),
        cmocka_unit_test(words_say_what_to_do),
        cmocka_unit_test(command_names),
        cmocka_unit_test(tmux_names),
        cmocka_unit_test(read_without_a_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
