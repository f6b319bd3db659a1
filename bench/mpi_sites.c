/* The job of bench/ranks.sh: each rank allocates and frees BLOCKS blocks of
 * 1 to 64 KiB (argv[1], default 100000) at eight call sites, inside the
 * region "step", and keeps one 1 MiB block per site; then all ranks meet. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include "memlens.h"

#define SITE(n) static void *site##n(size_t len) { return malloc(len); }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void *(*const sites[8])(size_t) = {site0, site1, site2, site3, site4, site5, site6, site7};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long blocks = argc > 1 ? atol(argv[1]) : 100000;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *kept[8];
    long sum = 0;
    unsigned x = 12345u + (unsigned)rank;
    memlens_region_begin("step");
    for (long i = 0; i < blocks; i++) {
        x = x * 1103515245u + 12345u;
        char *p = sites[i % 8](1024 + (x >> 16) % (63 * 1024));
        p[0] = (char)i;
        sum += p[0];
        free(p);
    }
    for (int s = 0; s < 8; s++) {
        kept[s] = sites[s](1 << 20);
        memset(kept[s], rank, 1 << 20);
        sum += ((char *)kept[s])[s];
    }
    memlens_region_end("step");
    long total = 0;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int s = 0; s < 8; s++)
        free(kept[s]);
    MPI_Finalize();
    return total == 0;
}
