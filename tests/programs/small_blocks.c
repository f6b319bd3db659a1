/* A sparse-matrix-like code of small blocks, as real CG codes allocate:
 * 20 000 rows of 27 doubles (216 bytes each, one malloc per row), a vector
 * x of 20 000 doubles, and 50 sweeps y = A x, each sweep with one 1000-byte
 * scratch block. Then 100 000 short-lived 64-byte blocks nothing reads
 * twice. Truth: the rows are read 50 x 20 000 x 27 times (216 000 000
 * bytes), x as often; y written 50 x 20 000 times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 20000
#define WIDTH 27
#define SWEEPS 50

static void *volatile sink;

int main(void) {
    double **rows = malloc(ROWS * sizeof *rows);
    double *x = malloc(ROWS * sizeof *x), *y = malloc(ROWS * sizeof *y);
    for (int i = 0; i < ROWS; i++) {
        rows[i] = malloc(WIDTH * sizeof(double)); /* ROW */
        for (int j = 0; j < WIDTH; j++) rows[i][j] = 1.0 / (1 + i + j);
        x[i] = i % 7;
    }
    double total = 0;
    for (int s = 0; s < SWEEPS; s++) {
        char *scratch = malloc(1000); /* SCRATCH */
        memset(scratch, s, 1000);
        sink = scratch;
        for (int i = 0; i < ROWS; i++) {
            const double *r = rows[i];
            double sum = 0;
            for (int j = 0; j < WIDTH; j++) sum += r[j] * x[(i + j) % ROWS]; /* SWEEP */
            y[i] = sum;
        }
        total += y[s];
        free(scratch);
    }
    for (int k = 0; k < 100000; k++) {
        char *tmp = malloc(64); /* TEMPORARY */
        tmp[0] = (char)k;
        sink = tmp;
        free(tmp);
    }
    for (int i = 0; i < ROWS; i++) free(rows[i]);
    free(rows);
    free(x);
    free(y);
    printf("%.6f\n", total);
    return 0;
}
