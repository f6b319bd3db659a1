/* A region the master marks around parallel loops: `sweep` should count both
 * threads' accesses (4 steps x N elements x 8 bytes read and written), and
 * `inside`, marked by each thread within a parallel region, its own share. */
#include <stdio.h>
#include "memlens.h"

#define N (1 << 20)
#define STEPS 4
static double a[N], b[N];

int main(void) {
    for (int i = 0; i < N; i++) b[i] = i & 15;
    memlens_region_begin("sweep");
    for (int step = 0; step < STEPS; step++) {
        #pragma omp parallel for num_threads(2) schedule(static)
        for (int i = 0; i < N; i++) a[i] = 2 * b[i];
    }
    memlens_region_end("sweep");
    #pragma omp parallel num_threads(2)
    {
        memlens_region_begin("inside");
        #pragma omp for schedule(static)
        for (int i = 0; i < N; i++) a[i] += b[i];
        memlens_region_end("inside");
    }
    printf("%.0f\n", a[N - 1]);
    return 0;
}
