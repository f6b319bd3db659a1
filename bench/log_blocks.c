/* What a log block costs the thread that writes it, the two ways the runtime
 * could: 8 MiB of 48-byte records written through a MAP_SHARED mapping of a
 * fresh 64 KiB block of a file (mmap, madvise(MADV_POPULATE_WRITE), writes,
 * munmap: the runtime before its staging block), or into one block reused
 * and copied to the file with pwrite when full (the staging block). The file
 * is written with zeros first, as the collector makes blocks ready.
 * Usage: gcc -O2 bench/log_blocks.c -o log_blocks && ./log_blocks DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { BLOCK = 64 << 10, TOTAL = 8 << 20, RECORD = 48, POPULATE_WRITE = 23 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void fill(char *block) {
    for (size_t at = 0; at + RECORD <= BLOCK; at += RECORD) memset(block + at, 1, RECORD);
}

int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/log_blocks.dat", argc > 1 ? argv[1] : ".");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror(path), 1;
    char *zeros = calloc(1, TOTAL), *staging = malloc(BLOCK);
    for (int round = 0; round < 3; round++) {
        if (pwrite(fd, zeros, TOTAL, 0) != TOTAL) return perror("pwrite"), 1;
        double t0 = now_us();
        for (off_t off = 0; off < TOTAL; off += BLOCK) {
            char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
            if (p == MAP_FAILED) return perror("mmap"), 1;
            madvise(p, BLOCK, POPULATE_WRITE);
            fill(p);
            munmap(p, BLOCK);
        }
        double t1 = now_us();
        if (pwrite(fd, zeros, TOTAL, 0) != TOTAL) return perror("pwrite"), 1;
        double t2 = now_us();
        for (off_t off = 0; off < TOTAL; off += BLOCK) {
            fill(staging);
            if (pwrite(fd, staging, BLOCK, off) != BLOCK) return perror("pwrite"), 1;
        }
        double t3 = now_us();
        printf("us per 64 KiB block: mapped %.1f, staged and copied %.1f\n",
               (t1 - t0) / (TOTAL / BLOCK), (t3 - t2) / (TOTAL / BLOCK));
    }
    unlink(path);
    return 0;
}
