/* Two threads each increment their own counter. The counters sit side by side
 * in one cache line (false sharing), or a line apart with -DPADDED. They meet
 * at a barrier before each of CHUNKS chunks of increments, so their uses of
 * the line alternate even on a machine so loaded that the scheduler runs one
 * thread's whole chunk before the other's (seen in CI: one run of 10 M
 * increments each ran before the other, and no line was shared). */
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 10000000L
#define CHUNKS 20

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
    for (int c = 0; c < CHUNKS; c++) {
        pthread_barrier_wait(&start);
        for (long i = 0; i < ROUNDS / CHUNKS; i++)
            counters.first++; /* FIRST */
    }
    return 0;
}

static void *bump_second(void *arg) {
    (void)arg;
    for (int c = 0; c < CHUNKS; c++) {
        pthread_barrier_wait(&start);
        for (long i = 0; i < ROUNDS / CHUNKS; i++)
            counters.second++; /* SECOND */
    }
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
