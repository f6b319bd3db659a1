/* Two threads take turns, a barrier apart: in its turn a thread allocates a
 * 1 MiB block, writes its first line over and over, and frees it. The block
 * is mapped and unmapped each time, so the next turn's block, the other
 * thread's, gets the same address: the threads write the same bytes at the
 * same addresses but never share a block, so no line is shared. Prints how
 * many turns got the previous turn's address. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define TURNS 200
#define SIZE (1 << 20)

static pthread_barrier_t turn;
static void *volatile last;
static int reused;

static void *take_turns(void *arg) {
    long id = (long)arg;
    for (int t = 0; t < TURNS; t++) {
        pthread_barrier_wait(&turn);
        if (t % 2 != id) continue;
        volatile long *block = malloc(SIZE);
        reused += (void *)block == last;
        last = (void *)block;
        for (long i = 0; i < 20000; i++) block[i % 8] += i; /* WRITE */
        free((void *)block);
    }
    return 0;
}

int main(void) {
    /* A fixed threshold: glibc would otherwise raise it at the first free
     * of a mapped block, and serve the next ones from each thread's arena. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    pthread_t a, b;
    pthread_barrier_init(&turn, 0, 2);
    pthread_create(&a, 0, take_turns, (void *)0);
    pthread_create(&b, 0, take_turns, (void *)1);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("reused %d of %d\n", reused, TURNS - 1);
    return 0;
}
