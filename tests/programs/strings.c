/* The C library's string routines on the program's own blocks: each region
 * calls one routine REPS times on data of known length, so the bytes it
 * reads and writes are known exactly (LEN-character strings); then SORTS
 * qsorts of LEN ints, whose element moves no counter sees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memlens.h"

#define LEN 1000
#define REPS 100
#define SORTS 10

static int ascending(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}
/* The pointer as the compiler cannot know it: every call is made. */
#define OPAQUE(p) ({ char *q_ = (p); __asm__ volatile("" : "+r"(q_)); q_; })

int main(void) {
    char *text = malloc(LEN + 1), *copy = malloc(LEN + 1), *other = malloc(LEN + 1);
    memset(text, 'a', LEN);
    text[LEN] = 0;
    memset(other, 'a', LEN);
    other[LEN] = 0;
    other[600] = 'b';
    size_t sink = 0;

    memlens_region_begin("strlen"); /* reads LEN + 1 per call */
    for (int i = 0; i < REPS; i++) sink += strlen(OPAQUE(text));
    memlens_region_end("strlen");

    memlens_region_begin("strcmp"); /* reads 601 of each string per call */
    for (int i = 0; i < REPS; i++) sink += strcmp(OPAQUE(text), other) < 0;
    memlens_region_end("strcmp");

    memlens_region_begin("strcpy"); /* reads and writes LEN + 1 per call */
    for (int i = 0; i < REPS; i++) sink += (size_t)strcpy(copy, text) & 1;
    memlens_region_end("strcpy");

    memlens_region_begin("memchr"); /* reads 601 per call: 'b' is at 600 */
    for (int i = 0; i < REPS; i++) sink += (size_t)memchr(OPAQUE(other), 'b', LEN) & 1;
    memlens_region_end("memchr");

    int *numbers = malloc(LEN * sizeof *numbers);
    for (int s = 0; s < SORTS; s++) {
        for (int i = 0; i < LEN; i++) numbers[i] = (i * 7919 + s) % LEN;
        qsort(numbers, LEN, sizeof *numbers, ascending);
    }
    sink += numbers[LEN / 2];
    free(numbers);

    printf("%zu %s\n", sink, copy + LEN - 3);
    free(text);
    free(copy);
    free(other);
    return 0;
}
