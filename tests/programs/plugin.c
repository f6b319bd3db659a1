#include <stdlib.h>
#include <string.h>

/* Keeps the compiler from eliding the malloc/free pairs. */
void *volatile plugin_sink;

long plugin_work(long n) {
    long sum = 0;
    for (long i = 0; i < n; i++) {
        char *p = malloc(100000);
        plugin_sink = p;
        memset(p, 1, 100);
        sum += p[50];
        free(p);
    }
    return sum;
}
