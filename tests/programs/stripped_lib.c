/* Stripped to its dynamic symbols (strip --strip-unneeded): the static
 * hidden_alloc has no symbol, and lies between exported functions. */
#include <stdlib.h>
void *volatile keep;
__attribute__((noinline)) void exported_first(void) { keep = 0; }
__attribute__((noinline)) static void *hidden_alloc(int n) { return malloc(n); }
void *exported_entry(int n) { void *p = hidden_alloc(n); keep = p; return p; }
