/* A 64 MiB block freed 0.1 s before the region "after", in which only a
 * 1 MiB block lives: the region's heap peak is 1 MiB over what was live
 * before, never the freed block. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "memlens.h"

/* The blocks escape through it, so the compiler keeps them. */
char *volatile sink;

int main(void) {
    sink = malloc(64 << 20);
    memset(sink, 1, 64 << 20);
    usleep(200000);
    free(sink);
    usleep(100000);
    memlens_region_begin("after");
    sink = malloc(1 << 20);
    memset(sink, 2, 1 << 20);
    usleep(300000);
    free(sink);
    memlens_region_end("after");
    return 0;
}
