/* Main fills a table, then two threads only read it: the table's lines pass
 * from main to the readers once, which is no sharing to report. */
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 2000000L

static volatile long table[16] __attribute__((aligned(64)));
static long sums[2][8] __attribute__((aligned(64))); /* a line per reader */

static void *reader(void *arg) {
    long *sum = arg, s = 0;
    for (long i = 0; i < ROUNDS; i++) s += table[i & 15];
    *sum = s;
    return 0;
}

int main(void) {
    for (long k = 0; k < 100000; k++)
        for (int i = 0; i < 16; i++) table[i] = k + i;
    pthread_t a, b;
    pthread_create(&a, 0, reader, sums[0]);
    pthread_create(&b, 0, reader, sums[1]);
    pthread_join(a, 0);
    pthread_join(b, 0);
    long total = 0;
    for (int i = 0; i < 16; i++) total += table[i];
    printf("%ld %ld %ld\n", sums[0][0], sums[1][0], total);
    return 0;
}
