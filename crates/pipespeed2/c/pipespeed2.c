/* pipespeed2.c: the C program the `pipespeed2` crate reproduces, rewritten
 * from the description in book References: bradford-2001 (Bradford's pipespeed2.cpp;
 * the listing is not in the article). One thread writes a block into a pipe
 * and reads it back, COUNT times; the rate is printed. Like the Rust
 * program it grows the pipe when asked, refuses a block that cannot fit,
 * keeps the write end non-blocking, and compares the last block read back.
 * Both buffers start on a page boundary and are zeroed before the clock
 * starts, as the Rust program's are (labkit::memory::PageAligned says why).
 * COUNT takes the article's "500k" spelling (k = 1000); BYTES a "4k" (1024).
 * Build: cc -O2 -o pipespeed2-c pipespeed2.c
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

/* A zeroed buffer of n bytes that starts on a page boundary. */
static char *page_aligned(long long n)
{
    char *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (!p) { perror("aligned_alloc"); exit(1); }
    return memset(p, 0, n);
}

static long long number(const char *s, long long k)
{
    char *end;
    long long n = strtoll(s, &end, 10);
    if (*end == 'k' || *end == 'K') n *= k;
    else if (*end == 'm' || *end == 'M') n *= k * k;
    return n;
}

int main(int argc, char *argv[])
{
    /* --json anywhere; the rest are COUNT BYTES [PIPE_SIZE]. */
    int json = 0, n = 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) json = 1; else argv[n++] = argv[i];
    argc = n;
    if (argc < 3) { fprintf(stderr, "usage: %s COUNT BYTES [PIPE_SIZE] [--json]\n", argv[0]); return 2; }
    long long count = number(argv[1], 1000), bytes = number(argv[2], 1024);
    if (count < 1 || bytes < 1) { fprintf(stderr, "bad COUNT or BYTES\n"); return 2; }
    int fd[2];
    if (pipe(fd)) { perror("pipe"); return 1; }
    int size = argc > 3 ? fcntl(fd[1], F_SETPIPE_SZ, (int)number(argv[3], 1024))
                        : fcntl(fd[1], F_GETPIPE_SZ);
    if (size < 0) { perror("fcntl"); return 1; }
    if (bytes > size) { fprintf(stderr, "a %lld-byte block does not fit a %d-byte pipe\n", bytes, size); return 2; }
    fcntl(fd[1], F_SETFL, O_NONBLOCK);
    char *data = page_aligned(bytes), *back = page_aligned(bytes);
    for (long long i = 0; i < bytes; i++) data[i] = (char)((i % 251) ^ 0x5a);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long long i = 0; i < count; i++) {
        if (write(fd[1], data, bytes) != bytes) { perror("write"); return 1; }
        for (long long got = 0; got < bytes;) {
            ssize_t n = read(fd[0], back + got, bytes - got);
            if (n <= 0) { if (n < 0 && errno == EINTR) continue; perror("read"); return 1; }
            got += n;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (memcmp(data, back, bytes)) { fprintf(stderr, "block differs\n"); return 1; }
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    double mb = count * bytes / s / 1e6;
    if (json)
        printf("{\"program\":\"pipespeed2.c\",\"transport\":\"pipe\",\"mode\":\"single thread\","
               "\"count\":%lld,\"block_bytes\":%lld,\"bytes\":%lld,\"elapsed_s\":%.9f,"
               "\"mb_per_s\":%.3f,\"pipe_size\":%d,\"verified\":true}\n",
               count, bytes, count * bytes, s, mb, size);
    else
        printf("%lld x %lld bytes = %lld bytes in %.6f s: %.1f MB/s "
               "(pipe, single thread, pipe buffer %d bytes)\n",
               count, bytes, count * bytes, s, mb, size);
    return 0;
}
