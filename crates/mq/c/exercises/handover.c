/* handover.c: one producer hands messages to one consumer thread in
 * batches, as the broker's deliverers hand batches to its writers
 * (crates/mq/src/broker/writers.rs, hand_over). Each hand-over is a mutex,
 * a condition variable and, when the other side sleeps, a wake-up.
 *
 *   cc -O2 -pthread -Wall -o /tmp/handover crates/mq/c/exercises/handover.c
 *   taskset -c 0 /tmp/handover 1000000 1     # COUNT messages, BATCH size
 *
 * Prints the context switches of the whole process (getrusage, all
 * threads) per message, and the CPU time per message. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static long slot;       /* messages in the one batch slot; 0: empty */
static int done;        /* the producer has handed over its last batch */
static long received;   /* messages the consumer took */

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (slot == 0 && !done)
            pthread_cond_wait(&changed, &lock);  /* sleep: a switch */
        if (slot == 0 && done) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        received += slot;                        /* take the whole batch */
        slot = 0;
        pthread_cond_signal(&changed);           /* the slot is free */
        pthread_mutex_unlock(&lock);
    }
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 1000000;
    long batch = argc > 2 ? atol(argv[2]) : 32;
    if (count < 1 || batch < 1) {
        fprintf(stderr, "usage: handover [COUNT] [BATCH], both at least 1\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, consumer, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    for (long sent = 0; sent < count; sent += batch) {
        long n = count - sent < batch ? count - sent : batch;
        pthread_mutex_lock(&lock);
        while (slot != 0)                        /* wait for the consumer */
            pthread_cond_wait(&changed, &lock);
        slot = n;                                /* hand over one batch */
        pthread_cond_signal(&changed);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
               + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    long sw = ru.ru_nvcsw + ru.ru_nivcsw;
    printf("messages %ld, batch %ld: %ld voluntary + %ld involuntary switches, "
           "%.3f switches/msg, %.3f us CPU/msg\n",
           received, batch, ru.ru_nvcsw, ru.ru_nivcsw,
           (double)sw / received, 1e6 * cpu / received);
    return received == count ? 0 : 1;
}
