/* Access patterns whose reuse distances are known: a cyclic sweep over
 * CYCLIC_LINES lines repeated SWEEPS times (every reuse sees all the other
 * lines), then RANDOM_ACCESSES loads of lines drawn by xorshift64 from a
 * footprint of RANDOM_LINES lines (the test replays the same draw). One 8-byte
 * load per line touched; loop state stays in registers. */
#include <stdio.h>
#include <stdlib.h>

#define MAX_LINES (1 << 16)
_Alignas(64) long cyclic_data[MAX_LINES * 8];
_Alignas(64) long random_data[MAX_LINES * 8];
volatile long sink;

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s CYCLIC_LINES SWEEPS RANDOM_LINES RANDOM_ACCESSES SEED\n", argv[0]);
        return 2;
    }
    unsigned long cyclic_lines = strtoul(argv[1], 0, 10), sweeps = strtoul(argv[2], 0, 10);
    unsigned long random_lines = strtoul(argv[3], 0, 10), accesses = strtoul(argv[4], 0, 10);
    unsigned long x = strtoul(argv[5], 0, 10);
    if (cyclic_lines > MAX_LINES || random_lines > MAX_LINES || random_lines == 0)
        return 2;
    long sum = 0;
    for (unsigned long s = 0; s < sweeps; s++)
        for (unsigned long i = 0; i < cyclic_lines; i++)
            sum += cyclic_data[i * 8];
    for (unsigned long n = 0; n < accesses; n++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += random_data[(x % random_lines) * 8];
    }
    sink = sum;
    return 0;
}
