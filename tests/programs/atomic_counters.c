/* Two threads each add to their own atomic counter. The counters sit side by
 * side in one cache line (false sharing, the most common kind), or a line
 * apart with -DPADDED. They meet at a barrier before each of CHUNKS chunks, so
 * their uses of the line alternate however loaded the machine. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define ROUNDS 4000000L
#define CHUNKS 20

static struct {
    atomic_long first;
#ifdef PADDED
    char pad[64];
#endif
    atomic_long second;
} counters __attribute__((aligned(64)));
static pthread_barrier_t start;

static void *bump(void *arg) {
    atomic_long *counter = arg;
    for (int c = 0; c < CHUNKS; c++) {
        pthread_barrier_wait(&start);
        for (long i = 0; i < ROUNDS / CHUNKS; i++)
            atomic_fetch_add_explicit(counter, 1, memory_order_relaxed); /* BUMP */
    }
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&start, 0, 2);
    pthread_create(&a, 0, bump, &counters.first);
    pthread_create(&b, 0, bump, &counters.second);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%ld %ld\n", atomic_load(&counters.first), atomic_load(&counters.second));
    return 0;
}
