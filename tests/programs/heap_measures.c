/* Known heap figures for heaptrack's measures, every one countable by hand:
 * - `temporaries`: TEMP blocks of 40 bytes, each freed before the thread
 *   allocates anything else (heaptrack's temporary allocations);
 * - `kept`: KEPT blocks of 24 bytes, all live at once, then freed: a site
 *   with no temporaries whose bytes at the peak are known;
 * - a 100 MiB block live for about 1 ms between two capacity ticks: the heap's
 *   peak is 100 MiB + 24 * KEPT + anything libc holds, a single instant;
 * - `leak_a`, `leak_b`, `leak_c`: 3, 5 and 7 blocks of 100 bytes through the
 *   wrapper `xmalloc`, never freed;
 * - 11 blocks of malloc(0), freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEMP 10000
#define KEPT 1000

void *volatile sink;

__attribute__((noinline)) void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

__attribute__((noinline)) void leak_a(void) {
    for (int i = 0; i < 3; i++)
        sink = xmalloc(100);
}
__attribute__((noinline)) void leak_b(void) {
    for (int i = 0; i < 5; i++)
        sink = xmalloc(100);
}
__attribute__((noinline)) void leak_c(void) {
    for (int i = 0; i < 7; i++)
        sink = xmalloc(100);
}

__attribute__((noinline)) void temporaries(void) {
    for (int i = 0; i < TEMP; i++) {
        char *p = malloc(40);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) void **kept(void) {
    void **v = calloc(KEPT, sizeof *v);
    for (int i = 0; i < KEPT; i++)
        v[i] = malloc(24);
    return v;
}

__attribute__((noinline)) void spike(void) {
    char *big = malloc(100 << 20);
    big[0] = 1;
    sink = big;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    free(big);
}

int main(void) {
    temporaries();
    void **v = kept();
    spike();
    for (int i = 0; i < KEPT; i++)
        free(v[i]);
    free(v);
    for (int i = 0; i < 11; i++) {
        void *p = malloc(0);
        sink = p;
        free(p);
    }
    leak_a();
    leak_b();
    leak_c();
    puts("done");
    return 0;
}
