/* SPDX-License-Identifier: Apache-2.0 */
/* writevn FILE SEGMENTS BYTES [OFFSET] — one writev(2) of SEGMENTS
 * segments of BYTES bytes each ("a" to "z" by segment, wrapping) to FILE:
 * what a program gathering a message from many pieces does.  Each segment
 * starts OFFSET bytes (default 0) into a page of its own (the kernel pins
 * user pages per segment for a direct write, and cuts a request at its
 * page limit, not at a byte count).  With one segment BYTES may exceed a
 * page: one write(2) from a buffer OFFSET bytes into a page.  Prints what
 * writev returned: "wrote N" (exit 0, or 3 when N is short) or the
 * error's text (exit 1). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long page = sysconf(_SC_PAGESIZE);
    long nseg, len, off = argc == 5 ? atol(argv[4]) : 0, stride;
    struct iovec *iov;
    char *mem;
    ssize_t n;
    int fd;

    if (argc < 4 || argc > 5 || (nseg = atol(argv[2])) < 1 || nseg > IOV_MAX ||
        (len = atol(argv[3])) < 1 || (nseg > 1 && len > page) || off < 0 || off >= page) {
        fprintf(stderr,
                "usage: writevn FILE SEGMENTS(1..%d) BYTES(1..%ld, any for one segment) "
                "[OFFSET(0..%ld)]\n",
                IOV_MAX, page, page - 1);
        return 2;
    }
    /* each segment in pages of its own: OFFSET + BYTES rounded up to pages */
    stride = (off + len + page - 1) / page * page;
    mem = mmap(NULL, (size_t)(nseg * stride), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
               -1, 0);
    iov = calloc((size_t)nseg, sizeof *iov);
    if (mem == MAP_FAILED || !iov) {
        perror("writevn");
        return 2;
    }
    for (long i = 0; i < nseg; i++) {
        memset(mem + i * stride + off, 'a' + (int)(i % 26), (size_t)len);
        iov[i].iov_base = mem + i * stride + off;
        iov[i].iov_len = (size_t)len;
    }
    fd = open(argv[1], O_WRONLY);
    if (fd < 0) {
        perror(argv[1]);
        free(iov);
        return 2;
    }
    n = writev(fd, iov, (int)nseg);
    if (n < 0)
        printf("%s\n", strerror(errno));
    else
        printf("wrote %zd\n", n);
    close(fd);
    free(iov);
    munmap(mem, (size_t)(nseg * stride));
    return n < 0 ? 1 : n == nseg * len ? 0 : 3;
}
