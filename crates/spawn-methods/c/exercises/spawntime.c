/* spawntime.c: microseconds to create and destroy one unit of concurrent
 * work, by method, from a parent of a chosen size. The C counterpart of the
 * lab's spawn-methods program, for the exercises of the book's chapter
 * "Spawning in 2026" (that program's loops are Rust; this one lets you
 * change what the Rust program keeps fixed: huge pages, work per task).
 *
 * Methods (in the order given):
 *   fork      fork, the child does the work and _exits, waitpid
 *   vfork     vfork, the child _exits at once, waitpid
 *   forkexec  fork, the child execs PROG, waitpid
 *   spawn     posix_spawn PROG, waitpid
 *   thread    pthread_create (default attributes), the thread does the
 *             work, pthread_join
 *   pool      hand a job to one worker thread made beforehand, which does
 *             the work and answers (two semaphores); only hand-offs timed
 * Options:
 *   -r MIB    touch MIB MiB before the loops (one write per 4 KiB page)
 *   -H        ask for transparent huge pages there (MADV_HUGEPAGE);
 *             default MADV_NOHUGEPAGE, as the lab's program does
 *   -w US     busy work per task, in microseconds (fork, thread, pool)
 *   -t SEC    seconds each loop lasts (default 0.2; at least 3 iterations)
 *   -p CPU    pin the pool's worker to CPU (with taskset for the rest)
 *   -e PROG   the program forkexec and spawn start (default /bin/true)
 * Build: cc -O2 -pthread -Wall -o /tmp/spawntime crates/spawn-methods/c/exercises/spawntime.c
 * Run:   /tmp/spawntime fork vfork spawn thread pool
 * Exit status: 0 ok, 1 a create failed, 2 bad usage. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double work_us;              /* -w */
static char *prog = "/bin/true";    /* -e */
static char *envp[] = { NULL };     /* an empty environment */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void work(void)              /* spin for work_us */
{
    double end = now_us() + work_us;
    while (work_us > 0 && now_us() < end)
        ;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void reap(pid_t pid, const char *what)
{
    int status;
    if (pid < 0) die(what);
    if (waitpid(pid, &status, 0) != pid) die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: the child did not exit 0 (status %#x)\n", what, status);
        exit(1);
    }
}

static void *body(void *arg) { work(); return arg; }

/* The pool: one worker, a job semaphore and a reply semaphore. */
static sem_t job, reply;
static volatile int stop;
static void *worker(void *arg)
{
    int cpu = *(int *)arg;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            fprintf(stderr, "spawntime: cannot pin the worker to CPU %d\n", cpu);
    }
    for (;;) {
        sem_wait(&job);
        if (stop) return NULL;
        work();
        sem_post(&reply);
    }
}

/* One create+destroy (or one hand-off) by `m`. */
static void once(const char *m)
{
    char *argv[] = { prog, NULL };
    pid_t pid;
    pthread_t t;
    if (strcmp(m, "fork") == 0) {
        pid = fork();
        if (pid == 0) { work(); _exit(0); }
        reap(pid, "fork");
    } else if (strcmp(m, "vfork") == 0) {
        pid = vfork();
        if (pid == 0) _exit(0);     /* the parent sleeps until this */
        reap(pid, "vfork");
    } else if (strcmp(m, "forkexec") == 0) {
        pid = fork();
        if (pid == 0) { execve(prog, argv, envp); _exit(127); }
        reap(pid, "fork+exec");
    } else if (strcmp(m, "spawn") == 0) {
        int rc = posix_spawn(&pid, prog, NULL, NULL, argv, envp);
        if (rc != 0) { fprintf(stderr, "posix_spawn: %s\n", strerror(rc)); exit(1); }
        reap(pid, "posix_spawn");
    } else if (strcmp(m, "thread") == 0) {
        int rc = pthread_create(&t, NULL, body, NULL);
        if (rc != 0) { fprintf(stderr, "pthread_create: %s\n", strerror(rc)); exit(1); }
        pthread_join(t, NULL);
    } else {                        /* pool */
        sem_post(&job);
        sem_wait(&reply);
    }
}

/* Map and write `mib` MiB, 2 MiB aligned so huge pages can back it. */
static void touch(long mib, int huge)
{
    size_t len = (size_t)mib << 20, align = 2 << 20;
    char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    p = (char *)(((unsigned long)p + align - 1) & ~(align - 1));
    if (madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        perror("madvise");
    for (size_t off = 0; off < len; off += 4096)
        p[off] = 1;
}

/* This process's Rss and AnonHugePages, kB, from /proc/self/smaps_rollup. */
static void print_memory(long mib, int huge)
{
    char line[256];
    long rss = -1, thp = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "Rss: %ld", &rss);
        sscanf(line, "AnonHugePages: %ld", &thp);
    }
    if (f) fclose(f);
    printf("%ld MiB touched (%s), Rss %ld kB, AnonHugePages %ld kB\n",
           mib, huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", rss, thp);
}

int main(int argc, char **argv)
{
    const char *methods[] = { "fork", "vfork", "forkexec", "spawn", "thread", "pool" };
    double seconds = 0.2;
    long mib = 0;
    int huge = 0, cpu = -1, opt;
    while ((opt = getopt(argc, argv, "r:Hw:t:p:e:")) != -1) {
        switch (opt) {
        case 'r': mib = atol(optarg); break;
        case 'H': huge = 1; break;
        case 'w': work_us = atof(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'p': cpu = atoi(optarg); break;
        case 'e': prog = optarg; break;
        default: goto usage;
        }
    }
    if (optind == argc || mib < 0 || work_us < 0 || seconds <= 0) goto usage;
    for (int i = optind; i < argc; i++) {
        int known = 0;
        for (int k = 0; k < 6; k++) known |= strcmp(argv[i], methods[k]) == 0;
        if (!known) goto usage;
    }
    touch(mib, huge);
    print_memory(mib, huge);

    pthread_t pool;
    sem_init(&job, 0, 0);
    sem_init(&reply, 0, 0);
    if (pthread_create(&pool, NULL, worker, &cpu) != 0) die("pthread_create");

    for (int i = optind; i < argc; i++) {
        once(argv[i]);              /* warm-up, not timed */
        long n = 0;
        double start = now_us(), elapsed;
        do {
            once(argv[i]);
            n++;
            elapsed = now_us() - start;
        } while (n < 3 || elapsed < seconds * 1e6);
        printf("%-9s %10.1f us each  (%ld iterations)\n", argv[i], elapsed / n, n);
    }
    stop = 1;
    sem_post(&job);
    pthread_join(pool, NULL);
    return 0;
usage:
    fprintf(stderr, "usage: %s [-r MIB] [-H] [-w US] [-t SEC] [-p CPU] [-e PROG] "
            "fork|vfork|forkexec|spawn|thread|pool...\n", argv[0]);
    return 2;
}
