/* pipespeed2t.c: the C program the `pipespeed2t` crate reproduces, rewritten
 * from the description in book References: bradford-2001 (Bradford's
 * pipespeed2t.cpp; the listing is not in the article). The main thread
 * writes COUNT blocks of BYTES into a pipe, a second thread reads them; the
 * clock stops when every byte is read and the reader joined. Like the Rust
 * program the reader compares every piece with the stream it should get,
 * and both buffers start on a page boundary and are zeroed before the clock
 * starts. What it shares with pipespeed2.c (arguments, buffers, the
 * report) is in ../../pipespeed2/c/pipespeed.c.
 * Build: cc -O2 -pthread -o pipespeed2t-c pipespeed2t.c \
 *            ../../pipespeed2/c/pipespeed.c
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

#include "../../pipespeed2/c/pipespeed.h"

static int fd[2];
static long long bytes;
static char *data, *buf;
static long long received, mismatch = -1;

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
    struct run r = setup(argc, argv);
    long long count = r.count;
    bytes = r.bytes;
    fd[0] = r.fd[0];
    fd[1] = r.fd[1];
    signal(SIGPIPE, SIG_IGN);
    data = pattern(bytes);
    buf = page_aligned(bytes);

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
    report(&r, "pipespeed2t.c", "threads", t0, t1);
    return 0;
}
