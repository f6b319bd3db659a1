/* Each MPI rank allocates a block whose size names the rank: (rank + 1) MiB. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t len = (size_t)(rank + 1) << 20;
    char *block = malloc(len);
    memset(block, rank, len);
    long local = block[len - 1], total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("sum of ranks %ld\n", total);
    free(block);
    MPI_Finalize();
    return 0;
}
