/* Two threads each increment their own counter. The counters sit side by side
 * in one cache line (false sharing), or a line apart with -DPADDED. Both start
 * at a barrier, so their increments overlap in time even on a loaded machine. */
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 10000000L

struct counters {
    volatile long first;
#ifdef PADDED
    char pad[64];
#endif
    volatile long second;
} __attribute__((aligned(64)));

static struct counters counters;
static pthread_barrier_t start;

static void *bump_first(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < ROUNDS; i++)
        counters.first++; /* FIRST */
    return 0;
}

static void *bump_second(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < ROUNDS; i++)
        counters.second++; /* SECOND */
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&start, 0, 2);
    pthread_create(&a, 0, bump_first, 0);
    pthread_create(&b, 0, bump_second, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%ld %ld\n", counters.first, counters.second);
    return 0;
}
