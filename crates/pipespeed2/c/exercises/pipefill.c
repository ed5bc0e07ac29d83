/* pipefill.c: how many bytes does a new pipe hold? It depends on the size
 * of the writes. For each BYTES given, make a new pipe, make its write end
 * non-blocking, and write blocks of BYTES until write(2) says EAGAIN (the
 * pipe is full); print the bytes it took and the calls that did it.
 * An exercise of the book's chapter "Pipes: how fast, by block size".
 * Build: cc -O2 -Wall -o /tmp/pipefill crates/pipespeed2/c/exercises/pipefill.c
 * Run:   /tmp/pipefill 1 1000 3072 4096 5000 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s BYTES...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        long n = strtol(argv[i], NULL, 10);
        if (n < 1 || n > (1 << 20)) {
            fprintf(stderr, "pipefill: '%s' is not a size from 1 to 1048576\n", argv[i]);
            return 2;
        }
        char *block = calloc(1, n);
        int fd[2];
        if (!block || pipe(fd) != 0) { perror("pipefill"); return 1; }
        /* Non-blocking: a full pipe makes write return -1/EAGAIN instead
         * of sleeping, since no one will ever read this pipe. */
        fcntl(fd[1], F_SETFL, O_NONBLOCK);
        long total = 0, calls = 0, partial = 0;
        for (;;) {
            ssize_t w = write(fd[1], block, n);
            if (w < 0) {
                if (errno == EAGAIN) break;
                perror("write");
                return 1;
            }
            total += w;
            calls++;
            if (w < n) partial++;   /* only a write larger than PIPE_BUF */
        }
        printf("%7ld-byte writes: the pipe took %6ld bytes in %5ld writes"
               " (%ld short), F_GETPIPE_SZ %d\n",
               n, total, calls, partial, fcntl(fd[1], F_GETPIPE_SZ));
        close(fd[0]);
        close(fd[1]);
        free(block);
    }
    return 0;
}
