/* Touches every page of a 64 MiB heap block once, from two threads:
   16384 first touches attributed to one allocation. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define SIZE (64u << 20)
static char *block;
static void *half(void *arg) {
    size_t start = (size_t)arg;
    for (size_t i = start; i < start + SIZE / 2; i += 4096) block[i] = 1;
    return 0;
}
int main(void) {
    block = malloc(SIZE);
    pthread_t t;
    pthread_create(&t, 0, half, (void *)(size_t)(SIZE / 2));
    half(0);
    pthread_join(t, 0);
    long sum = 0;
    for (size_t i = 0; i < SIZE; i += 4096) sum += block[i];
    free(block);
    return sum == SIZE / 4096 ? 0 : 1;
}
