/* `fork_samples`: COPIES bulk copies first (memcpy, sampled by the runtime's
 * wrapper: samples before any instrumented access), then instrumented loops
 * in a thread, in the main thread, in a forked child, and in the image that
 * child execs (`fork_samples exec`): access samples from four threads of three
 * process images, two of one pid. The parent does not wait: the child
 * outlives it by a few of memlens' ticks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N (1L << 18)
#define COPIES 400
static double mine[N], theirs[N];

static double sweep(double *a, int rounds) {
    double s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < N; i++) {
            a[i] += r;
            s += a[i];
        }
    return s;
}

static void *worker(void *arg) {
    (void)arg;
    static double s;
    s = sweep(theirs, 8);
    return &s;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        double s = sweep(mine, 6);
        usleep(50000);
        printf("exec'd %g\n", s);
        return 0;
    }
    for (int k = 0; k < COPIES; k++) {
        if (k % 2)
            memcpy(mine, theirs, sizeof mine);
        else
            memcpy(theirs, mine, sizeof mine);
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    double s = sweep(mine, 8);
    void *theirs_sum;
    pthread_join(t, &theirs_sum);
    printf("%g %g\n", s, *(double *)theirs_sum);
    fflush(stdout);
    if (fork() == 0) {
        sweep(mine, 4);
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(127);
    }
    return 0;
}
