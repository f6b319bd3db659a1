/* What a program receives from whoever starts it, and what it may do with its
 * threads, must be the same under memlens (argv[1] picks the case):
 *   state    prints the blocked and ignored signals and which of fds 0-2 are open
 *   sigchld  waits in pause() for its child's SIGCHLD (an alarm ends a wait
 *            that never wakes)
 *   cancel   threads with a cancel request pending allocate and free, then
 *            reach a cancellation point: every allocation must be done first
 *   async    a thread cancelled asynchronously while it computes */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int state(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "SigBlk:", 7) || !strncmp(line, "SigIgn:", 7)) fputs(line, stdout);
    if (f) fclose(f);
    for (int fd = 0; fd < 3; fd++) printf("fd %d %s\n", fd, fcntl(fd, F_GETFD) < 0 ? "closed" : "open");
    return 0;
}

static volatile sig_atomic_t child_ended;
static void on_child(int sig) { (void)sig; child_ended = 1; }

static int sigchld(void) {
    signal(SIGCHLD, on_child);
    alarm(5);
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    while (!child_ended) pause();
    waitpid(pid, NULL, 0);
    printf("woke on SIGCHLD\n");
    return 0;
}

#define THREADS 8
#define ROUNDS 20000
static long done[THREADS];
static void *volatile sink;

static void *allocate_with_cancel_pending(void *arg) {
    long id = (long)arg;
    pthread_cancel(pthread_self()); /* deferred: acts at the next cancellation point */
    for (int i = 0; i < ROUNDS; i++) {
        char *p = malloc(100000 + i % 64); /* large: every one is recorded */
        p[0] = 1;
        sink = p;
        free(p);
        done[id]++;
    }
    pthread_testcancel();
    return NULL;
}

static int cancel(void) {
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, allocate_with_cancel_pending, (void *)i);
    int cancelled = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        cancelled += r == PTHREAD_CANCELED;
    }
    long total = 0;
    for (int i = 0; i < THREADS; i++) total += done[i];
    printf("%d threads cancelled after %ld of %d allocations\n", cancelled, total, THREADS * ROUNDS);
    return 0;
}

static volatile long spins;
static void *compute(void *arg) {
    (void)arg;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    for (;;) spins++;
    return NULL;
}

static int async(void) {
    pthread_t t;
    pthread_create(&t, NULL, compute, NULL);
    while (spins < 1000000) sched_yield();
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    printf("cancelled %d\n", r == PTHREAD_CANCELED);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "state")) return state();
    if (!strcmp(argv[1], "sigchld")) return sigchld();
    if (!strcmp(argv[1], "cancel")) return cancel();
    if (!strcmp(argv[1], "async")) return async();
    return 2;
}
