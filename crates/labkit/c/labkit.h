/* labkit.h: what the lab's C references share, as the Rust programs share
 * labkit: the trailing `--json` flag and its output, with the keys, order
 * and precision of the Rust programs' reports so that the runner reads
 * both the same way, and the text of the 256-byte line variant. Only
 * line_text runs after a program's clock starts, where fork.c and thread.c
 * built the line before it moved here. A program includes it first, as
 * "../../labkit/c/labkit.h" from its crate's c/ folder (strerrorname_np
 * needs _GNU_SOURCE before any system header). */
#ifndef LABKIT_H
#define LABKIT_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

/* 1 if the last argument is --json, which is then dropped from argc: the
 * positional arguments come first. */
static inline int json_flag(int *argc, char *argv[])
{
    int json = *argc > 1 && strcmp(argv[*argc - 1], "--json") == 0;
    *argc -= json;
    return json;
}

/* The 256-byte variant's line: n bytes of "hello linux hello ...", the
 * same text as labkit::lines::payload; str holds at least n + 1 bytes. */
static inline void line_text(char *str, int n)
{
    for (int i = 0; i < n; i++)
        str[i] = "hello linux "[i % 12];
    str[n] = '\0';
}

/* Seconds from begin to end, to gettimeofday's microsecond. */
static inline double seconds_between(const struct timeval *begin,
                                     const struct timeval *end)
{
    return (end->tv_sec - begin->tv_sec) + (end->tv_usec - begin->tv_usec) / 1e6;
}

/* How fork.c and thread.c end: the articles' "Okay", or with --json the
 * object `fork --json` and `thread --json` print (labkit::cli::Report). */
static inline void print_okay(int json, int workers, int count, double s)
{
    if (json)
        printf("{\"workers\":%d,\"count\":%d,\"lines\":%lld,\"elapsed_s\":%.6f}\n",
               workers, count, (long long)workers * count, s);
    else
        printf("Okay\n");
}

/* "first_error":"Resource temporarily unavailable (EAGAIN)" for the error
 * number err when a call failed, "first_error":null when none did; then
 * `close` (the object's "}," or "}\n"). */
static inline void print_first_error(long failed, int err, const char *close)
{
    if (failed)
        printf("\"first_error\":\"%s (%s)\"%s", strerror(err),
               strerrorname_np(err), close);
    else
        printf("\"first_error\":null%s", close);
}

/* The end of a create+destroy loop's object, forkcreat.c's and
 * pthreadcreat.c's (labkit::cli::LoopEnd): elapsed_s, us_per_create (null
 * when nothing was created), first_error. */
static inline void print_loop_end(double s, long created, long failed, int err)
{
    printf("\"elapsed_s\":%.6f,", s);
    if (created)
        printf("\"us_per_create\":%.4f,", s * 1e6 / created);
    else
        printf("\"us_per_create\":null,");
    print_first_error(failed, err, "}\n");
}
#endif
