/* The main thread alone allocates and frees 1000000 blocks of 16 to 79 bytes
   (keeping every thousandth: 1000), waits, then one thread allocates 200000
   blocks and hands all but every thousandth to a second thread through a
   pipe, which frees them, while the main thread frees what it kept:
   1200000 allocations, 200 blocks leaked (the producer's). The wait lets a
   reader of the log catch up with the single-threaded part before the
   second thread starts; a reader that took the threads' records in the
   order it reads them would see frees before their allocations. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#define BLOCKS 1000000
#define HANDED 200000
static int pipe_ends[2];
static void *kept_by_producer[HANDED / 1000];
static void *produce(void *arg) {
    (void)arg;
    for (long i = 0; i < HANDED; i++) {
        char *p = malloc(16 + i % 64);
        p[0] = (char)i;
        if (i % 1000 == 0)
            kept_by_producer[i / 1000] = p;
        else if (write(pipe_ends[1], &p, sizeof p) != sizeof p)
            abort();
    }
    close(pipe_ends[1]);
    return 0;
}
static void *consume(void *arg) {
    (void)arg;
    char *p;
    while (read(pipe_ends[0], &p, sizeof p) == sizeof p)
        free(p);
    return 0;
}
static void churn(void **kept) {
    for (long i = 0; i < BLOCKS; i++) {
        char *p = malloc(16 + i % 64);
        p[0] = (char)i;
        if (i % 1000 == 0)
            kept[i / 1000] = p;
        else
            free(p);
    }
}
int main(void) {
    static void *kept[BLOCKS / 1000];
    churn(kept);
    usleep(100000);
    if (pipe(pipe_ends) != 0)
        return 1;
    pthread_t a, b;
    pthread_create(&a, 0, produce, 0);
    pthread_create(&b, 0, consume, 0);
    for (long i = 0; i < BLOCKS / 1000; i++)
        free(kept[i]);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
