/* `memlens doctor --validate`'s kernel: three static arrays with known
 * accesses. Each is written once (first touch: one page fault per page),
 * then `small` is read 4 times, `medium` twice and `large` once:
 *   loads:  small 4 x 512 Ki, medium 2 x 1 Mi, large 1 x 2 Mi doubles
 *           (2 Mi, 2 Mi and 2 Mi: a third each);
 *   stores: 512 Ki, 1 Mi and 2 Mi doubles (1/7, 2/7, 4/7);
 *   pages:  1, 2 and 4 thousand and 96 (4, 8 and 16 MiB). */
#include <stdio.h>

#define SMALL (512L * 1024)
#define MEDIUM (1024L * 1024)
#define LARGE (2048L * 1024)

double small[SMALL], medium[MEDIUM], large[LARGE];

static double sum(const double *a, long n, int times) {
    double s = 0;
    for (int t = 0; t < times; t++)
        for (long i = 0; i < n; i++)
            s += a[i];
    return s;
}

int main(void) {
    for (long i = 0; i < SMALL; i++) small[i] = (double)i;
    for (long i = 0; i < MEDIUM; i++) medium[i] = (double)i;
    for (long i = 0; i < LARGE; i++) large[i] = (double)i;
    double s = sum(small, SMALL, 4) + sum(medium, MEDIUM, 2) + sum(large, LARGE, 1);
    printf("%g\n", s);
    return 0;
}
