/* Allocations under call chains a frame-pointer walk cannot follow: built with
 * -O2 -fomit-frame-pointer -fno-optimize-sibling-calls, the chains cross a shared
 * library and back, libc (qsort's comparator), a frame whose CFA follows rbp
 * (alloca), a frame above 8 KiB, a signal handler, a thread and a recursion.
 * Each allocation's size names its case; the test reads each one's stack. */
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;
long lib_outer(void (*callback)(long), long n);

NOINLINE void leaf(long size) { sink = malloc(size); }

NOINLINE void chain_c(long size) { leaf(size); }
NOINLINE void chain_b(long size) { chain_c(size); }
NOINLINE void chain_a(long size) { chain_b(size); }

NOINLINE void from_lib(long size) { leaf(size); }

/* Two frames whose CFA follows rbp: the inner one's saved rbp leads to the outer's. */
NOINLINE void with_alloca(long size, long scratch, int depth) {
    char *buf = alloca(scratch);
    memset(buf, 1, scratch);
    sink = buf;
    if (depth == 0)
        leaf(size);
    else
        with_alloca(size, scratch + 16, depth - 1);
}

NOINLINE void big_frame(long size) {
    volatile char buf[65536];
    buf[0] = buf[65535] = 1;
    leaf(size + buf[0] - 1);
}

static int compared;
static int compare(const void *a, const void *b) {
    if (!compared++) leaf(1005);
    return *(const int *)a - *(const int *)b;
}

NOINLINE void sort_and_allocate(void) {
    int v[64];
    for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
    qsort(v, 64, sizeof v[0], compare);
}

static void on_signal(int sig) {
    (void)sig;
    leaf(1006);
}

static void *thread_main(void *arg) {
    (void)arg;
    leaf(1007);
    return NULL;
}

NOINLINE void recurse(int depth) {
    if (depth == 0)
        leaf(1008);
    else
        recurse(depth - 1);
}

int main(void) {
    chain_a(1001);
    lib_outer(from_lib, 1002);
    with_alloca(1003, 4000, 1);
    big_frame(1004);
    sort_and_allocate();
    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    recurse(20);
    puts("done");
    return 0;
}
