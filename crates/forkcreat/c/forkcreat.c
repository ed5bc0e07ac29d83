/* forkcreat.c: the C program the `forkcreat` crate is compared with,
 * rewritten from the description in book References: zhou-2010 (the article's
 * listing was an image and is lost) and the lecture's loop in
 * book References: lecture-2004. N comes from argv; "wait" reaps each child with
 * waitpid before the next fork (the lecture), "sigchld" lets a SIGCHLD
 * handler reap (the article).
 * Build: cc -O2 -o forkcreat-c forkcreat.c
 * Run:   ./forkcreat-c N [wait|sigchld] */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t reaped;

static void on_sigchld(int sig)
{
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        reaped++;
    errno = saved;
}

int main(int argc, char *argv[])
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int sigchld = argc > 2 && strcmp(argv[2], "sigchld") == 0;
    long created = 0, failed = 0, waited = 0;
    struct timeval begin, end;

    if (sigchld) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigchld;
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigaction(SIGCHLD, &sa, NULL);
    }
    gettimeofday(&begin, NULL);
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid < 0) {
            failed++;
            continue;
        }
        created++;
        if (!sigchld && waitpid(pid, NULL, 0) == pid)
            waited++;
    }
    if (sigchld) { /* the stragglers */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, NULL);
        while (wait(NULL) > 0)
            waited++;
        waited += reaped;
    }
    gettimeofday(&end, NULL);
    double s = (end.tv_sec - begin.tv_sec) + (end.tv_usec - begin.tv_usec) / 1e6;
    printf("created: %ld, failed: %ld, reaped: %ld\n", created, failed, waited);
    printf("%ld create+destroy in %.3f s: %.2f us each\n", created, s,
           created ? s * 1e6 / created : 0.0);
    return failed ? 1 : 0;
}
