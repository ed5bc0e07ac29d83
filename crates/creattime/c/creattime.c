/* creattime.c: Gergely Czuczy's fork-vs-thread creation-time test from the
 * 2004 mailing-list post (book References: list-2004), which was C++ only for
 * `unsigned int x(0)` initialisers; here in C, otherwise as posted: time
 * only fork() and only pthread_create(), children _exit(0) at once,
 * threads pthread_exit at once, nobody is reaped or joined.
 * Build: cc -O2 -pthread -o creattime-c creattime.c
 * Run:   ./creattime-c SAMPLES */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/types.h>
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

int main(int argc, char *argv[])
{
    unsigned int i, samples, forkfailures = 0, threadfailures = 0;
    double totalforktime = 0, totalthreadtime = 0, forktime, threadtime;
    struct timeval begin, end, diff;
    pid_t childpid;
    pthread_t thread;

    if (argc != 2) {
        printf("Usage:\n\t%s <number of samples>\n", argv[0]);
        return EXIT_FAILURE;
    }
    samples = atoi(argv[1]);

    for (i = 0; i < samples; ++i) {
        gettimeofday(&begin, 0);
        childpid = fork();
        gettimeofday(&end, 0);
        if (!childpid) _exit(0);
        if (childpid == -1) ++forkfailures;
        timersub(&end, &begin, &diff);
        totalforktime += timeval2double(&diff);
        usleep(1);
    }
    usleep(10000);
    for (i = 0; i < samples; ++i) {
        int ret;
        gettimeofday(&begin, 0);
        ret = pthread_create(&thread, 0, &threadfunc, 0);
        gettimeofday(&end, 0);
        if (ret) ++threadfailures;
        timersub(&end, &begin, &diff);
        totalthreadtime += timeval2double(&diff);
        usleep(1);
    }

    forktime = totalforktime / (samples - forkfailures);
    printf("Fork failures: %u (success: %u)\n", forkfailures, samples - forkfailures);
    printf("Average fork time: %5f msecs\n", forktime);
    printf("Total fork time: %5f msecs\n", totalforktime);
    threadtime = totalthreadtime / (samples - threadfailures);
    printf("Thread failures: %u (success: %u)\n", threadfailures, samples - threadfailures);
    printf("Average thread time: %5f msecs\n", threadtime);
    printf("Total thread time: %5f msecs\n", totalthreadtime);
    printf("Average fork/thread ratio: %2f\n", forktime / threadtime);
    printf("Total fork/thread ratio: %2f\n", totalforktime / totalthreadtime);
    return EXIT_SUCCESS;
}
