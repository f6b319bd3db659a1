/* An imbalanced MPI job: rank r holds (r + 1) x 16 MiB at one allocation site
 * and spends (r + 1) x 50 ms in the region "solve" before all meet in an
 * allreduce. Each rank prints its own measure of its time in "solve" ("rank R
 * solve NS"), the truth a profiler's region times are checked against. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "memlens.h"

/* The ranks sleep rather than spin: four spinning ranks on a two-core machine
 * overshoot their deadline by whatever time slice another rank holds then. */
static void work_ms(long ms) {
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000;
    if (end.tv_nsec >= 1000000000) {
        end.tv_sec += 1;
        end.tv_nsec -= 1000000000;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL))
        ;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t len = (size_t)(rank + 1) << 24;
    char *field = malloc(len); /* FIELD */
    memset(field, 1, len);
    struct timespec begin, end;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    memlens_region_begin("solve");
    work_ms(50 * (rank + 1));
    memlens_region_end("solve");
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("rank %d solve %lld\n", rank,
           (long long)(end.tv_sec - begin.tv_sec) * 1000000000LL + (end.tv_nsec - begin.tv_nsec));
    /* The field is read, so the compiler keeps it. */
    long local = field[len - 1], total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    free(field);
    MPI_Finalize();
    return 0;
}
