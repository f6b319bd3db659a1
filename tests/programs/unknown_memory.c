// Accesses to memory no object covers, one kind after the other: the
// program's ELF header (its image, no symbol), a heap chunk's header
// (between the blocks the program writes), and a mapping made by a raw system call (no mmap call
// to see).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern const char __ehdr_start[];

enum { N = 1 << 20 };

int main(void) {
    size_t sum = 0;
    for (long i = 0; i < N; i++)
        sum += ((const volatile char *)__ehdr_start)[i & 63];
    char *a = malloc(48), *b = malloc(48);
    for (long i = 0; i < N; i++) {
        ((volatile char *)a)[i % 48] = (char)i;
        ((volatile char *)b)[i % 48] = (char)i;
    }
    for (long i = 0; i < N; i++)
        sum += ((volatile size_t *)b)[-1];
    char *m = (char *)syscall(SYS_mmap, 0, 1 << 16, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (long i = 0; i < N; i++)
        ((volatile char *)m)[i & 0xffff] = (char)i;
    printf("%zu\n", sum & 1);
    free(a);
    free(b);
    return 0;
}
