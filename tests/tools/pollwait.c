/* SPDX-License-Identifier: Apache-2.0 */
/* pollwait FILE TIMEOUT_MS — what a program waiting on an inbox does:
 * read what is there, then poll() for more.  Prints "readable" and the
 * new bytes when poll wakes, "timeout" when it does not; exit 0 / 1. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[65536];
    ssize_t n;
    int fd, rc;
    struct pollfd p;

    if (argc != 3) {
        fprintf(stderr, "usage: pollwait FILE TIMEOUT_MS\n");
        return 2;
    }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 2;
    }
    while ((n = read(fd, buf, sizeof buf)) > 0)
        ;
    printf("ready\n");
    fflush(stdout);
    p.fd = fd;
    p.events = POLLIN;
    rc = poll(&p, 1, atoi(argv[2]));
    if (rc <= 0) {
        printf("timeout\n");
        return 1;
    }
    printf("readable\n");
    while ((n = read(fd, buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t)n, stdout);
    return 0;
}
