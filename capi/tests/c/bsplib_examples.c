/* The BSPlib paper's example programs, written fresh in BSPlib-era C and compiled with
 * MCBSP_COMPATIBILITY_MODE (int sizes, -1 for "empty"): reverse, put_array, bsp_sum,
 * all_gather_sparse_vec, and the sample-sort distribution. Each checks its result. */
#define MCBSP_COMPATIBILITY_MODE
#include <bsp.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int P = 4;

/* x on process i becomes the x of process p-1-i. */
static int reverse(int x) {
    bsp_push_reg(&x, sizeof(int));
    bsp_sync();
    bsp_put(bsp_nprocs() - bsp_pid() - 1, &x, &x, 0, sizeof(int));
    bsp_sync();
    bsp_pop_reg(&x);
    return x;
}

/* xs[xs[i]] := xs[i] over a block-distributed array of n ints. */
static void put_array(int *xs, int n) {
    int p = bsp_nprocs(), n_over_p = n / p;
    if (n % p != 0) bsp_abort("{put_array} n=%d not divisible by p=%d", n, p);
    bsp_push_reg(xs, n_over_p * (int)sizeof(int));
    bsp_sync();
    for (int i = 0; i < n_over_p; i++) {
        int dst_pid = xs[i] / n_over_p, dst_idx = xs[i] % n_over_p;
        bsp_put(dst_pid, &xs[i], xs, dst_idx * (int)sizeof(int), sizeof(int));
    }
    bsp_sync();
    bsp_pop_reg(xs);
}

/* Sum of all elements of all processes' arrays, on every process (uses bsp_hpget). */
static int bsp_sum(int *xs, int nelem) {
    int result = 0, p = bsp_nprocs();
    for (int j = 0; j < nelem; j++) result += xs[j];
    bsp_push_reg(&result, sizeof(int));
    bsp_sync();
    int *local_sums = calloc((size_t)p, sizeof(int));
    if (local_sums == NULL) bsp_abort("{bsp_sum} no memory for %d int", p);
    for (int i = 0; i < p; i++) bsp_hpget(i, &result, 0, &local_sums[i], sizeof(int));
    bsp_sync();
    result = 0;
    for (int i = 0; i < p; i++) result += local_sums[i];
    bsp_pop_reg(&result);
    free(local_sums);
    return result;
}

/* All nonzeros of a block-distributed vector, on every process, through BSMP. */
static int all_gather_sparse_vec(float *dense, int n_over_p, float **sparse_out, int **ivec_out) {
    int tag_size = sizeof(int), p = bsp_nprocs(), nonzeros, nonzeros_size, status;
    bsp_set_tagsize(&tag_size);
    bsp_sync();
    for (int i = 0; i < n_over_p; i++) {
        if (dense[i] != 0.0f) {
            int global_idx = n_over_p * bsp_pid() + i;
            for (int j = 0; j < p; j++) bsp_send(j, &global_idx, &dense[i], sizeof(float));
        }
    }
    bsp_sync();
    bsp_qsize(&nonzeros, &nonzeros_size);
    CHECK(nonzeros_size == nonzeros * (int)sizeof(float));
    float *sparse = calloc((size_t)nonzeros + 1, sizeof(float));
    int *ivec = calloc((size_t)nonzeros + 1, sizeof(int));
    if (sparse == NULL || ivec == NULL) bsp_abort("Unable to allocate memory");
    for (int i = 0; i < nonzeros; i++) {
        bsp_get_tag(&status, &ivec[i]);
        if (status != (int)sizeof(float)) bsp_abort("Should never get here");
        bsp_move(&sparse[i], sizeof(float));
    }
    bsp_get_tag(&status, NULL);
    CHECK(status == -1);
    bsp_set_tagsize(&tag_size);
    *sparse_out = sparse;
    *ivec_out = ivec;
    return nonzeros;
}

static int bucket(double x, const double *s, int nsplit) {
    int j = 0;
    while (j < nsplit && x >= s[j]) j++;
    return j;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void spmd(void) {
    bsp_begin(P);
    int p = bsp_nprocs(), s = bsp_pid();

    CHECK(reverse(100 + s) == 100 + p - 1 - s);

    /* put_array on a permutation: afterwards block s holds s*n/p .. (s+1)*n/p - 1 in order. */
    int n = 8 * p, b = n / p;
    int *xs = malloc((size_t)b * sizeof(int));
    for (int i = 0; i < b; i++) xs[i] = (int)(((long)(s * b + i) * 5 + 3) % n); /* gcd(5, n) = 1 */
    put_array(xs, n);
    for (int i = 0; i < b; i++) CHECK(xs[i] == s * b + i);
    free(xs);

    int mine[3] = {s, 2 * s, 1};
    CHECK(bsp_sum(mine, 3) == 3 * p * (p - 1) / 2 + p);

    float dense[5] = {0};
    dense[s % 5] = (float)(s + 1);
    float *sparse;
    int *ivec;
    int nz = all_gather_sparse_vec(dense, 5, &sparse, &ivec);
    CHECK(nz == p);
    float total = 0;
    for (int i = 0; i < nz; i++) {
        CHECK(ivec[i] == 5 * (int)(sparse[i] - 1) + ((int)sparse[i] - 1) % 5);
        total += sparse[i];
    }
    CHECK(total == (float)(p * (p + 1) / 2));
    free(sparse);
    free(ivec);
    bsp_sync(); /* the tag size restored by all_gather_sparse_vec takes effect */

    /* Sample sort distribution: splitters i/p of [0, 1); keys sent to their bucket's owner. */
    int a_size = 50;
    double *a = malloc((size_t)a_size * sizeof(double));
    unsigned seed = 12345u + (unsigned)s;
    for (int i = 0; i < a_size; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (double)(seed >> 8) / (double)(1u << 24);
    }
    double *splitters = malloc((size_t)p * sizeof(double));
    for (int i = 1; i < p; i++) splitters[i - 1] = (double)i / p;
    for (int i = 0; i < a_size; i++) {
        int j = bucket(a[i], splitters, p - 1);
        bsp_send(j, NULL, &a[i], sizeof(double));
    }
    bsp_sync();
    int b_size, dummy;
    bsp_qsize(&b_size, &dummy);
    double *bk = calloc((size_t)b_size + 1, sizeof(double));
    for (int i = 0; i < b_size; i++) bsp_move(&bk[i], sizeof(double));
    qsort(bk, (size_t)b_size, sizeof(double), cmp_double);
    for (int i = 0; i < b_size; i++) CHECK(bk[i] >= (double)s / p && bk[i] < (double)(s + 1) / p);
    /* Every key arrived somewhere: the bucket sizes add up to p * a_size. */
    int total_keys = bsp_sum(&b_size, 1);
    CHECK(total_keys == p * a_size);
    void *tp, *pp;
    CHECK(bsp_hpmove(&tp, &pp) == -1);
    free(a);
    free(splitters);
    free(bk);
    bsp_end();
}

int main(int argc, char **argv) {
    if (argc > 1) P = atoi(argv[1]);
    bsp_init(spmd, argc, argv);
    spmd();
    printf("BSPlib examples ok (p = %d)\n", P);
    return 0;
}
