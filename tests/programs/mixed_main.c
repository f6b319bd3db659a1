/* An instrumented program calling into an instrumented and an uninstrumented
 * shared library: the instrumented library's accesses are counted through the
 * runtime's exported callbacks, the other library's are not seen. */
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"

long sum_instrumented(const long *v, long n);
long sum_plain(const long *v, long n);

int main(void) {
    long n = 1 << 20;
    long *v = malloc(n * sizeof *v);
    memlens_region_begin("fill");
    for (long i = 0; i < n; i++) v[i] = i;   /* n 8-byte stores here */
    memlens_region_end("fill");
    memlens_region_begin("instrumented lib");
    long a = sum_instrumented(v, n);          /* n 8-byte loads in the library */
    memlens_region_end("instrumented lib");
    memlens_region_begin("plain lib");
    long b = sum_plain(v, n);                 /* not seen */
    memlens_region_end("plain lib");
    printf("%ld %ld\n", a, b);
    free(v);
    return 0;
}
