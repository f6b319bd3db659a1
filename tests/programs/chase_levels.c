/* The calibration's pointer chase under the cache model: for each working set
 * given (bytes), a random cycle through its cache lines, walked once to warm
 * the caches, then twice inside a region named after the size ("ws-<bytes>"). */
#include <memlens.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        size_t bytes = strtoull(argv[a], 0, 10), lines = bytes / 64;
        size_t *next = aligned_alloc(64, lines * 64);
        size_t *order = malloc(lines * sizeof *order);
        for (size_t i = 0; i < lines; i++)
            order[i] = i;
        srand(7);
        for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle */
            size_t j = (size_t)rand() % i, t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < lines; i++)
            next[i * 8] = order[i] * 8;
        free(order);
        char name[32];
        snprintf(name, sizeof name, "ws-%zu", bytes);
        size_t at = 0;
        for (size_t step = 0; step < lines; step++)
            at = next[at];
        memlens_region_begin(name);
        for (size_t step = 0; step < 2 * lines; step++)
            at = next[at];
        memlens_region_end(name);
        printf("%zu\n", at);
        free(next);
    }
    return 0;
}
