/* forkcreat.c: the C program the `forkcreat` crate is compared with,
 * rewritten from the description in book References: zhou-2010 (the article's
 * listing was an image and is lost) and the lecture's loop in
 * book References: lecture-2004. N comes from argv; "wait" reaps each child with
 * waitpid before the next fork (the lecture), "sigchld" lets a SIGCHLD
 * handler reap (the article). `--json` prints the report the Rust program
 * prints under the same flag (forkcreat::Report), so the runner reads
 * both the same way.
 * Build: cc -O2 -o forkcreat-c forkcreat.c (it includes
 * ../../labkit/c/labkit.h)
 * Run:   ./forkcreat-c N [wait|sigchld] [--json] */
#include "../../labkit/c/labkit.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t reaped, bad_exits;

static void count(int status)
{
    reaped++;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bad_exits++;
}

static void on_sigchld(int sig)
{
    int saved = errno, status;
    (void)sig;
    while (waitpid(-1, &status, WNOHANG) > 0)
        count(status);
    errno = saved;
}

int main(int argc, char *argv[])
{
    int json = json_flag(&argc, argv);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int sigchld = argc > 2 && strcmp(argv[2], "sigchld") == 0;
    long created = 0, failed = 0, peak = 0, left = 0;
    int first_errno = 0, status;
    struct timeval begin, end;
    if (sigchld) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigchld;
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigaction(SIGCHLD, &sa, NULL);
    }
    gettimeofday(&begin, NULL);
    // ANCHOR: loop
    for (long i = 0; i < n; i++) {
        if (sigchld && created - reaped > peak)
            peak = created - reaped;
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid < 0) {
            if (!failed++)
                first_errno = errno;
            continue;
        }
        created++;
        if (!sigchld && waitpid(pid, &status, 0) == pid)
            count(status);
    }
    // ANCHOR_END: loop
    if (sigchld) { /* the stragglers */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, NULL);
        while (wait(&status) > 0)
            count(status);
    }
    gettimeofday(&end, NULL);
    while (wait(NULL) > 0) /* children the loop did not reap: none */
        left++;
    double s = seconds_between(&begin, &end);
    double us = created ? s * 1e6 / created : 0.0;
    if (json) {
        printf("{\"iterations\":%ld,\"reap\":\"%s\",\"created\":%ld,"
               "\"failed\":%ld,\"reaped\":%ld,\"bad_exits\":%ld,"
               "\"peak_unreaped\":%ld,\"left_behind\":%ld,",
               n, sigchld ? "sigchld" : "wait", created, failed, (long)reaped,
               (long)bad_exits, peak, left);
        print_loop_end(s, created, failed, first_errno);
    } else {
        printf("created: %ld, failed: %ld, reaped: %ld\n", created, failed,
               (long)reaped);
        printf("%ld create+destroy in %.3f s: %.2f us each\n", created, s, us);
    }
    return failed ? 1 : 0;
}
