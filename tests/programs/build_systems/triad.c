/* STREAM's triad in a parallel loop, inside an annotated region. */
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"

#define N 2000000L

int main(void) {
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    for (long i = 0; i < N; i++) b[i] = 1.0, c[i] = 2.0;
    memlens_region_begin("triad");
    for (int k = 0; k < 10; k++) {
#pragma omp parallel for
        for (long i = 0; i < N; i++) a[i] = b[i] + 3.0 * c[i];
    }
    memlens_region_end("triad");
    printf("a[7]=%.1f\n", a[7]);
    free(a), free(b), free(c);
    return 0;
}
