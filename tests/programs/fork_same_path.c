/* One call path allocates before and after a fork, the fork inside the loop:
 * the child's first blocks come from the very stack its parent walked last.
 * The runtime remembers recent walks; the child writes a log of its own, in
 * which that stack must be defined again. The child leaks 4 blocks of 300
 * bytes through `grab`; the parent frees all of its own. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void *grab(size_t n) {
    return malloc(n);
}

int main(void) {
    int child = 0;
    for (int i = 0; i < 8; i++) {
        if (i == 4)
            child = fork() == 0;
        void *p = grab(300);
        if (child)
            sink = p;
        else
            free(p);
    }
    if (!child)
        wait(NULL);
    return 0;
}
