/* exit-flush.c: what a forked child's exit(3) does to a buffer the parent
 * had not flushed, for the exercises of the book's chapter "Fork or
 * thread". The parent puts "starting " in stdout's buffer (no newline, so
 * even a terminal's line buffering keeps it there), forks N children that
 * print nothing and leave, waits for them, then ends the line.
 *   exit   the children call exit(0): it flushes their copy of the buffer
 *   _exit  the children call _exit(0): nothing is flushed
 *   flush  the parent calls fflush(stdout) before forking, children exit(0)
 * Build: cc -O2 -Wall -o exit-flush exit-flush.c
 * Run:   ./exit-flush N exit|_exit|flush */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char *argv[])
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s N exit|_exit|flush\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    const char *how = argv[2];
    printf("starting ");
    if (strcmp(how, "flush") == 0)
        fflush(stdout);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (strcmp(how, "_exit") == 0)
                _exit(0);
            exit(0);
        }
        if (pid < 0) { perror("fork"); break; }
    }
    while (wait(NULL) > 0)
        ;
    printf("\n");
    return 0;
}
