/* pipespeed.c: what pipespeed2.c and pipespeed2t.c share, compiled with
 * each of them: the arguments (COUNT in the article's "500k" spelling,
 * k = 1000; BYTES and PIPE_SIZE as "4k", k = 1024; --json anywhere), the
 * pipe and its size, page-aligned buffers, and the report: the Rust
 * program's line, or with --json its JSON object (the fields of
 * pipespeed2::Report, which the runner reads it into). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipespeed.h"

/* A zeroed buffer of n bytes that starts on a page boundary, as the Rust
 * programs' are (labkit::memory::PageAligned says why). */
char *page_aligned(long long n)
{
    char *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (!p) { perror("aligned_alloc"); exit(1); }
    return memset(p, 0, n);
}

/* The block every program sends: not all equal, not periodic in a power
 * of two (as pipespeed2::pattern). */
char *pattern(long long n)
{
    char *data = page_aligned(n);
    for (long long i = 0; i < n; i++) data[i] = (char)((i % 251) ^ 0x5a);
    return data;
}

static long long number(const char *s, long long k)
{
    char *end;
    long long n = strtoll(s, &end, 10);
    if (*end == 'k' || *end == 'K') n *= k;
    else if (*end == 'm' || *end == 'M') n *= k * k;
    return n;
}

struct run setup(int argc, char *argv[])
{
    struct run r = { 0 };
    int n = 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) r.json = 1; else argv[n++] = argv[i];
    if (n < 3) { fprintf(stderr, "usage: %s COUNT BYTES [PIPE_SIZE] [--json]\n", argv[0]); exit(2); }
    r.count = number(argv[1], 1000);
    r.bytes = number(argv[2], 1024);
    if (r.count < 1 || r.bytes < 1) { fprintf(stderr, "bad COUNT or BYTES\n"); exit(2); }
    if (pipe(r.fd)) { perror("pipe"); exit(1); }
    r.size = n > 3 ? fcntl(r.fd[1], F_SETPIPE_SZ, (int)number(argv[3], 1024))
                   : fcntl(r.fd[1], F_GETPIPE_SZ);
    if (r.size < 0) { perror("fcntl"); exit(1); }
    return r;
}

void report(const struct run *r, const char *program, const char *mode,
            struct timespec t0, struct timespec t1)
{
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    long long total = r->count * r->bytes;
    if (r->json)
        printf("{\"program\":\"%s\",\"transport\":\"pipe\",\"mode\":\"%s\","
               "\"count\":%lld,\"block_bytes\":%lld,\"bytes\":%lld,\"elapsed_s\":%.9f,"
               "\"mb_per_s\":%.9g,\"pipe_size\":%d,\"verified\":true}\n",
               program, mode, r->count, r->bytes, total, s, total / s / 1e6, r->size);
    else
        printf("%lld x %lld bytes = %lld bytes in %.6f s: %.1f MB/s "
               "(pipe, %s, pipe buffer %d bytes)\n",
               r->count, r->bytes, total, s, total / s / 1e6, mode, r->size);
}
