/* pthreadcreat.c: the C program the `pthreadcreat` crate is compared
 * with, rewritten from the description in book References: zhou-2010 (the
 * article's listing was an image and is lost) and the lecture's loop in
 * book References: lecture-2004: create an empty thread, join it, N times, with
 * pthread_create's default stack (the soft RLIMIT_STACK).
 * Build: cc -O2 -pthread -o pthreadcreat-c pthreadcreat.c
 * Run:   ./pthreadcreat-c N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static void *f(void *arg)
{
    return arg;
}

int main(int argc, char *argv[])
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long created = 0, failed = 0, joined = 0;
    struct timeval begin, end;
    pthread_t tid;

    gettimeofday(&begin, NULL);
    for (long i = 0; i < n; i++) {
        if (pthread_create(&tid, NULL, f, NULL) != 0) {
            failed++;
            continue;
        }
        created++;
        if (pthread_join(tid, NULL) == 0)
            joined++;
    }
    gettimeofday(&end, NULL);
    double s = (end.tv_sec - begin.tv_sec) + (end.tv_usec - begin.tv_usec) / 1e6;
    printf("created: %ld, failed: %ld, joined: %ld\n", created, failed, joined);
    printf("%ld create+destroy in %.3f s: %.2f us each\n", created, s,
           created ? s * 1e6 / created : 0.0);
    return failed ? 1 : 0;
}
