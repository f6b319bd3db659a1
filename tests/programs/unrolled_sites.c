// Lines that call malloc from several places once the compiler unrolls
// their loops: stacks of different return addresses, one site in the source.
#include <stdlib.h>

void *volatile blocks[8];

// Eight blocks live together: the line's peak is their sum.
__attribute__((noinline)) static void fill(void) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        blocks[i] = malloc(100 + i); // the kept blocks
}

// One block at a time from two places: the peak is one block, which no
// timeline tells from two blocks at once.
__attribute__((noinline)) static void churn(void) {
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        free(blocks[0] = malloc(1000)); // the churned blocks
}

int main(void) {
    for (int round = 0; round < 1000; round++) {
        fill();
        for (int i = 0; i < 8; i++)
            free(blocks[i]);
        churn();
    }
    return 0;
}
