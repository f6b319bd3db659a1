/* Main marks a phase (and a region of its own) around two threads that each
 * write their half of an array: the phase counts both threads' bytes, the
 * region main's alone. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"

#define N 1000000L

static double *data;

static void *fill(void *arg) {
    long half = (long)arg;
    for (long i = half * (N / 2); i < (half + 1) * (N / 2); i++) data[i] = (double)i;
    return 0;
}

int main(void) {
    data = malloc(N * sizeof *data);
    memlens_phase_begin("fill");
    memlens_region_begin("fill");
    pthread_t a, b;
    pthread_create(&a, 0, fill, (void *)0L);
    pthread_create(&b, 0, fill, (void *)1L);
    pthread_join(a, 0);
    pthread_join(b, 0);
    memlens_region_end("fill");
    memlens_phase_end("fill");
    printf("%.0f\n", data[N - 1]);
    free(data);
    return 0;
}
