/* forkfill.c: what a forked child costs when its parent has filled a
 * buffer first. Exercises 1 and 3 of the book's chapter "What a process
 * really costs in memory". The parent maps BUF MiB of anonymous memory,
 * writes every page of it, then forks CHILDREN children. Each child, if
 * `write` is given, writes one byte to every 4 KiB page of the buffer
 * (copy-on-write); then it reports ready and blocks until the parent lets
 * it go. With all of them ready the parent reads /proc and prints, per
 * child: its page tables (VmPTE), the PSS it added (the sum of everyone's
 * PSS after, less the parent's before, divided by CHILDREN), and its own
 * PSS; then the time from the first fork until every child was ready.
 * `huge` asks for transparent huge pages (MADV_HUGEPAGE) instead of 4 KiB
 * pages (MADV_NOHUGEPAGE); whether it got them shows in AnonHugePages.
 * Build: cc -O2 -Wall -o /tmp/forkfill forkfill.c
 * Run:   /tmp/forkfill CHILDREN BUF_MIB [write] [huge] */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define HUGE (2L << 20)

/* The value of the line "key: N kB" in /proc/<pid>/<file>, or -1. */
static long field_kib(pid_t pid, const char *file, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    if (f == NULL) { perror(path); exit(1); }
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = atol(line + n + 1);
            break;
        }
    fclose(f);
    return v;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char *argv[])
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CHILDREN BUF_MIB [write] [huge]\n", argv[0]);
        return 2;
    }
    int children = atoi(argv[1]);
    size_t len = (size_t)atol(argv[2]) << 20;
    int writes = 0, huge = 0;
    for (int i = 3; i < argc; i++) {
        writes |= strcmp(argv[i], "write") == 0;
        huge |= strcmp(argv[i], "huge") == 0;
    }
    if (children < 1 || len == 0) {
        fprintf(stderr, "%s: CHILDREN and BUF_MIB must be at least 1\n", argv[0]);
        return 2;
    }

    /* Map 2 MiB more, so that the buffer can start on a 2 MiB boundary,
     * where a huge page can back it. */
    char *m = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (madvise(buf, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        perror("madvise (going on)");
    memset(buf, 1, len);

    pid_t self = getpid();
    long pss_before = field_kib(self, "smaps_rollup", "Pss");
    int go[2], ready[2];
    if (pipe(go) != 0 || pipe(ready) != 0) { perror("pipe"); return 1; }
    pid_t *pid = calloc(children, sizeof *pid);
    double start = now();
    for (int i = 0; i < children; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            perror("fork");
            children = i; /* let the ones made go, below */
            break;
        }
        if (pid[i] == 0) {
            close(go[1]);
            close(ready[0]);
            if (writes)
                for (size_t off = 0; off < len; off += PAGE)
                    buf[off] = 2;
            char c = 'r', x;
            if (write(ready[1], &c, 1) != 1) _exit(1);
            while (read(go[0], &x, 1) > 0) /* blocks until the parent closes go */
                ;
            _exit(0);
        }
    }
    close(ready[1]);
    for (int got = 0; got < children; ) {
        char c;
        if (read(ready[0], &c, 1) != 1) { fprintf(stderr, "a child died\n"); break; }
        got++;
    }
    double ready_s = now() - start;

    long pss_after = field_kib(self, "smaps_rollup", "Pss"), pte = 0, own = 0;
    for (int i = 0; i < children; i++) {
        long p = field_kib(pid[i], "smaps_rollup", "Pss");
        pss_after += p;
        own += p;
        pte += field_kib(pid[i], "status", "VmPTE");
    }
    printf("%d children of a parent that filled %zu MiB (%s; children %s it)\n",
           children, len >> 20, huge ? "MADV_HUGEPAGE" : "4 KiB pages",
           writes ? "wrote" : "only inherited");
    if (children > 0)
        printf("per child: page tables %ld KiB, PSS added %ld KiB, own PSS %ld KiB\n",
               pte / children, (pss_after - pss_before) / children, own / children);
    printf("parent: AnonHugePages %ld KiB; all children ready in %.3f s\n",
           field_kib(self, "smaps_rollup", "AnonHugePages"), ready_s);

    close(go[1]);
    for (int i = 0; i < children; i++)
        waitpid(pid[i], NULL, 0);
    return 0;
}
