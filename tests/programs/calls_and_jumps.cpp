// Counts across calls, a throw caught, longjmp and a math library call,
// where the pass writes a function's countdowns back to memory and reads
// them again. Every access of the program is to a volatile long (each is one
// 8-byte load or store of the compiled code) but the exception object (one
// 4-byte store a throw): tests/access.rs computes the exact counts.
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
enum { N = 1000, ROUNDS = 2000 };
static volatile long data[N];
static volatile long sink;
static jmp_buf env;
__attribute__((noinline)) static void inner(int n) {
    for (int i = 0; i < n; i++) data[i] = data[i] + 1; // n loads, n stores
}
__attribute__((noinline)) static void maybe_throw(int r) {
    if (r % 3 == 0) throw r; // the exception object: one 4-byte store
}
__attribute__((noinline)) static void maybe_jump(int r) {
    if (r % 5 == 0) longjmp(env, 1);
}
int main(int argc, char **) {
    for (int r = 0; r < ROUNDS; r++) {
        sink = data[r % N];                         // 1 load, 1 store
        inner(N);
        try {
            maybe_throw(r);
            sink = 1;                               // 1 store when not thrown
        } catch (int) {
            sink = 2;                               // 1 store when thrown
        }
        if (setjmp(env) == 0)
            maybe_jump(r);
        else
            sink = (long)sqrt((double)data[r % N] + argc); // 1 load, 1 store
    }
    printf("%ld\n", data[0]);
    return 0;
}
