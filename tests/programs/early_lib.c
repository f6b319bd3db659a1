/* A library whose constructor allocates 8 MiB before memlens' runtime starts
 * (the loader runs it first: the runtime is preloaded, this library is the
 * program's dependency). early_block.c frees it. */
#include <stdlib.h>
#include <string.h>

void *early_block;

__attribute__((constructor)) static void allocate_early(void) {
    early_block = malloc(8 << 20);
    memset(early_block, 1, 8 << 20);
}
