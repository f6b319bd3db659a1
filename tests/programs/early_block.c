/* Frees the block its library's constructor allocated before memlens' runtime
 * started, then holds 4 MiB for a while: the live heap must read 4 MiB, not 0
 * (8 MiB of frees the counters saw against 4 MiB of allocations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern void *early_block;
void *volatile sink;

int main(void) {
    free(early_block);
    char *p = malloc(4 << 20);
    memset(p, 2, 4 << 20);
    sink = p;
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
    free(p);
    puts("done");
    return 0;
}
