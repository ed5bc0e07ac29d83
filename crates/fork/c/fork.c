/* fork.c: the C program the `fork` crate reproduces, rewritten from the
 * description in book References: zhou-2010 (the original listing was an image
 * and is lost). P_NUMBER and COUNT come from argv instead of macros so one
 * binary serves every setting; the work is the article's: fopen "a+",
 * printf + fprintf per line, exit(0) in the child, wait in the parent.
 * Build: cc -O2 -o fork-c fork.c (it includes
 * ../../labkit/c/labkit.h)
 * `--json` (last) prints, instead of Okay, the object the Rust program
 * prints under the same flag (labkit::cli::Report).
 * Run:   ./fork-c P COUNT LOG [LINE_BYTES] [--json] */
#include "../../labkit/c/labkit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char *argv[])
{
    int json = json_flag(&argc, argv);
    struct timeval begin, end;
    gettimeofday(&begin, NULL);
    int p_number = argc > 1 ? atoi(argv[1]) : 255;
    int count = argc > 2 ? atoi(argv[2]) : 100;
    const char *path = argc > 3 ? argv[3] : "logFile.log";
    char str[4096] = "hello linux";
    if (argc > 4) /* the 256-byte variant */
        line_text(str, atoi(argv[4]));
    FILE *logFile = fopen(path, "a+");
    if (logFile == NULL) { perror(path); return 1; }

    // ANCHOR: create
    for (int i = 0; i < p_number; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int j = 0; j < count; j++) {
                printf("[%d]%s\n", j, str);
                fprintf(logFile, "[%d]%s\n", j, str);
            }
            exit(0);
        }
        if (pid < 0) { perror("fork"); break; }
    }
    while (wait(NULL) > 0)
        ;
    // ANCHOR_END: create
    fclose(logFile);
    gettimeofday(&end, NULL);
    print_okay(json, p_number, count, seconds_between(&begin, &end));
    return 0;
}
