/* rust_image.c: linked into forkcreat.c, gives the C program the mappings a
 * Rust program starts with, so that the two loops can be compared on equal
 * terms. fork copies every mapping and exit tears every one of them down,
 * so a process with more mappings pays more per child, whatever its loop.
 *
 * What Rust's std brings to `forkcreat`'s image on x86_64 Linux, read off
 * /proc/PID/smaps at the loop (30 mappings against plain C's 23; with this
 * file the C program has 31, one more for its own binary's layout):
 *   - libgcc_s.so.1, the unwinder std links (five mappings): here linked
 *     with -Wl,--no-as-needed -lgcc_s, so the loader maps it as for Rust;
 *   - the main thread's signal stack for stack-overflow reports: a guard
 *     page and max(SIGSTKSZ, AT_MINSIGSTKSZ) bytes, never touched;
 *   - a heap, made by the argument vector and the command-line parser,
 *     16 KiB resident.
 * Build: cc -O2 -o forkcreat-c-image forkcreat.c rust_image.c \
 *          -Wl,--no-as-needed -lgcc_s */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

static char *volatile heap; /* kept: the optimiser may not drop it */

__attribute__((constructor)) static void rust_image(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = 8192; /* the libc crate's SIGSTKSZ */
    if (getauxval(AT_MINSIGSTKSZ) > size)
        size = getauxval(AT_MINSIGSTKSZ);
    /* MAP_STACK keeps it a mapping of its own, as std's is. */
    char *stack = mmap(NULL, page + size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack != MAP_FAILED && mprotect(stack, page, PROT_NONE) == 0) {
        stack_t ss = { .ss_sp = stack + page, .ss_size = size, .ss_flags = 0 };
        sigaltstack(&ss, NULL);
    }
    heap = malloc(3 * page);
    if (heap)
        memset(heap, 1, 3 * page);
}
