/* ctxtouch.c: ctxswitch's token loop, with a working set.
 *
 * An exercise of the book's "What a context switch costs". Two tasks, A
 * and B, both pinned to one CPU, bounce a byte over two pipes as ctxswitch
 * does. After each token, each task reads one byte of every 64-byte cache
 * line of an array of its own, KIB KiB long (lmbench's lat_ctx does the
 * same with its -s size). It prints the microseconds of one switch with
 * the pipe calls and the touching subtracted, both timed in one task that
 * never switches, with a warm cache: what is left is the switch plus
 * bringing back the part of the array that the other task evicted.
 *
 * build: cc -O2 -pthread -Wall -o ctxtouch crates/ctxswitch/c/exercises/ctxtouch.c
 * run:   ./ctxtouch threads 256        (MODE threads|processes, KIB 0-65536,
 *        ./ctxtouch processes 256 5000  then round trips, default 10000)
 * exit:  0 ok, 1 a call failed, 2 bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define WARMUP 1000

static size_t bytes;            /* each task's array */
static long rounds;             /* timed round trips */
static int a_to_b[2], b_to_a[2];
static volatile unsigned long sink; /* keeps the reads from being dropped */

static void die(const char *what)
{
    fprintf(stderr, "ctxtouch: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A task's own array, written once so that its pages are its own. */
static unsigned char *own_array(void)
{
    unsigned char *a = malloc(bytes ? bytes : 1);
    if (!a)
        die("malloc");
    memset(a, 1, bytes);
    return a;
}

/* Read one byte of every cache line of the array. */
static void touch(const unsigned char *a)
{
    unsigned long s = 0;
    for (size_t i = 0; i < bytes; i += LINE)
        s += a[i];
    sink += s;
}

static void put(int fd, char c)
{
    if (write(fd, &c, 1) != 1)
        die("write");
}

static char get(int fd)
{
    char c;
    ssize_t n = read(fd, &c, 1);  /* sleeps until the other task writes */
    if (n != 1) {
        if (n == 0)
            errno = EPIPE;
        die("read");
    }
    return c;
}

/* Task B: wait for the token, touch the array, send the token back. */
static void *side_b(void *unused)
{
    (void)unused;
    unsigned char *a = own_array();
    for (long i = 0; i < WARMUP + rounds; i++) {
        char c = get(a_to_b[0]);
        touch(a);
        put(b_to_a[1], c);
    }
    free(a);
    return NULL;
}

/* Task A: send the token, wait for it, touch the array. Returns the
 * microseconds of one timed round trip. */
static double side_a(void)
{
    unsigned char *a = own_array();
    double start = 0;
    for (long i = 0; i < WARMUP + rounds; i++) {
        if (i == WARMUP)
            start = now_us();
        put(a_to_b[1], 'x');
        get(b_to_a[0]);
        touch(a);
    }
    double us = (now_us() - start) / rounds;
    free(a);
    return us;
}

/* One task alone: a write and a read of one byte, then one touch, each
 * timed with no switch and a warm cache; the fastest of three passes, as
 * lmbench takes, since other work can only add time. */
static void alone(double *pipe_us, double *touch_us)
{
    int p[2];
    if (pipe(p) < 0)
        die("pipe");
    unsigned char *a = own_array();
    *pipe_us = *touch_us = 1e30;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now_us();
        for (long i = 0; i < rounds; i++) {
            put(p[1], 'x');
            get(p[0]);
        }
        double t1 = now_us();
        for (long i = 0; i < rounds; i++)
            touch(a);
        double t2 = now_us();
        if ((t1 - t0) / rounds < *pipe_us)
            *pipe_us = (t1 - t0) / rounds;
        if ((t2 - t1) / rounds < *touch_us)
            *touch_us = (t2 - t1) / rounds;
    }
    free(a);
    close(p[0]);
    close(p[1]);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4
        || (strcmp(argv[1], "threads") && strcmp(argv[1], "processes"))) {
        fprintf(stderr, "usage: ctxtouch threads|processes KIB [ROUNDTRIPS]\n");
        return 2;
    }
    long kib = atol(argv[2]);
    rounds = argc == 4 ? atol(argv[3]) : 10000;
    if (kib < 0 || kib > 65536 || rounds < 1) {
        fprintf(stderr, "ctxtouch: KIB is 0 to 65536, ROUNDTRIPS at least 1\n");
        return 2;
    }
    bytes = (size_t)kib * 1024;
    int threads = !strcmp(argv[1], "threads");

    /* Both tasks on CPU 0: B, thread or child, inherits A's mask. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) < 0)
        die("sched_setaffinity to CPU 0");

    double pipe_us, touch_us;
    alone(&pipe_us, &touch_us);

    if (pipe(a_to_b) < 0 || pipe(b_to_a) < 0)
        die("pipe");
    double rt;
    if (threads) {
        pthread_t b;
        int e = pthread_create(&b, NULL, side_b, NULL);
        if (e) {
            errno = e;
            die("pthread_create");
        }
        rt = side_a();
        pthread_join(b, NULL);
    } else {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) { /* the parent has one thread: malloc is safe here */
            side_b(NULL);
            _exit(0);
        }
        rt = side_a();
        int status;
        if (waitpid(pid, &status, 0) < 0)
            die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ctxtouch: task B failed\n");
            return 1;
        }
    }
    double net = (rt - 2 * pipe_us - 2 * touch_us) / 2;
    printf("%-9s %6ld KiB: round trip %8.2f us, pipe w+r %.2f us, "
           "touch %.2f us, net per switch %8.2f us\n",
           argv[1], kib, rt, pipe_us, touch_us, net);
    return 0;
}
