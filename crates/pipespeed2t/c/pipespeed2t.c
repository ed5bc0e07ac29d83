/* pipespeed2t.c: the C program the `pipespeed2t` crate reproduces, rewritten
 * from the description in book References: bradford-2001 (Bradford's
 * pipespeed2t.cpp; the listing is not in the article). The main thread
 * writes COUNT blocks of BYTES into a pipe, a second thread reads them; the
 * clock stops when every byte is read and the reader joined. Like the Rust
 * program the reader compares every piece with the stream it should get,
 * and both buffers start on a page boundary and are zeroed before the clock
 * starts (labkit::memory::PageAligned says why).
 * Build: cc -O2 -pthread -o pipespeed2t-c pipespeed2t.c
 * Run:   ./pipespeed2t-c COUNT BYTES [PIPE_SIZE] [--json]
 * Prints the Rust program's line, or with --json its JSON object (the
 * fields of pipespeed2::Report, which the runner reads it into). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd[2];
static long long bytes;
static char *data, *buf;
static long long received, mismatch = -1;

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

static void *reader(void *arg)
{
    (void)arg;
    for (;;) {
        ssize_t n = read(fd[0], buf, bytes);
        if (n == 0) break;
        if (n < 0) { if (errno == EINTR) continue; perror("read"); break; }
        long long start = received % bytes, first = n < bytes - start ? n : bytes - start;
        if (mismatch < 0 && (memcmp(buf, data + start, first)
                             || memcmp(buf + first, data, n - first)))
            mismatch = received;
        received += n;
    }
    close(fd[0]);
    return NULL;
}

int main(int argc, char *argv[])
{
    /* --json anywhere; the rest are COUNT BYTES [PIPE_SIZE]. */
    int json = 0, n = 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) json = 1; else argv[n++] = argv[i];
    argc = n;
    if (argc < 3) { fprintf(stderr, "usage: %s COUNT BYTES [PIPE_SIZE] [--json]\n", argv[0]); return 2; }
    long long count = number(argv[1], 1000);
    bytes = number(argv[2], 1024);
    if (count < 1 || bytes < 1) { fprintf(stderr, "bad COUNT or BYTES\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    if (pipe(fd)) { perror("pipe"); return 1; }
    int size = argc > 3 ? fcntl(fd[1], F_SETPIPE_SZ, (int)number(argv[3], 1024))
                        : fcntl(fd[1], F_GETPIPE_SZ);
    if (size < 0) { perror("fcntl"); return 1; }
    data = page_aligned(bytes);
    buf = page_aligned(bytes);
    for (long long i = 0; i < bytes; i++) data[i] = (char)((i % 251) ^ 0x5a);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t tid;
    if (pthread_create(&tid, NULL, reader, NULL)) { fprintf(stderr, "pthread_create failed\n"); return 1; }
    for (long long i = 0; i < count; i++) {
        for (long long done = 0; done < bytes;) {
            ssize_t n = write(fd[1], data + done, bytes - done);
            if (n < 0) { if (errno == EINTR) continue; perror("write"); return 1; }
            done += n;
        }
    }
    close(fd[1]);
    pthread_join(tid, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (mismatch >= 0 || received != count * bytes) {
        fprintf(stderr, "received %lld of %lld bytes, first mismatch at %lld\n",
                received, count * bytes, mismatch);
        return 1;
    }
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    double mb = count * bytes / s / 1e6;
    if (json)
        printf("{\"program\":\"pipespeed2t.c\",\"transport\":\"pipe\",\"mode\":\"threads\","
               "\"count\":%lld,\"block_bytes\":%lld,\"bytes\":%lld,\"elapsed_s\":%.9f,"
               "\"mb_per_s\":%.3f,\"pipe_size\":%d,\"verified\":true}\n",
               count, bytes, count * bytes, s, mb, size);
    else
        printf("%lld x %lld bytes = %lld bytes in %.6f s: %.1f MB/s "
               "(pipe, threads, pipe buffer %d bytes)\n",
               count, bytes, count * bytes, s, mb, size);
    return 0;
}
