/* The entry points GCC's ThreadSanitizer instrumentation calls, for code
 * built by `memlens gcc`, `g++` and `gfortran` (which compile with
 * -fsanitize=thread and link this instead of libtsan). Hand-written: libtsan
 * is a race detector, not a counter. `memlens gcc` compiles it (without the
 * instrumentation) into every executable and shared library it links, its
 * symbols hidden: each module counts with its own thread-local countdowns,
 * as the clang path's fast path does (src/compile.rs), and a program built
 * with the real ThreadSanitizer is never interposed by memlens' runtime.
 *
 * - Loads and stores: each class (load/store x 1, 2, 4, 8, 16 bytes) has a
 *   countdown; an access decrements it, and the one that borrows asks the
 *   runtime for a sample and the next countdown (memlens_access_refill).
 * - Ranges (a struct copied or cleared inline) and vtable pointers: counted
 *   as bulk bytes (memlens_range_at).
 * - Atomics: GCC replaces each atomic builtin by a call here, which does the
 *   operation, sequentially consistent (at least as strong as any order the
 *   program asked for), and counts it (memlens_atomic_at). 128-bit atomics
 *   are not provided: GCC calls libatomic for them unless built with -mcx16.
 * - Function entry and exit (ThreadSanitizer's shadow stack) and its
 *   initialization: nothing to do (stacks are unwound; the runtime starts
 *   itself). */
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* The runtime's class order: loads then stores, 1 to 16 bytes. */
HIDDEN __thread unsigned long long memlens_countdown[10]
    __attribute__((tls_model("initial-exec")));

unsigned long long memlens_access_refill(const void *addr, unsigned klass, const void *pc,
                                         unsigned long long *countdowns);
/* `did`: 0 a load, 1 a store, 2 both. */
void memlens_atomic_at(const void *addr, unsigned bytes, unsigned did, const void *pc);
void memlens_range_at(const void *addr, unsigned long long bytes, unsigned written,
                      const void *pc);

static inline __attribute__((always_inline)) void count(const void *addr, unsigned klass,
                                                        const void *pc) {
    unsigned long long left = memlens_countdown[klass];
    if (__builtin_expect(left == 0, 0))
        memlens_countdown[klass] = memlens_access_refill(addr, klass, pc, memlens_countdown);
    else
        memlens_countdown[klass] = left - 1;
}

#define ACCESS(name, klass) \
    HIDDEN void name(const void *addr) { count(addr, klass, __builtin_return_address(0)); }

ACCESS(__tsan_read1, 0)
ACCESS(__tsan_read2, 1)
ACCESS(__tsan_read4, 2)
ACCESS(__tsan_read8, 3)
ACCESS(__tsan_read16, 4)
ACCESS(__tsan_write1, 5)
ACCESS(__tsan_write2, 6)
ACCESS(__tsan_write4, 7)
ACCESS(__tsan_write8, 8)
ACCESS(__tsan_write16, 9)
ACCESS(__tsan_unaligned_read2, 1)
ACCESS(__tsan_unaligned_read4, 2)
ACCESS(__tsan_unaligned_read8, 3)
ACCESS(__tsan_unaligned_read16, 4)
ACCESS(__tsan_unaligned_write2, 6)
ACCESS(__tsan_unaligned_write4, 7)
ACCESS(__tsan_unaligned_write8, 8)
ACCESS(__tsan_unaligned_write16, 9)
/* With --param tsan-distinguish-volatile=1. */
ACCESS(__tsan_volatile_read1, 0)
ACCESS(__tsan_volatile_read2, 1)
ACCESS(__tsan_volatile_read4, 2)
ACCESS(__tsan_volatile_read8, 3)
ACCESS(__tsan_volatile_read16, 4)
ACCESS(__tsan_volatile_write1, 5)
ACCESS(__tsan_volatile_write2, 6)
ACCESS(__tsan_volatile_write4, 7)
ACCESS(__tsan_volatile_write8, 8)
ACCESS(__tsan_volatile_write16, 9)

HIDDEN void __tsan_read_range(const void *addr, size_t n) {
    memlens_range_at(addr, n, 0, __builtin_return_address(0));
}
HIDDEN void __tsan_write_range(const void *addr, size_t n) {
    memlens_range_at(addr, n, 1, __builtin_return_address(0));
}
HIDDEN void __tsan_vptr_read(void **slot) {
    memlens_range_at(slot, sizeof *slot, 0, __builtin_return_address(0));
}
HIDDEN void __tsan_vptr_update(void **slot, void *value) {
    (void)value;
    memlens_range_at(slot, sizeof *slot, 1, __builtin_return_address(0));
}

HIDDEN void __tsan_init(void) {}
HIDDEN void __tsan_func_entry(void *caller) { (void)caller; }
HIDDEN void __tsan_func_exit(void) {}
HIDDEN void __tsan_atomic_thread_fence(int order) {
    (void)order;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
HIDDEN void __tsan_atomic_signal_fence(int order) {
    (void)order;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

#define SC __ATOMIC_SEQ_CST
#define HERE __builtin_return_address(0)
#define RMW(bits, T, op, builtin)                                                     \
    HIDDEN T __tsan_atomic##bits##_##op(volatile T *a, T v, int order) {              \
        (void)order;                                                                  \
        memlens_atomic_at((const void *)a, sizeof(T), 2, HERE);                       \
        return builtin(a, v, SC);                                                     \
    }
#define ATOMICS(bits, T)                                                              \
    HIDDEN T __tsan_atomic##bits##_load(const volatile T *a, int order) {             \
        (void)order;                                                                  \
        memlens_atomic_at((const void *)a, sizeof(T), 0, HERE);                       \
        return __atomic_load_n(a, SC);                                                \
    }                                                                                 \
    HIDDEN void __tsan_atomic##bits##_store(volatile T *a, T v, int order) {          \
        (void)order;                                                                  \
        memlens_atomic_at((const void *)a, sizeof(T), 1, HERE);                       \
        __atomic_store_n(a, v, SC);                                                   \
    }                                                                                 \
    RMW(bits, T, exchange, __atomic_exchange_n)                                       \
    RMW(bits, T, fetch_add, __atomic_fetch_add)                                       \
    RMW(bits, T, fetch_sub, __atomic_fetch_sub)                                       \
    RMW(bits, T, fetch_and, __atomic_fetch_and)                                       \
    RMW(bits, T, fetch_or, __atomic_fetch_or)                                         \
    RMW(bits, T, fetch_xor, __atomic_fetch_xor)                                       \
    RMW(bits, T, fetch_nand, __atomic_fetch_nand)                                     \
    HIDDEN int __tsan_atomic##bits##_compare_exchange_strong(                         \
        volatile T *a, T *expected, T v, int order, int failure) {                    \
        (void)order, (void)failure;                                                   \
        memlens_atomic_at((const void *)a, sizeof(T), 2, HERE);                       \
        return __atomic_compare_exchange_n(a, expected, v, 0, SC, SC);                \
    }                                                                                 \
    HIDDEN int __tsan_atomic##bits##_compare_exchange_weak(                           \
        volatile T *a, T *expected, T v, int order, int failure) {                    \
        (void)order, (void)failure;                                                   \
        memlens_atomic_at((const void *)a, sizeof(T), 2, HERE);                       \
        return __atomic_compare_exchange_n(a, expected, v, 1, SC, SC);                \
    }                                                                                 \
    HIDDEN T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T expected,    \
                                                        T v, int order, int failure) { \
        (void)order, (void)failure;                                                   \
        memlens_atomic_at((const void *)a, sizeof(T), 2, HERE);                       \
        __atomic_compare_exchange_n(a, &expected, v, 0, SC, SC);                      \
        return expected;                                                              \
    }

ATOMICS(8, unsigned char)
ATOMICS(16, unsigned short)
ATOMICS(32, unsigned int)
ATOMICS(64, unsigned long long)
