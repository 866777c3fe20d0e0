/* SPDX-License-Identifier: Apache-2.0 */
/* asktry FILE TEXT STEP... — what a program asking through an ask file
 * does, step by step, each printing one line:
 *   write TEXT   one write(2) of TEXT: "wrote" or "write: ERRNO"
 *   nonblock     a read with O_NONBLOCK: "read: EAGAIN", or what read says
 *   poll MS      poll() for POLLIN: "readable" or "timeout"
 *   read         a blocking read to the end: "answer: BODY" or "read: ERRNO"
 *   sleep MS
 * FILE is opened O_RDWR first; TEXT is what each `write` writes.  Exit 0
 * unless a step could not run (2).  ERRNO is the name (ETIMEDOUT). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case EAGAIN:
        return "EAGAIN";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EBUSY:
        return "EBUSY";
    case EINVAL:
        return "EINVAL";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case EINTR:
        return "EINTR";
    case ENOENT:
        return "ENOENT";
    default:
        return strerror(e);
    }
}

/* read to the end; -1 and errno on a failed read before any byte */
static int read_all(int fd, char *buf, size_t cap, size_t *got)
{
    ssize_t n;
    *got = 0;
    while (*got < cap && (n = read(fd, buf + *got, cap - *got)) != 0) {
        if (n < 0)
            return *got ? 0 : -1;
        *got += (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static char buf[1 << 20];
    size_t got;
    int fd;

    if (argc < 4) {
        fprintf(stderr, "usage: asktry FILE TEXT STEP...\n");
        return 2;
    }
    fd = open(argv[1], O_RDWR);
    if (fd < 0) {
        printf("open: %s\n", ename(errno));
        return 0;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 3; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "write")) {
            if (write(fd, argv[2], strlen(argv[2])) < 0)
                printf("write: %s\n", ename(errno));
            else
                printf("wrote\n");
        } else if (!strcmp(s, "nonblock")) {
            int fl = fcntl(fd, F_GETFL);
            ssize_t n;
            fcntl(fd, F_SETFL, fl | O_NONBLOCK);
            n = read(fd, buf, sizeof buf);
            fcntl(fd, F_SETFL, fl);
            if (n < 0)
                printf("read: %s\n", ename(errno));
            else
                printf("answer: %.*s\n", (int)n, buf);
        } else if (!strcmp(s, "poll") && i + 1 < argc) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int rc = poll(&p, 1, atoi(argv[++i]));
            printf("%s\n", rc > 0 ? "readable" : "timeout");
        } else if (!strcmp(s, "read")) {
            if (read_all(fd, buf, sizeof buf, &got) < 0)
                printf("read: %s\n", ename(errno));
            else
                printf("answer: %.*s\n", (int)got, buf);
        } else if (!strcmp(s, "sleep") && i + 1 < argc) {
            usleep((useconds_t)atoi(argv[++i]) * 1000);
        } else {
            fprintf(stderr, "asktry: unknown step %s\n", s);
            return 2;
        }
    }
    close(fd);
    return 0;
}
