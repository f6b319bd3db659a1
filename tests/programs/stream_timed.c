/* STREAM's four kernels, each in an annotated region and timed by the
 * program itself (outside the marks), REPEAT times (argv[1], default 10): it
 * prints each kernel's bandwidth, bytes moved over its summed time. Built
 * plain and recorded, it is the timing run `memlens report --timed-by`
 * reads, and its printed figures are the truth for what that gives. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "memlens.h"

#define N 4000000L

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 10;
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    const double scalar = 3.0;
    double spent[4] = {0};
    for (long i = 0; i < N; i++) a[i] = 1.0, b[i] = 2.0, c[i] = 0.0;
    for (int k = 0; k < repeat; k++) {
        double t = seconds();
        memlens_region_begin("copy");
        for (long i = 0; i < N; i++) c[i] = a[i];
        memlens_region_end("copy");
        spent[0] += seconds() - t;
        t = seconds();
        memlens_region_begin("scale");
        for (long i = 0; i < N; i++) b[i] = scalar * c[i];
        memlens_region_end("scale");
        spent[1] += seconds() - t;
        t = seconds();
        memlens_region_begin("add");
        for (long i = 0; i < N; i++) c[i] = a[i] + b[i];
        memlens_region_end("add");
        spent[2] += seconds() - t;
        t = seconds();
        memlens_region_begin("triad");
        for (long i = 0; i < N; i++) a[i] = b[i] + scalar * c[i];
        memlens_region_end("triad");
        spent[3] += seconds() - t;
    }
    const char *names[4] = {"copy", "scale", "add", "triad"};
    const double bytes[4] = {16, 16, 24, 24}; /* per element */
    for (int j = 0; j < 4; j++)
        printf("%s %.0f bytes/s\n", names[j], bytes[j] * N * repeat / spent[j]);
    printf("check %.1f\n", a[1] + b[1] + c[1]);
    free(a), free(b), free(c);
    return 0;
}
