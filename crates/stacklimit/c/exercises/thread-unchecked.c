/* thread-unchecked.c: the create loop of crates/thread/c/thread.c with the
 * check of pthread_create's return value taken out, as a program of 2010
 * might have had it (the article's listing is lost). Exercise 2 of the
 * book's chapter "Why 500 threads crashed".
 * Build: cc -O2 -g -pthread -o /tmp/thread-unchecked thread-unchecked.c
 * Run:   prlimit --as=3221225472 /tmp/thread-unchecked P COUNT LOG */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *logFile;
static int count;

static void *worker(void *arg)
{
    (void)arg;
    for (int j = 0; j < count; j++) {
        printf("[%d]%s\n", j, "hello linux");
        fprintf(logFile, "[%d]%s\n", j, "hello linux");
    }
    return NULL;
}

int main(int argc, char *argv[])
{
    int p_number = argc > 1 ? atoi(argv[1]) : 500;
    count = argc > 2 ? atoi(argv[2]) : 1000;
    const char *path = argc > 3 ? argv[3] : "logFile.log";
    logFile = fopen(path, "a+");
    if (logFile == NULL) { perror(path); return 1; }

    pthread_t *tid = calloc(p_number, sizeof *tid);
    for (int i = 0; i < p_number; i++)
        pthread_create(&tid[i], NULL, worker, NULL); /* result ignored */
    for (int i = 0; i < p_number; i++)
        pthread_join(tid[i], NULL);
    fclose(logFile);
    fprintf(stderr, "Okay\n");
    return 0;
}
