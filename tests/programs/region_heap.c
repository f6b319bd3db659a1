/* 50 short steps, each a region: three 1000-byte temporaries allocated and
 * freed, and one 4000-byte block kept to the end. Each step lasts well under
 * a tick, so only counters read at the region's ends give its heap growth.
 * Prints the usable size of a kept block. Preloaded, not instrumented: the
 * annotation API comes from the runtime, looked up at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

int main(void) {
    void (*begin)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "memlens_region_begin");
    void (*end)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "memlens_region_end");
    char *kept[50];
    for (int i = 0; i < 50; i++) {
        if (begin) begin("step");
        for (int k = 0; k < 3; k++) {
            char *t = malloc(1000);
            memset(t, k, 1000);
            sink = t;
            free(t);
        }
        kept[i] = malloc(4000);
        memset(kept[i], i, 4000);
        if (end) end("step");
    }
    printf("%zu\n", malloc_usable_size(kept[0]));
    for (int i = 0; i < 50; i++) free(kept[i]);
    return 0;
}
