/* Two threads each write the first bytes of their own BUF-byte buffer, the
 * two buffers side by side in one block: with BUF 32 both threads write one
 * cache line (false sharing); padded to BUF 96 they write lines of their
 * own. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BUF
#define BUF 32
#endif
#define ROUNDS 20000000L

static pthread_barrier_t start;

static void *fill(void *arg) {
    volatile char *buf = arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < ROUNDS; i++)
        buf[i % 8]++; /* FILL */
    return NULL;
}

int main(void) {
    /* One allocation split in two: the buffers sit exactly BUF bytes apart,
     * whatever the allocator's size classes. */
    char *both = aligned_alloc(64, 2 * BUF); /* BUFFERS */
    pthread_t a, b;
    pthread_barrier_init(&start, 0, 2);
    pthread_create(&a, 0, fill, both);
    pthread_create(&b, 0, fill, both + BUF);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%d %d\n", both[0], both[BUF]);
    free(both);
    return 0;
}
