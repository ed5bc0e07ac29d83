/* thread.c: the C program the `thread` crate reproduces, rewritten from the
 * description in book References: zhou-2010 (the original listing was an image
 * and is lost). P_NUMBER and COUNT come from argv instead of macros; each
 * thread gets pthread_create's default stack (the soft RLIMIT_STACK).
 * Build: cc -O2 -pthread -o thread-c thread.c (it includes
 * ../../labkit/c/labkit.h)
 * `--json` (last) prints, instead of Okay, the object the Rust program
 * prints under the same flag (labkit::cli::Report).
 * Run:   ./thread-c P COUNT LOG [LINE_BYTES] [--json] */
#include "../../labkit/c/labkit.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static FILE *logFile;
static int count;
static char str[4096] = "hello linux";

static void *worker(void *arg)
{
    (void)arg;
    for (int j = 0; j < count; j++) {
        printf("[%d]%s\n", j, str);
        fprintf(logFile, "[%d]%s\n", j, str);
    }
    return NULL;
}

int main(int argc, char *argv[])
{
    int json = json_flag(&argc, argv);
    struct timeval begin, end;
    gettimeofday(&begin, NULL);
    int p_number = argc > 1 ? atoi(argv[1]) : 255;
    count = argc > 2 ? atoi(argv[2]) : 100;
    const char *path = argc > 3 ? argv[3] : "logFile.log";
    if (argc > 4) /* the 256-byte variant */
        line_text(str, atoi(argv[4]));
    logFile = fopen(path, "a+");
    if (logFile == NULL) { perror(path); return 1; }

    // ANCHOR: create
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
    // ANCHOR_END: create
    fclose(logFile);
    gettimeofday(&end, NULL);
    print_okay(json, p_number, count, seconds_between(&begin, &end));
    return 0;
}
