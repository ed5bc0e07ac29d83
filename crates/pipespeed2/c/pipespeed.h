/* pipespeed.h: see pipespeed.c. */
#include <time.h>

/* One run's arguments and its pipe. */
struct run {
    long long count, bytes;
    int fd[2];   /* the pipe: read end, write end */
    int size;    /* its buffer, F_GETPIPE_SZ (or as F_SETPIPE_SZ granted) */
    int json;
};

/* Parse COUNT BYTES [PIPE_SIZE] [--json] and make the pipe; exit 2 on bad
 * usage, 1 if the pipe cannot be had. */
struct run setup(int argc, char *argv[]);
char *page_aligned(long long n);
char *pattern(long long n);
/* Print the rate of the run timed from t0 to t1. */
void report(const struct run *r, const char *program, const char *mode,
            struct timespec t0, struct timespec t1);
