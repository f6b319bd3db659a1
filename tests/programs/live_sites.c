// Three phases `memlens record --live` must follow as they happen, each
// announced on stderr once its memory is in place ("PHASE x") and before it
// changes ("END x"):
//   one:   24 MiB in six 4 MiB blocks from site_one;
//   two:   site_one's freed, 40 MiB from site_two, and a forked child holding
//          16 MiB from child_site until shortly before phase three;
//   three: site_two's freed, 10 MiB in 40960 blocks of 256 bytes from
//          small_blocks, below the exact-size threshold: only byte-sampled.
// `live_sites DIR` holds each phase until the file DIR/PHASE exists (a test
// creates it once it has seen enough updates); `live_sites` holds 1.5 s.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1 << 20)
#define HOLD_US 1500000

static void say(const char *what) { write(2, what, strlen(what)); }

static const char *go_dir;

static void hold(const char *phase) {
    if (!go_dir) {
        usleep(HOLD_US);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", go_dir, phase);
    while (access(path, F_OK) != 0)
        usleep(10000);
}

__attribute__((noinline)) static void *site_one(void) { return memset(malloc(4 * MIB), 1, 4 * MIB); }
__attribute__((noinline)) static void *site_two(void) { return memset(malloc(4 * MIB), 2, 4 * MIB); }
__attribute__((noinline)) static void *child_site(void) { return memset(malloc(4 * MIB), 3, 4 * MIB); }
__attribute__((noinline)) static void *small_blocks(void) { return memset(malloc(256), 4, 256); }

int main(int argc, char **argv) {
    go_dir = argc > 1 ? argv[1] : NULL;
    static void *one[6], *two[10], *small[40960];
    for (int i = 0; i < 6; i++) one[i] = site_one();
    say("PHASE one\n");
    hold("one");
    say("END one\n");

    for (int i = 0; i < 6; i++) free(one[i]);
    for (int i = 0; i < 10; i++) two[i] = site_two();
    int ready[2];
    if (pipe(ready) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
        void *mine[4];
        for (int i = 0; i < 4; i++) mine[i] = child_site();
        write(ready[1], "x", 1);
        hold("two");
        for (int i = 0; i < 4; i++) free(mine[i]);
        _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) return 1;
    say("PHASE two\n");
    hold("two");
    say("END two\n");
    waitpid(child, NULL, 0);

    for (int i = 0; i < 10; i++) free(two[i]);
    for (int i = 0; i < 40960; i++) small[i] = small_blocks();
    say("PHASE three\n");
    hold("three");
    say("END three\n");
    for (int i = 0; i < 40960; i++) free(small[i]);
    return 0;
}
