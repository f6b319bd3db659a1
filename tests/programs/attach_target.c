/* A process memlens attaches to while it runs. It prints "ready", then waits
 * for a line on stdin: "go" maps 64 MiB and has a thread it starts now touch
 * every page once, fills a 1 MiB static table, keeps the mapping 250 ms
 * (memlens looks at /proc/PID/maps every 100 ms and misses a mapping made and
 * removed between two looks: a clean-clone CI run did), unmaps the 64 MiB and
 * exits with status 3; "wait" waits until stdin closes and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAPPED (64L << 20)

static char table[1 << 20];

static void *toucher(void *p) {
    char *mem = p;
    for (long i = 0; i < MAPPED; i += 4096)
        mem[i] = 1; /* TOUCH */
    return NULL;
}

int main(void) {
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return 1;
    if (strncmp(line, "wait", 4) == 0) {
        while (fgets(line, sizeof line, stdin))
            ;
        return 0;
    }
    char *mem = mmap(NULL, MAPPED, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 1;
    madvise(mem, MAPPED, MADV_NOHUGEPAGE); /* one fault per 4 KiB page */
    pthread_t t;
    pthread_create(&t, NULL, toucher, mem);
    pthread_join(t, NULL);
    memset(table, 2, sizeof table);
    usleep(250000);
    munmap(mem, MAPPED);
    printf("done %d\n", table[12345]);
    return 3;
}
