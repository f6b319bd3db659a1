/* Two threads hand one block back and forth through the allocator 100000
   times: the producer allocates it and publishes its address, the consumer
   frees it and says so, and the producer's next allocation of the same size
   gets the same block back (the consumer's per-thread cache full, its frees go
   to the block's arena). Each free and the reallocation after it are a cache
   line's trip apart, about 100 ns: a log whose threads' times disagree by
   more puts the reallocation before the free. The producer's last allocation
   is left. Prints how many allocations returned the block just freed. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#define ROUNDS 100000
static _Atomic(char *) handed;
static atomic_int freed;
/* Spins a while, then lets others run: on a loaded machine the other thread
   may be waiting for this CPU. */
static void wait_a_little(long *spins) {
    if (++*spins % 1000 == 0)
        sched_yield();
}
static void *consume(void *arg) {
    (void)arg;
    for (long i = 0; i < ROUNDS; i++) {
        char *p;
        long spins = 0;
        while (!(p = atomic_exchange(&handed, 0)))
            wait_a_little(&spins);
        free(p);
        atomic_store(&freed, 1);
    }
    return 0;
}
int main(void) {
    pthread_t consumer;
    pthread_create(&consumer, 0, consume, 0);
    char *last = 0;
    long same = 0;
    for (long i = 0; i < ROUNDS; i++) {
        char *p = malloc(48);
        p[0] = (char)i;
        same += p == last;
        last = p;
        atomic_store(&freed, 0);
        atomic_store(&handed, p);
        long spins = 0;
        while (!atomic_load(&freed))
            wait_a_little(&spins);
    }
    pthread_join(consumer, 0);
    last = malloc(48);
    printf("%ld of %d allocations returned the block just freed\n", same, ROUNDS);
    return last == 0;
}
