/* OpenMP calling contexts: `solve` opens a parallel region of two threads;
 * each thread allocates a scratch block in it and sums its share of `grid`;
 * a nested region (serialized: one active level by default) allocates too.
 * Every context walked inside the regions should reach `solve` and `main`. */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define N (1 << 21)
static double grid[N];

__attribute__((noinline)) static double nested(int t) {
    double s = 0;
    #pragma omp parallel num_threads(2) reduction(+ : s)
    {
        double *inner = malloc(64 * sizeof *inner); /* INNER */
        for (int i = 0; i < 64; i++) inner[i] = t + i;
        for (int i = 0; i < 64; i++) s += inner[i];
        free(inner);
    }
    return s;
}

__attribute__((noinline)) static double solve(int steps) {
    double total = 0;
    for (int step = 0; step < steps; step++) {
        #pragma omp parallel num_threads(2) reduction(+ : total)
        {
            int t = omp_get_thread_num();
            double *scratch = malloc(4096 * sizeof *scratch); /* SCRATCH */
            for (int i = 0; i < 4096; i++) scratch[i] = i * t;
            #pragma omp for schedule(static)
            for (int i = 0; i < N; i++) total += grid[i] + scratch[i & 4095]; /* SUM */
            total += nested(t);
            free(scratch);
        }
    }
    return total;
}

int main(void) {
    for (int i = 0; i < N; i++) grid[i] = i & 7;
    printf("%.0f\n", solve(8));
    return 0;
}
