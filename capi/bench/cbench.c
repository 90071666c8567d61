/* C-ABI benchmark: empty-sync latency and bulk put throughput through bsp.h, next to the same
 * loops through the Rust API (mbsp_bench_rust_*, in the same library), measured in one run.
 * Run with scripts/bench-capi. */
#include <bsp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double mbsp_bench_rust_sync(unsigned p, size_t iters);
double mbsp_bench_rust_put(unsigned p, size_t bytes, size_t iters);

static unsigned P;
static size_t ITERS, BYTES, PUT_ITERS;
static double c_sync_ns, c_put_gbs;

static void spmd_sync(void) {
    bsp_begin(P);
    bsp_sync();
    double t0 = bsp_time();
    for (size_t i = 0; i < ITERS; i++) bsp_sync();
    double t = bsp_time() - t0;
    if (bsp_pid() == 0) c_sync_ns = t * 1e9 / (double)ITERS;
    bsp_end();
}

static void spmd_put(void) {
    bsp_begin(P);
    char *dst = calloc(BYTES, 1), *src = malloc(BYTES);
    memset(src, 1, BYTES);
    bsp_push_reg(dst, BYTES);
    bsp_sync();
    unsigned right = (bsp_pid() + 1) % bsp_nprocs();
    bsp_put(right, src, dst, 0, BYTES);
    bsp_sync();
    double t0 = bsp_time();
    for (size_t i = 0; i < PUT_ITERS; i++) {
        bsp_put(right, src, dst, 0, BYTES);
        bsp_sync();
    }
    double t = bsp_time() - t0;
    if (bsp_pid() == 0) c_put_gbs = (double)BYTES * (double)PUT_ITERS / t / 1e9;
    bsp_pop_reg(dst);
    bsp_sync();
    free(dst);
    free(src);
    bsp_end();
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int samples = argc > 1 ? atoi(argv[1]) : 7;
    ITERS = 100000;
    BYTES = (size_t)16 << 20;
    PUT_ITERS = 20;
    printf("C ABI vs Rust API, %d samples each, interleaved; medians [min-max]\n\n", samples);
    unsigned ps[2] = {1, 2};
    for (int k = 0; k < 2; k++) {
        P = ps[k];
        double cs[64], rs[64], cp[64], rp[64];
        for (int i = 0; i < samples && i < 64; i++) {
            bsp_init(spmd_sync, argc, argv);
            spmd_sync();
            cs[i] = c_sync_ns;
            rs[i] = mbsp_bench_rust_sync(P, ITERS);
            bsp_init(spmd_put, argc, argv);
            spmd_put();
            cp[i] = c_put_gbs;
            rp[i] = mbsp_bench_rust_put(P, BYTES, PUT_ITERS);
        }
        qsort(cs, (size_t)samples, sizeof(double), cmp);
        qsort(rs, (size_t)samples, sizeof(double), cmp);
        qsort(cp, (size_t)samples, sizeof(double), cmp);
        qsort(rp, (size_t)samples, sizeof(double), cmp);
        int m = samples / 2, l = samples - 1;
        printf("p = %u\n", P);
        printf("  empty sync      C ABI %7.1f ns [%.1f-%.1f]   Rust %7.1f ns [%.1f-%.1f]   C/Rust %.3f\n",
               cs[m], cs[0], cs[l], rs[m], rs[0], rs[l], cs[m] / rs[m]);
        printf("  16 MiB put+sync C ABI %7.2f GB/s [%.2f-%.2f] Rust %7.2f GB/s [%.2f-%.2f] Rust/C %.3f\n",
               cp[m], cp[0], cp[l], rp[m], rp[0], rp[l], rp[m] / cp[m]);
    }
    printf("\n(C/Rust time ratio > 1, or Rust/C rate ratio > 1, is overhead of the ABI layer; target < 1.10)\n");
    return 0;
}
