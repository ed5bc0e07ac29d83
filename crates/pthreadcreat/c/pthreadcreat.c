/* pthreadcreat.c: the C program the `pthreadcreat` crate is compared
 * with, rewritten from the description in book References: zhou-2010 (the
 * article's listing was an image and is lost) and the lecture's loop in
 * book References: lecture-2004: create an empty thread, join it, N times, with
 * pthread_create's default stack (the soft RLIMIT_STACK). `--json` prints
 * the report the Rust program prints under the same flag
 * (pthreadcreat::Report), so the runner reads both the same way.
 * Build: cc -O2 -pthread -o pthreadcreat-c pthreadcreat.c (it includes
 * ../../labkit/c/labkit.h)
 * Run:   ./pthreadcreat-c N [--json] */
#include "../../labkit/c/labkit.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static void *f(void *arg)
{
    return arg;
}

int main(int argc, char *argv[])
{
    int json = json_flag(&argc, argv);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long created = 0, failed = 0, joined = 0;
    int first_error = 0, rc;
    struct timeval begin, end;
    pthread_t tid;
    gettimeofday(&begin, NULL);
    for (long i = 0; i < n; i++) {
        if ((rc = pthread_create(&tid, NULL, f, NULL)) != 0) {
            if (!failed++)
                first_error = rc;
            continue;
        }
        created++;
        if (pthread_join(tid, NULL) == 0)
            joined++;
    }
    gettimeofday(&end, NULL);
    double s = seconds_between(&begin, &end);
    double us = created ? s * 1e6 / created : 0.0;
    if (!json) {
        printf("created: %ld, failed: %ld, joined: %ld\n", created, failed, joined);
        printf("%ld create+destroy in %.3f s: %.2f us each\n", created, s, us);
        return failed ? 1 : 0;
    }
    /* The stack every thread got: what a NULL attr means. */
    pthread_attr_t attr;
    size_t stack = 0;
    if (pthread_getattr_default_np(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &stack);
        pthread_attr_destroy(&attr);
    }
    printf("{\"iterations\":%ld,\"api\":\"pthread\",\"stack_size\":%zu,"
           "\"created\":%ld,\"failed\":%ld,\"joined\":%ld,\"panicked\":%ld,",
           n, stack, created, failed, joined, created - joined);
    print_loop_end(s, created, failed, first_error);
    return failed ? 1 : 0;
}
