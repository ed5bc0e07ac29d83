/* thread-private.c: thread.c with a private buffer per thread, for the
 * exercises of the book's chapter "Fork or thread". Same arguments and
 * the same work as crates/thread/c/thread.c, but no thread touches a
 * shared FILE: each formats its lines into a buffer of its own and writes
 * whole lines with write(2), as the Rust `thread` program does.
 * Build: cc -O2 -pthread -Wall -o thread-private thread-private.c
 * Run:   ./thread-private P COUNT LOG [LINE_BYTES] */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_fd;
static int count;
static char str[4096] = "hello linux";

/* One buffer of whole lines for one file descriptor. */
struct buf { int fd; size_t used; char data[4096]; };

static void flush(struct buf *b)
{
    if (b->used > 0 && write(b->fd, b->data, b->used) < 0)
        perror("write");
    b->used = 0;
}

static void line(struct buf *b, int j)
{
    char one[4200];
    int n = snprintf(one, sizeof one, "[%d]%s\n", j, str);
    if (b->used + n > sizeof b->data) /* the line would not fit: flush */
        flush(b);
    memcpy(b->data + b->used, one, n);
    b->used += n;
}

static void *worker(void *arg)
{
    (void)arg;
    struct buf out = { .fd = 1 }, file = { .fd = log_fd };
    for (int j = 0; j < count; j++) {
        line(&out, j);
        line(&file, j);
    }
    flush(&out);
    flush(&file);
    return NULL;
}

int main(int argc, char *argv[])
{
    int p_number = argc > 1 ? atoi(argv[1]) : 255;
    count = argc > 2 ? atoi(argv[2]) : 100;
    const char *path = argc > 3 ? argv[3] : "logFile.log";
    if (argc > 4) { /* the 256-byte variant: "hello linux hello li..." */
        int n = atoi(argv[4]);
        if (n < 1 || n > 4000) { fprintf(stderr, "LINE_BYTES: 1 to 4000\n"); return 2; }
        for (int i = 0; i < n; i++)
            str[i] = "hello linux "[i % 12];
        str[n] = '\0';
    }
    /* What fopen(path, "a+") opens, without the FILE. */
    log_fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0666);
    if (log_fd < 0) { perror(path); return 1; }

    pthread_t *tid = calloc(p_number, sizeof *tid);
    int made = 0;
    for (; made < p_number; made++) {
        int rc = pthread_create(&tid[made], NULL, worker, NULL);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            break;
        }
    }
    for (int i = 0; i < made; i++)
        pthread_join(tid[i], NULL);
    close(log_fd);
    printf("Okay\n");
    return 0;
}
