/* creattime.c: Gergely Czuczy's fork-vs-thread creation-time test from the
 * 2004 mailing-list post (book References: list-2004), which was C++ only for
 * `unsigned int x(0)` initialisers; here in C, timed as posted: only fork()
 * and only pthread_create(), children _exit(0) at once, threads
 * pthread_exit at once, nobody reaped or joined while the loops run.
 * Unlike the post (which left them to exit()), it then counts the zombies
 * in /proc, reaps every child and joins every thread, as the Rust program
 * does; `--json` prints the report the Rust program prints under the same
 * flag (creattime::Report).
 * Build: cc -O2 -pthread -o creattime-c creattime.c (it includes
 * ../../labkit/c/labkit.h)
 * Run:   ./creattime-c SAMPLES [--json] */
#include "../../labkit/c/labkit.h"
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static double timeval2double(struct timeval *tv)
{
    return (tv->tv_usec / 1000000.0 + tv->tv_sec) * 1000;
}

static void *threadfunc(void *arg)
{
    (void)arg;
    pthread_exit(0);
    return 0;
}

/* Children of this process that are zombies, from /proc/<pid>/stat. */
static unsigned int zombies(void)
{
    unsigned int n = 0;
    DIR *proc = opendir("/proc");
    struct dirent *e;
    while (proc && (e = readdir(proc)) != NULL) {
        char path[300], state;
        int ppid;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        /* The name in parentheses may hold spaces: read after the last ')'. */
        char line[512], *after;
        if (fgets(line, sizeof line, f) && (after = strrchr(line, ')')) &&
            sscanf(after + 1, " %c %d", &state, &ppid) == 2 &&
            ppid == getpid() && state == 'Z')
            n++;
        fclose(f);
    }
    if (proc)
        closedir(proc);
    return n;
}

static void print_kind(const char *name, unsigned int failures,
                       unsigned int successes, double total, int first_error)
{
    printf("\"%s\":{\"failures\":%u,\"successes\":%u,\"total_ms\":%.6f,", name,
           failures, successes, total);
    if (successes)
        printf("\"average_ms\":%.6f,", total / successes);
    else
        printf("\"average_ms\":null,");
    print_first_error(failures, first_error, "},");
}

int main(int argc, char *argv[])
{
    unsigned int i, samples, forkfailures = 0, threadfailures = 0;
    unsigned int zombie_count, reaped = 0, joined = 0;
    double totalforktime = 0, totalthreadtime = 0, forktime, threadtime;
    struct timeval begin, end, diff;
    pid_t childpid;
    int json = json_flag(&argc, argv);
    int forkerror = 0, threaderror = 0;

    if (argc != 2) {
        printf("Usage:\n\t%s <number of samples> [--json]\n", argv[0]);
        return EXIT_FAILURE;
    }
    samples = atoi(argv[1]);
    pthread_t *threads = calloc(samples ? samples : 1, sizeof *threads);

    for (i = 0; i < samples; ++i) {
        gettimeofday(&begin, 0);
        childpid = fork();
        gettimeofday(&end, 0);
        if (!childpid) _exit(0);
        if (childpid == -1 && !forkfailures++) forkerror = errno;
        timersub(&end, &begin, &diff);
        totalforktime += timeval2double(&diff);
        usleep(1);
    }
    usleep(10000);
    zombie_count = zombies();
    for (i = 0; i < samples; ++i) {
        int ret;
        gettimeofday(&begin, 0);
        ret = pthread_create(&threads[i - threadfailures], 0, &threadfunc, 0);
        gettimeofday(&end, 0);
        if (ret && !threadfailures++) threaderror = ret;
        timersub(&end, &begin, &diff);
        totalthreadtime += timeval2double(&diff);
        usleep(1);
    }
    /* What the post left to exit(): reap and join everything. */
    while (wait(NULL) > 0)
        reaped++;
    for (i = 0; i < samples - threadfailures; ++i)
        if (pthread_join(threads[i], NULL) == 0)
            joined++;
    free(threads);

    forktime = totalforktime / (samples - forkfailures);
    threadtime = totalthreadtime / (samples - threadfailures);
    if (json) {
        printf("{\"samples\":%u,", samples);
        print_kind("fork", forkfailures, samples - forkfailures, totalforktime,
                   forkerror);
        print_kind("thread", threadfailures, samples - threadfailures,
                   totalthreadtime, threaderror);
        if (forkfailures < samples && threadfailures < samples)
            printf("\"average_ratio\":%.6f,", forktime / threadtime);
        else
            printf("\"average_ratio\":null,");
        if (totalthreadtime > 0)
            printf("\"total_ratio\":%.6f,", totalforktime / totalthreadtime);
        else
            printf("\"total_ratio\":null,");
        /* left_behind: children made and not reaped */
        printf("\"zombies_before_reaping\":%u,\"reaped\":%u,\"joined\":%u,"
               "\"left_behind\":%u}\n",
               zombie_count, reaped, joined, samples - forkfailures - reaped);
        return forkfailures || threadfailures ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    printf("Fork failures: %u (success: %u)\n", forkfailures, samples - forkfailures);
    printf("Average fork time: %5f msecs\n", forktime);
    printf("Total fork time: %5f msecs\n", totalforktime);
    printf("Thread failures: %u (success: %u)\n", threadfailures, samples - threadfailures);
    printf("Average thread time: %5f msecs\n", threadtime);
    printf("Total thread time: %5f msecs\n", totalthreadtime);
    printf("Average fork/thread ratio: %2f\n", forktime / threadtime);
    printf("Total fork/thread ratio: %2f\n", totalforktime / totalthreadtime);
    return EXIT_SUCCESS;
}
