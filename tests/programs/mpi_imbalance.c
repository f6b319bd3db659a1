/* An imbalanced MPI job: rank r holds (r + 1) x 16 MiB at one allocation site
 * and works (r + 1) x 50 ms in the region "solve" before all meet in an
 * allreduce. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "memlens.h"

static void busy_ms(long ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t len = (size_t)(rank + 1) << 24;
    char *field = malloc(len); /* FIELD */
    memset(field, 1, len);
    memlens_region_begin("solve");
    busy_ms(50 * (rank + 1));
    memlens_region_end("solve");
    /* The field is read, so the compiler keeps it. */
    long local = field[len - 1], total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    free(field);
    MPI_Finalize();
    return 0;
}
