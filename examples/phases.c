/* A program with phases of different memory needs: a big static table, a growing
 * then shrinking heap, a linked list of small nodes grouped into one object, an
 * mmap'd buffer, a tagged range, and a leak. `examples/run.sh` profiles it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "memlens.h"

static double lookup_table[1 << 20]; /* 8 MiB of static data */
static char *volatile kept;          /* keeps the leak from being optimised away */

struct node {
    struct node *next;
    long value;
};

static double *make_matrix(size_t n) {
    double *m = malloc(n * n * sizeof *m);
    for (size_t i = 0; i < n * n; i++) m[i] = (double)i;
    return m;
}

static struct node *build_list(long n) {
    struct node *head = NULL;
    memlens_group_begin("list nodes");
    for (long i = 0; i < n; i++) {
        struct node *e = malloc(sizeof *e);
        e->value = i;
        e->next = head;
        head = e;
    }
    memlens_group_end();
    return head;
}

int main(void) {
    memlens_region_begin("init");
    for (size_t i = 0; i < sizeof lookup_table / sizeof *lookup_table; i++) lookup_table[i] = i * 0.5;
    double *a = make_matrix(1024); /* 8 MiB */
    double *b = make_matrix(2048); /* 32 MiB */
    memlens_region_end("init");

    memlens_region_begin("list");
    struct node *list = build_list(400000);
    long sum = 0;
    for (struct node *e = list; e; e = e->next) sum += e->value;
    memlens_region_end("list");

    memlens_region_begin("mapped");
    size_t len = 64 << 20;
    char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memlens_tag("staging buffer", buf, len);
    memset(buf, 1, len);
    munmap(buf, len);
    memlens_region_end("mapped");

    memlens_region_begin("teardown");
    free(b);
    while (list) {
        struct node *next = list->next;
        free(list);
        list = next;
    }
    kept = malloc(1 << 20); /* never freed: a leak */
    memset(kept, 0, 1 << 20);
    memlens_region_end("teardown");
    printf("sum=%ld a[7]=%.1f table[3]=%.1f\n", sum, a[7], lookup_table[3]);
    free(a);
    return 0;
}
