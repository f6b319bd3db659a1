/* STREAM-style kernels (copy, scale, add, triad) and a pointer chase, each in an
 * annotated region. Build with `memlens cc` for exact bytes per region and access
 * samples: copy and scale move 16 bytes per element, add and triad 24, and each
 * step of the chase loads one 8-byte index. */
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"

#ifndef N
#define N 4000000L
#endif
#ifndef CHASE
#define CHASE (1L << 20)
#endif
#ifndef REPEAT
#define REPEAT 10 /* STREAM's NTIMES */
#endif

static long *make_cycle(long n) {
    /* One random cycle through all n slots (Sattolo's algorithm). */
    long *next = malloc(n * sizeof *next);
    for (long i = 0; i < n; i++) next[i] = i;
    unsigned long x = 88172645463325252UL;
    for (long i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        long j = (long)(x % (unsigned long)i);
        long t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    return next;
}

int main(void) {
    double *a = malloc(N * sizeof *a);
    double *b = malloc(N * sizeof *b);
    double *c = malloc(N * sizeof *c);
    const double scalar = 3.0;
    for (long i = 0; i < N; i++) a[i] = 1.0, b[i] = 2.0, c[i] = 0.0;
    for (int k = 0; k < REPEAT; k++) {
        memlens_region_begin("copy");
        for (long i = 0; i < N; i++) c[i] = a[i];
        memlens_region_end("copy");
        memlens_region_begin("scale");
        for (long i = 0; i < N; i++) b[i] = scalar * c[i];
        memlens_region_end("scale");
        memlens_region_begin("add");
        for (long i = 0; i < N; i++) c[i] = a[i] + b[i];
        memlens_region_end("add");
        memlens_region_begin("triad");
        for (long i = 0; i < N; i++) a[i] = b[i] + scalar * c[i];
        memlens_region_end("triad");
    }
    long *next = make_cycle(CHASE);
    long p = 0;
    memlens_region_begin("chase");
    for (long s = 0; s < 4 * CHASE; s++) p = next[p];
    memlens_region_end("chase");
    printf("a[1]=%.1f b[1]=%.1f c[1]=%.1f p=%ld\n", a[1], b[1], c[1], p);
    free(a), free(b), free(c), free(next);
    return 0;
}
