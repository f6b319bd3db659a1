/* OpenMP triad: each thread annotates its share, so the region has one instance
 * per thread and the instances add up to the kernel's bytes (plus the few
 * accesses OpenMP's static-schedule bookkeeping makes on each thread's stack). */
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
int main(void) {
    long n = 1 << 22;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    for (long i = 0; i < n; i++) b[i] = 1, c[i] = 2;
    #pragma omp parallel num_threads(2)
    {
        memlens_region_begin("triad");
        #pragma omp for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        memlens_region_end("triad");
    }
    printf("%.1f\n", a[n - 1]);
    return 0;
}
