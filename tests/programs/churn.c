/* Two threads, each allocating 1000000 blocks of 32 to 95 bytes and freeing
   each at once but every thousandth: 2000 blocks leaked in all. With every
   block recorded, some 2000 blocks of log. */
#include <pthread.h>
#include <stdlib.h>
#define BLOCKS 1000000
static void *churn(void *arg) {
    void **kept = arg;
    for (long i = 0; i < BLOCKS; i++) {
        char *p = malloc(32 + i % 64);
        p[0] = (char)i;
        if (i % 1000 == 0)
            kept[i / 1000] = p;
        else
            free(p);
    }
    return 0;
}
int main(void) {
    static void *kept[2][BLOCKS / 1000];
    pthread_t t;
    pthread_create(&t, 0, churn, kept[0]);
    churn(kept[1]);
    pthread_join(t, 0);
    return 0;
}
