/* A program of BSPedupack's shape: main's sequential part asks for P and n on stdin, then
 * spmd begins P processes and pid 0 hands n to the others with puts. Over MPI ranks only rank 0
 * runs that sequential part (the others go from bsp_init straight into spmd, where bsp_begin
 * takes rank 0's P), so this is what the BSPlib convention must get right. It computes
 *   - the inner product of x = (1, 2, ..., n) with itself, x distributed cyclically, checked
 *     against n(n+1)(2n+1)/6;
 *   - a sample sort of n keys made from their global index (so independent of P): regular
 *     samples put to pid 0, splitters put back to all, each process's keys sent to their
 *     bucket's process (bsp_send, one message per destination), local sort; pid 0 checks the
 *     order across processes, the count and a checksum against the keys computed alone.
 * Only pid 0 prints the results; main prints "main goes on" after the SPMD section. */
#include <bsp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "check.h"

static long P; /* asked for in main: rank 0's is the one that counts */
static long N;

static uint64_t key_of(long i) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Elements of a length-n vector that process s of p owns in the cyclic distribution. */
static long nloc(long p, long s, long n) { return (n + p - s - 1) / p; }

static void *alloc(size_t count, size_t size) {
    void *m = calloc(count == 0 ? 1 : count, size);
    CHECK(m != NULL);
    return m;
}

static void inner_product(long p, long s, long n) {
    long nl = nloc(p, s, n);
    double *x = alloc((size_t)nl, sizeof(double));
    for (long i = 0; i < nl; i++) x[i] = (double)(i * p + s + 1);
    double *partial = alloc((size_t)p, sizeof(double));
    bsp_push_reg(partial, (size_t)p * sizeof(double));
    bsp_sync();
    double mine = 0.0;
    for (long i = 0; i < nl; i++) mine += x[i] * x[i];
    for (long t = 0; t < p; t++) bsp_put((bsp_pid_t)t, &mine, partial, (size_t)s * sizeof(double), sizeof(double));
    bsp_sync();
    double sum = 0.0;
    for (long t = 0; t < p; t++) sum += partial[t];
    long long exact = (long long)n * (n + 1) * (2 * n + 1) / 6;
    CHECK(sum == (double)exact); /* exact in doubles while the sum is below 2^53 */
    if (s == 0) printf("inprod p=%ld n=%ld: %.0f = n(n+1)(2n+1)/6\n", p, n, sum);
    bsp_pop_reg(partial);
    free(partial);
    free(x);
}

static void sample_sort(long p, long s, long n) {
    long nl = nloc(p, s, n);
    uint64_t *keys = alloc((size_t)nl, sizeof(uint64_t));
    for (long i = 0; i < nl; i++) keys[i] = key_of(i * p + s);
    qsort(keys, (size_t)nl, sizeof(uint64_t), cmp_u64);

    /* p regular samples of each process to pid 0; it picks p - 1 splitters and puts them to all. */
    uint64_t *samples = alloc((size_t)(p * p), sizeof(uint64_t));
    uint64_t *splitters = alloc((size_t)p, sizeof(uint64_t));
    bsp_push_reg(samples, (size_t)(p * p) * sizeof(uint64_t));
    bsp_push_reg(splitters, (size_t)p * sizeof(uint64_t));
    bsp_sync();
    for (long j = 0; j < p; j++) {
        uint64_t v = nl > 0 ? keys[j * nl / p] : UINT64_MAX;
        bsp_put(0, &v, samples, (size_t)(s * p + j) * sizeof(uint64_t), sizeof(uint64_t));
    }
    bsp_sync();
    if (s == 0) {
        qsort(samples, (size_t)(p * p), sizeof(uint64_t), cmp_u64);
        for (long q = 1; q < p; q++) splitters[q - 1] = samples[q * p];
        for (long t = 0; t < p; t++) bsp_put((bsp_pid_t)t, splitters, splitters, 0, (size_t)(p - 1) * sizeof(uint64_t));
    }
    bsp_sync();

    /* Keys below splitters[0] go to pid 0, ..., at least splitters[p - 2] to pid p - 1: a
     * contiguous run of the sorted keys per destination, sent as one message. */
    long start = 0;
    for (long dest = 0; dest < p; dest++) {
        long end = start;
        while (end < nl && (dest == p - 1 || keys[end] < splitters[dest])) end++;
        if (end > start) bsp_send((bsp_pid_t)dest, NULL, keys + start, (size_t)(end - start) * sizeof(uint64_t));
        start = end;
    }
    CHECK(start == nl);
    bsp_sync();

    bsp_nprocs_t packets;
    bsp_size_t bytes;
    bsp_qsize(&packets, &bytes);
    long mine = (long)(bytes / sizeof(uint64_t));
    uint64_t *bucket = alloc((size_t)mine, sizeof(uint64_t));
    size_t at = 0;
    for (bsp_nprocs_t m = 0; m < packets; m++) {
        bsp_size_t len;
        bsp_get_tag(&len, NULL);
        bsp_move((char *)bucket + at, len);
        at += len;
    }
    CHECK(at == bytes);
    qsort(bucket, (size_t)mine, sizeof(uint64_t), cmp_u64);

    /* Per process: count, smallest, largest, sum (mod 2^64), all to pid 0. */
    uint64_t *info = alloc((size_t)(4 * p), sizeof(uint64_t));
    bsp_push_reg(info, (size_t)(4 * p) * sizeof(uint64_t));
    bsp_sync();
    uint64_t mi[4] = {(uint64_t)mine, mine > 0 ? bucket[0] : UINT64_MAX, mine > 0 ? bucket[mine - 1] : 0, 0};
    for (long i = 0; i < mine; i++) mi[3] += bucket[i];
    bsp_put(0, mi, info, (size_t)(4 * s) * sizeof(uint64_t), sizeof mi);
    bsp_sync();
    if (s == 0) {
        uint64_t count = 0, sum = 0, expect = 0, last = 0;
        int any = 0;
        for (long t = 0; t < p; t++) {
            count += info[4 * t];
            sum += info[4 * t + 3];
            if (info[4 * t] == 0) continue;
            CHECK(!any || last <= info[4 * t + 1]); /* every key of t at least those before */
            last = info[4 * t + 2];
            any = 1;
        }
        for (long i = 0; i < n; i++) expect += key_of(i);
        CHECK(count == (uint64_t)n);
        CHECK(sum == expect);
        printf("sort p=%ld n=%ld: ok, checksum %016llx\n", p, n, (unsigned long long)sum);
    }
    bsp_pop_reg(info);
    bsp_pop_reg(splitters);
    bsp_pop_reg(samples);
    free(info);
    free(bucket);
    free(splitters);
    free(samples);
    free(keys);
}

static void spmd(void) {
    bsp_begin((bsp_pid_t)P);
    long p = (long)bsp_nprocs();
    long s = (long)bsp_pid();
    long n = 0;
    bsp_push_reg(&n, sizeof n);
    bsp_sync();
    if (s == 0) {
        for (long t = 0; t < p; t++) bsp_put((bsp_pid_t)t, &N, &n, 0, sizeof n);
    }
    bsp_sync();
    bsp_pop_reg(&n);
    inner_product(p, s, n);
    sample_sort(p, s, n);
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(spmd, argc, argv);
    /* Sequential part: process 0's alone. */
    printf("How many processes do you want to use?\n");
    fflush(stdout);
    CHECK(scanf("%ld", &P) == 1);
    printf("Please enter n:\n");
    fflush(stdout);
    CHECK(scanf("%ld", &N) == 1);
    CHECK(P >= 1 && N >= 0);
    spmd();
    printf("main goes on\n");
    return 0;
}
