/* pipespeed2.c: the C program the `pipespeed2` crate reproduces, rewritten
 * from the description in book References: bradford-2001 (Bradford's pipespeed2.cpp;
 * the listing is not in the article). One thread writes a block into a pipe
 * and reads it back, COUNT times; the rate is printed. Like the Rust
 * program it grows the pipe when asked, refuses a block that cannot fit,
 * keeps the write end non-blocking, and compares the last block read back.
 * Both buffers start on a page boundary and are zeroed before the clock
 * starts, as the Rust program's are. What it shares with pipespeed2t.c
 * (arguments, buffers, the report) is in pipespeed.c.
 * Build: cc -O2 -o pipespeed2-c pipespeed2.c pipespeed.c
 * Run:   ./pipespeed2-c COUNT BYTES [PIPE_SIZE] [--json]
 * Prints the Rust program's line, or with --json its JSON object (the
 * fields of pipespeed2::Report, which the runner reads it into). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipespeed.h"

int main(int argc, char *argv[])
{
    struct run r = setup(argc, argv);
    long long count = r.count, bytes = r.bytes;
    int *fd = r.fd;
    if (bytes > r.size) { fprintf(stderr, "a %lld-byte block does not fit a %d-byte pipe\n", bytes, r.size); return 2; }
    fcntl(fd[1], F_SETFL, O_NONBLOCK);
    char *data = pattern(bytes), *back = page_aligned(bytes);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    // ANCHOR: loop
    for (long long i = 0; i < count; i++) {
        if (write(fd[1], data, bytes) != bytes) { perror("write"); return 1; }
        for (long long got = 0; got < bytes;) {
            ssize_t n = read(fd[0], back + got, bytes - got);
            if (n <= 0) { if (n < 0 && errno == EINTR) continue; perror("read"); return 1; }
            got += n;
        }
    }
    // ANCHOR_END: loop
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (memcmp(data, back, bytes)) { fprintf(stderr, "block differs\n"); return 1; }
    report(&r, "pipespeed2.c", "single thread", t0, t1);
    return 0;
}
