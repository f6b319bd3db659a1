/* C names that are also Itanium type codes (a: signed char, b: bool, c: char,
 * f: float, g: __float128), and a switch whose loads the compiler merges into
 * one instruction of no single source line. */
#include <stdio.h>
#define N 100000
static double a[N], b[N], c[N];
struct quad { long w, x, y, z; };

__attribute__((noinline)) void f(double s) {
    for (long i = 0; i < N; i++) a[i] = b[i] + s * c[i];
}

__attribute__((noinline)) void g(struct quad *q, long n, int k) {
    for (long i = 0; i < n; i++) {
        switch ((i ^ k) & 3) {
        case 0: q[i].w += q[i].x; break;
        case 1: q[i].x += q[i].y; break;
        case 2: q[i].y += q[i].z; break;
        default: q[i].z += q[i].w; break;
        }
    }
}

static struct quad quads[N / 4];

int main(void) {
    for (long i = 0; i < N; i++) b[i] = 1.0, c[i] = 2.0;
    for (int k = 0; k < 10; k++) f(3.0), g(quads, N / 4, k);
    printf("%.1f %ld\n", a[1], quads[1].w);
    return 0;
}
