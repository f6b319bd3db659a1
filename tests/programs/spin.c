/* Burns CPU in two threads for a fixed amount of work, then prints its own CPU
   time (getrusage, user + system, in ns) so a test can compare counters with it. */
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
static volatile unsigned long sink;
static void *burn(void *arg) {
    unsigned long x = (unsigned long)arg;
    for (unsigned long i = 0; i < 150000000UL; i++) x = x * 6364136223846793005UL + 1;
    sink = x;
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, burn, (void *)1);
    burn((void *)2);
    pthread_join(t, 0);
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    long long ns = (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000000LL +
                   (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000LL;
    printf("%lld\n", ns);
    return 0;
}
