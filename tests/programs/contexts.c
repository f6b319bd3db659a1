/* One routine reads one array from two call paths, three times as often from
 * one as from the other: the array's accesses split 3:1 between the two
 * calling contexts, which the access line alone cannot tell apart. */
#include <stdio.h>
#include <stdlib.h>
#define N 1000000L

__attribute__((noinline)) double sum(const double *x, long n) {
    double s = 0;
    /* A side effect: the compiler may not merge or hoist the calls. */
    __asm__ volatile("" ::: "memory");
    for (long i = 0; i < n; i++) s += x[i]; /* READ */
    return s;
}

__attribute__((noinline)) double often(const double *x) {
    return sum(x, N) + sum(x, N) + sum(x, N); /* OFTEN */
}

__attribute__((noinline)) double seldom(const double *x) {
    return sum(x, N) + 0.0 * x[0]; /* SELDOM (not a tail call) */
}

int main(void) {
    double *data = malloc(N * sizeof *data);
    for (long i = 0; i < N; i++) data[i] = 1.0;
    double s = 0;
    for (int k = 0; k < 5; k++) s += often(data) + seldom(data);
    printf("%.0f\n", s);
    free(data);
    return 0;
}
