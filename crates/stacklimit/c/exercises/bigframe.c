/* bigframe.c: can a large stack frame jump over a guard page? Exercise 3 of
 * the book's chapter "Why 500 threads crashed". One thread runs on a 64 KiB
 * stack that this program maps itself, with a 4 KiB guard page (no access)
 * below it and a 64 KiB "victim" region below that, standing for whatever
 * mapping lies under a thread stack (another thread's stack, a heap). The
 * thread calls a function with a 40 KiB frame three levels deep; the
 * second frame already starts below the guard. Without stack probes its
 * first write lands in the victim: the program says so and exits 0. With probes
 * (-fstack-clash-protection) the compiler touches every page of a new frame
 * in order, the guard page is touched first, and the process dies of
 * SIGSEGV.
 * Build: cc -O2 -pthread -fno-stack-clash-protection -o /tmp/bigframe bigframe.c
 *        cc -O2 -pthread -fstack-clash-protection -o /tmp/bigframe-probed bigframe.c
 * Run:   /tmp/bigframe; echo $? */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define KIB 1024
#define STACK (64 * KIB)
#define GUARD (4 * KIB)
#define VICTIM (64 * KIB)
#define FRAME (40 * KIB)

/* One call: a 40 KiB local array, written lowest byte first (as a memset
 * or a struct initialised from its first field would be), then a call one
 * level deeper. */
__attribute__((noinline)) static int deeper(int depth)
{
    volatile char frame[FRAME];
    frame[0] = 'X';
    frame[FRAME - 1] = 'X';
    return depth > 1 ? deeper(depth - 1) + frame[0] : frame[0];
}

static void *run(void *arg)
{
    (void)arg;
    return (void *)(long)deeper(3);
}

int main(void)
{
    /* victim | guard | stack, from low addresses to high */
    char *m = mmap(NULL, VICTIM + GUARD + STACK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    char *victim = m, *guard = m + VICTIM, *stack = guard + GUARD;
    if (mprotect(guard, GUARD, PROT_NONE) != 0) { perror("mprotect"); return 1; }

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, STACK);
    pthread_t t;
    int rc = pthread_create(&t, &attr, run, NULL);
    if (rc != 0) { fprintf(stderr, "pthread_create: %s\n", strerror(rc)); return 1; }
    pthread_join(t, NULL);

    long written = 0;
    for (long i = 0; i < VICTIM; i++)
        written += victim[i] != 0;
    printf("the thread returned; %ld bytes of the victim region below the "
           "guard page were overwritten\n", written);
    return 0;
}
