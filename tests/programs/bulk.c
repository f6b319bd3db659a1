/* memset, memmove and memcpy over named buffers, each in its own region: each
 * call's bytes are counted exactly and sampled as accesses of the buffers. */
#include <stdio.h>
#include <string.h>
#include "memlens.h"
#define MIB (1L << 20)
static char zeroed[4 * MIB], moved[4 * MIB + 4096], copied[4 * MIB];

int main(void) {
    for (int k = 0; k < 10; k++) {
        memlens_region_begin("memset");
        memset(zeroed, k, sizeof zeroed);
        memlens_region_end("memset");
        memlens_region_begin("memmove");
        memmove(moved + (k % 2 ? 4096 : 0), moved + (k % 2 ? 0 : 4096), 4 * MIB);
        memlens_region_end("memmove");
        memlens_region_begin("memcpy");
        memcpy(copied, zeroed, sizeof copied);
        memlens_region_end("memcpy");
    }
    printf("%d %d %d\n", zeroed[7], moved[7], copied[7]);
    return 0;
}
