/* How long two CPUs take to hand a cache line back and forth: the floor of every sync between
 * two processes, which on a virtual machine moves when the hypervisor moves the virtual CPUs.
 *
 * The method of mbsp_tools::line_exchange (tools/src/line_exchange.rs), in C so that
 * scripts/bench-mcbsp can probe the machine between its C programs without building the Rust
 * tools: two threads, one writes a number into its cache line, the other answers with the
 * same number in its own; the fastest mean of eight batches of 256 round trips is printed in
 * nanoseconds. The threads are bound to the first two CPUs the process may use, the same pair
 * at every probe (the Rust probe picks two cores of one package with hwloc; without hwloc this
 * one takes the first two, which on one machine are always the same two). Exit status 1 when
 * fewer than two CPUs are allowed, or the partner did not start within 100 ms, or the two threads
 * did not complete a batch within 20 ms of it (a busy machine). No BSPlib call. Usage: lineprobe
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define TRIPS 256
#define BATCHES 8
#define DEADLINE_S 0.02
/* An idle virtual CPU a thread is bound to can take milliseconds to run it. */
#define STARTUP_S 0.1
#define STOP UINT64_MAX
/* In pong until the partner runs on its CPU. */
#define NOT_READY UINT64_MAX

/* Two lines apart, against adjacent-line prefetching. */
static _Alignas(128) _Atomic uint64_t ping;
static _Alignas(128) _Atomic uint64_t pong = NOT_READY;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The CPUs of the two threads: the first two the process may use. */
static int cpu[2] = {-1, -1};

static void bind_to(int c) {
    if (c < 0) {
        return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    /* Refused (a container may deny it): the probe runs unbound. */
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *unused) {
    (void)unused;
    bind_to(cpu[1]);
    uint64_t seen = 0;
    atomic_store_explicit(&pong, seen, memory_order_release);
    for (;;) {
        const uint64_t v = atomic_load_explicit(&ping, memory_order_acquire);
        if (v == STOP) {
            return NULL;
        }
        if (v != seen) {
            seen = v;
            atomic_store_explicit(&pong, v, memory_order_release);
        }
    }
}

int main(void) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        if (CPU_COUNT(&allowed) < 2) {
            fprintf(stderr, "lineprobe: this process may use one CPU only\n");
            return 1;
        }
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++) {
            if (CPU_ISSET(c, &allowed)) {
                cpu[k++] = c;
            }
        }
    }
    bind_to(cpu[0]);
    pthread_t partner;
    if (pthread_create(&partner, NULL, answer, NULL) != 0) {
        fprintf(stderr, "lineprobe: cannot start a thread\n");
        return 1;
    }
    double start = now();
    while (atomic_load_explicit(&pong, memory_order_acquire) == NOT_READY &&
           now() - start < STARTUP_S) {
        sched_yield();
    }
    start = now();
    double best = -1.0;
    uint64_t n = 0;
    int late = 0;
    for (int b = 0; b < BATCHES && !late; b++) {
        const double t = now();
        for (int i = 0; i < TRIPS && !late; i++) {
            n++;
            atomic_store_explicit(&ping, n, memory_order_release);
            for (unsigned spins = 1; atomic_load_explicit(&pong, memory_order_acquire) != n;
                 spins++) {
                if (spins % 1024 == 0 && now() - start > DEADLINE_S) {
                    late = 1;
                    break;
                }
            }
        }
        if (!late) {
            const double ns = (now() - t) * 1e9 / TRIPS;
            if (best < 0 || ns < best) {
                best = ns;
            }
        }
        late = late || now() - start > DEADLINE_S;
    }
    atomic_store_explicit(&ping, STOP, memory_order_release);
    pthread_join(partner, NULL);
    if (best < 0) {
        fprintf(stderr, "lineprobe: the two threads did not run at once (100 ms to start, then "
                        "20 ms)\n");
        return 1;
    }
    printf("line round trip: %.1f ns\n", best);
    return 0;
}
