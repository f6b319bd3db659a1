/* The shared library of call_stacks.c: calls back into the program. */
#define NOINLINE __attribute__((noinline))

NOINLINE long lib_inner(void (*callback)(long), long n) {
    callback(n);
    return n;
}

long lib_outer(void (*callback)(long), long n) { return lib_inner(callback, n) + 1; }
