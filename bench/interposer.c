/* The floor of any malloc interposer, for bench/interposer.sh: two preload
 * libraries built from this file around glibc's allocator.
 *   -DFORWARD_ONLY: malloc and free jump straight to glibc's (what every
 *     preloaded hook pays before doing anything).
 *   otherwise: the least a hook that counts every block exactly must do, as
 *     memlens' fast path does: call glibc's malloc, add the returned chunk's
 *     usable size (from its header) to a thread-local sum, count a sampling
 *     countdown down; free reads the header, subtracts, checks a filter of
 *     sampled blocks and jumps to glibc's free. The usable size is only
 *     known once malloc returns (glibc may hand out a chunk 16 bytes larger
 *     than the request rounds to), so malloc cannot jump to glibc's: it
 *     calls it. */
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#ifndef FORWARD_ONLY
struct counts {
    long countdown;
    uint64_t allocated, freed;
};
static __thread struct counts counts __attribute__((tls_model("initial-exec"))) = {524288, 0, 0};
static unsigned char sampled[1 << 16];

static size_t usable(void *p) {
    size_t h = ((size_t *)p)[-1];
    return (h & ~7ul) - ((h & 2) ? 16 : 8);
}
#endif

void *malloc(size_t n) {
#ifdef FORWARD_ONLY
    return __libc_malloc(n);
#else
    struct counts *c = &counts;
    void *p = __libc_malloc(n);
    if (p) {
        c->allocated += usable(p);
        if ((c->countdown -= n) <= 0) {
            c->countdown = 524288;
            sampled[((uintptr_t)p >> 4) & 0xffff] = 1;
        }
    }
    return p;
#endif
}

void free(void *p) {
    if (!p)
        return;
#ifndef FORWARD_ONLY
    counts.freed += usable(p);
    if (__builtin_expect(sampled[((uintptr_t)p >> 4) & 0xffff], 0))
        sampled[((uintptr_t)p >> 4) & 0xffff] = 0;
#endif
    __libc_free(p);
}
