/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-probe — a spawned agent that tries what the spawn sandbox forbids
 * and records what it could do (t1051).
 *
 *   sandbox-probe RECORD ACTION...
 *     read:PATH        open and read PATH (a file) to its end
 *     write:PATH=TEXT  open PATH for writing (created) and write TEXT
 *     env              every variable whose name or value mentions the broker
 *     run:COMMAND      sh -c COMMAND, its exit status
 *
 * One line per action appended to RECORD: "read PATH: N bytes", "read PATH:
 * error STRERROR", "write PATH: ok" or ": error ...", "env: none" or "env:
 * NAME" for each variable holding "amqp" or "FLEET_BROKER", "run: exit N";
 * then "done". Afterwards it stays in the foreground like an agent (a
 * compiled program, so that the injector knows it by name), reading and
 * dropping what is typed, until its terminal goes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void act(FILE *rec, const char *a)
{
    if (!strncmp(a, "read:", 5)) {
        char buf[4096];
        long total = 0;
        ssize_t k;
        int fd = open(a + 5, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(rec, "read %s: error %s\n", a + 5, strerror(errno));
            return;
        }
        while ((k = read(fd, buf, sizeof buf)) > 0)
            total += k;
        if (k < 0)
            fprintf(rec, "read %s: error %s\n", a + 5, strerror(errno));
        else
            fprintf(rec, "read %s: %ld bytes\n", a + 5, total);
        close(fd);
    } else if (!strncmp(a, "write:", 6)) {
        char path[4096];
        const char *eq = strchr(a + 6, '=');
        size_t len = eq ? (size_t)(eq - (a + 6)) : strlen(a + 6);
        const char *text = eq ? eq + 1 : "x";
        int fd;
        snprintf(path, sizeof path, "%.*s", (int)len, a + 6);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0) {
            fprintf(rec, "write %s: error %s\n", path, strerror(errno));
            return;
        }
        fprintf(rec, "write %s: ok\n", path);
    } else if (!strcmp(a, "env")) {
        int found = 0;
        for (char **e = environ; *e; e++)
            if (strstr(*e, "amqp") || strstr(*e, "FLEET_BROKER")) {
                fprintf(rec, "env: %.*s\n", (int)strcspn(*e, "="), *e);
                found = 1;
            }
        if (!found)
            fprintf(rec, "env: none\n");
    } else if (!strncmp(a, "run:", 4)) {
        fflush(rec);
        int st = system(a + 4);
        fprintf(rec, "run: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    } else {
        fprintf(rec, "unknown action %s\n", a);
    }
}

int main(int argc, char **argv)
{
    FILE *rec;
    char buf[256];

    if (argc < 2) {
        fprintf(stderr, "usage: sandbox-probe RECORD ACTION...\n");
        return 2;
    }
    rec = fopen(argv[1], "a");
    if (!rec) {
        perror(argv[1]);
        return 1;
    }
    setvbuf(rec, NULL, _IOLBF, 0);
    for (int i = 2; i < argc; i++)
        act(rec, argv[i]);
    fprintf(rec, "done\n");
    fclose(rec);
    while (read(0, buf, sizeof buf) > 0)
        ;
    return 0;
}
