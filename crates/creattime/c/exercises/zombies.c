/* zombies.c: an exercise of the create-destroy chapter. Fork N children
 * that _exit(0) at once and reap none of them for SECONDS, so that they
 * stay zombies: look at them with ps or in /proc meanwhile. Then reap
 * them all. A fork that fails (EAGAIN under `prlimit --nproc=...`) is
 * counted with its errno and the loop goes on, as forkcreat does.
 * Build: cc -O2 -Wall -o zombies crates/creattime/c/exercises/zombies.c
 * Run:   ./zombies N SECONDS     e.g. ./zombies 255 10 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* This process's children in state 'Z', from /proc/<pid>/stat. */
static int count_zombies(void)
{
    int n = 0;
    DIR *proc = opendir("/proc");
    struct dirent *e;
    while (proc && (e = readdir(proc)) != NULL) {
        char path[300], line[512], *after, state;
        int ppid;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        /* The name in parentheses may hold spaces: read after the last ')'. */
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

int main(int argc, char *argv[])
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s N SECONDS\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    int seconds = atoi(argv[2]);
    long created = 0, failed = 0, reaped = 0;
    int first_error = 0;

    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0); /* the child: nothing else, as in creattime */
        if (pid < 0) {
            if (!failed++)
                first_error = errno;
            continue;
        }
        created++;
    }
    sleep(1); /* let the last children run their _exit */
    printf("pid %d: created %ld, failed %ld", (int)getpid(), created, failed);
    if (failed)
        printf(" (first: %s)", strerror(first_error));
    printf("; zombies now: %d\n", count_zombies());
    printf("look: ps --ppid %d -o pid,stat,comm | head\n", (int)getpid());
    fflush(stdout);
    sleep(seconds);

    while (waitpid(-1, NULL, 0) > 0)
        reaped++;
    printf("reaped %ld; zombies now: %d\n", reaped, count_zombies());
    return failed ? 1 : 0;
}
