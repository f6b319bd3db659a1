/* The access callbacks' fast path, linked into executables built by `memlens cc`
 * as LLVM bitcode so that link-time optimization inlines it into the instrumented
 * loops: one decrement of a thread-local countdown per access, and a call into the
 * runtime (memlens_access_slow) only when it runs out. Hand-written: no library
 * provides sancov callbacks with a sampling fast path. */
#include <stdint.h>

__attribute__((visibility("hidden"), tls_model("initial-exec")))
__thread uint64_t memlens_countdown[10];

void memlens_access_slow(const void *addr, unsigned cls, const void *pc, uint64_t *countdowns);

/* The address of the access itself: with the callback inlined, a return address
 * would be the enclosing function's caller. */
#define HERE(pc) __asm__ volatile("lea 0(%%rip), %0" : "=r"(pc))

#define CALLBACK(name, cls)                                                    \
    void name(const void *addr) {                                              \
        if (__builtin_expect(memlens_countdown[cls]-- == 0, 0)) {              \
            const void *pc;                                                    \
            HERE(pc);                                                          \
            memlens_access_slow(addr, cls, pc, memlens_countdown);             \
        }                                                                      \
    }

CALLBACK(__sanitizer_cov_load1, 0)
CALLBACK(__sanitizer_cov_load2, 1)
CALLBACK(__sanitizer_cov_load4, 2)
CALLBACK(__sanitizer_cov_load8, 3)
CALLBACK(__sanitizer_cov_load16, 4)
CALLBACK(__sanitizer_cov_store1, 5)
CALLBACK(__sanitizer_cov_store2, 6)
CALLBACK(__sanitizer_cov_store4, 7)
CALLBACK(__sanitizer_cov_store8, 8)
CALLBACK(__sanitizer_cov_store16, 9)
