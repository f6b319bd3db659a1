/* `fold_phases ITERATIONS [EVERY [SLOW]]`, or `fold_phases until FILE` to run until
 * FILE exists. ITERATIONS identical iterations (region "iteration"), each three copies
 * of equal work in turn: first -> second, second -> third, third -> first. Folded,
 * each third of an iteration touches two of the arrays, and the offsets within
 * them grow with the phase. With EVERY, one region "iteration" marks EVERY
 * iterations (an annotation that disagrees with the loop's own period). With
 * SLOW, the second half's iterations also take SLOW steps of arithmetic without
 * memory accesses: the loop slows down halfway, as a busier machine makes it. */
#include <memlens.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef N
#define N (8 * 1024)
#endif
double first[N], second[N], third[N];

/* WORK steps of dependent arithmetic per element, the same in every copy: the
 * three copies then take equal time however caches, 4 KiB aliasing between the
 * arrays and the sampling's own cost treat their memory accesses. */
#ifndef WORK
#define WORK 0
#endif

static void copy(double *restrict to, const double *restrict from) {
    for (long i = 0; i < N; i++) {
        double x = from[i];
        for (int k = 0; k < WORK; k++)
            x = x * 0.999 + 0.5;
        to[i] = x + 1;
    }
}

int main(int argc, char **argv) {
    const char *until = argc > 2 && strcmp(argv[1], "until") == 0 ? argv[2] : NULL;
    long iterations = until ? -1 : argc > 1 ? atol(argv[1]) : 100;
    long every = !until && argc > 2 ? atol(argv[2]) : 1;
    long slow = !until && argc > 3 ? atol(argv[3]) : 0;
    double spin = 0;
    for (long it = 0; until ? access(until, F_OK) != 0 : it < iterations; it++) {
        if (it % every == 0)
            memlens_region_begin("iteration");
        copy(second, first);
        copy(third, second);
        copy(first, third);
        for (long k = 0; 2 * it >= iterations && k < slow; k++)
            spin = spin * 0.999 + 0.5;
        if (it % every == every - 1)
            memlens_region_end("iteration");
    }
    printf("%g\n", first[N / 2]);
    if (slow)
        printf("%g\n", spin);
    return 0;
}
