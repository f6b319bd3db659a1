/* Four children in turn, each touching 1024 fresh pages and exiting at once
   (within one of memlens' intervals), each reaped by this parent; then the
   parent touches 1024 pages itself: 5120 first touches in five processes. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#define PAGES 1024
static int touch(void) {
    char *p = malloc(PAGES * 4096);
    for (long i = 0; i < PAGES; i++) p[i * 4096] = 1;
    int sum = 0;
    for (long i = 0; i < PAGES; i++) sum += p[i * 4096];
    free(p);
    return sum == PAGES ? 0 : 1;
}
int main(void) {
    for (int k = 0; k < 4; k++) {
        pid_t pid = fork();
        if (pid == 0) _exit(touch());
        int status;
        if (waitpid(pid, &status, 0) != pid || status != 0) return 1;
    }
    return touch();
}
