/* A program with its own allocator, set up in main (as some HPC codes and
 * embedded-style programs do): a call before that is a bug it reports by
 * aborting. It counts every call, and prints the counts, which must be the same
 * under memlens. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *arena, *next_free;
static size_t arena_size;
static long mallocs, frees;

static void before_init(void) {
    static const char msg[] = "malloc before init\n";
    write(2, msg, sizeof msg - 1);
    abort();
}

/* Each block is preceded by its size, 16-byte aligned. */
void *malloc(size_t n) {
    if (!arena) before_init();
    mallocs++;
    size_t need = (n + 31) & ~(size_t)15;
    if (n > arena_size || need > arena_size - (size_t)(next_free - arena)) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = next_free + 16;
    *(size_t *)next_free = n;
    next_free += need;
    return p;
}

void free(void *p) {
    if (!arena) before_init();
    if (p) frees++;
}

void *calloc(size_t k, size_t n) {
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = malloc(k * n);
    if (p) memset(p, 0, k * n);
    return p;
}

void *realloc(void *old, size_t n) {
    void *p = malloc(n);
    if (p && old) {
        size_t had = *(size_t *)((char *)old - 16);
        memcpy(p, old, had < n ? had : n);
        free(old);
    }
    return p;
}

int main(void) {
    arena_size = 64 << 20;
    static char space[64 << 20];
    arena = next_free = space;
    void *blocks[1000];
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 1000; i++) blocks[i] = malloc(100 + i);
        for (int i = 0; i < 1000; i++) free(blocks[i]);
    }
    long m = mallocs, f = frees;
    printf("own allocator: %ld mallocs, %ld frees in main\n", m, f);
    return 0;
}
