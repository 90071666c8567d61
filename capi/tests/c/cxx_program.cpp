// mcbsp::BSP_program (bsp.hpp) beyond hello world. argv[1]:
//   threads  a run of 3 processes with per-process objects (newInstance, destroyInstance
//            counted), puts between them, and a nested program begun by every process at once
//   P        one begin(P) (P from the command line: over MPI ranks, main's part before
//            begin runs on every rank, since begin is where bsp_init is), the sum of the
//            processes' values printed by pid 0
#include <bsp.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check.h"

static std::atomic<int> made(0), destroyed(0), inner_made(0), inner_destroyed(0);

// A nested program of 2 processes: process 1 puts its value to process 0.
class Inner : public mcbsp::BSP_program {
    long value;

  public:
    long got;
    explicit Inner(long v) : value(v), got(-1) {}

  protected:
    void spmd() {
        got = -1;
        bsp_push_reg(&got, sizeof got);
        bsp_sync();
        if (bsp_pid() == 1) bsp_put(0, &value, &got, 0, sizeof value);
        bsp_sync();
        bsp_pop_reg(&got);
    }
    BSP_program *newInstance() {
        inner_made++;
        return new Inner(value);
    }
    void destroyInstance(BSP_program *const instance) {
        inner_destroyed++;
        delete instance;
    }
};

class Gather : public mcbsp::BSP_program {
    bool nested;
    std::vector<long> all; // per process: each has its own object

  public:
    long sum;
    explicit Gather(bool n) : nested(n), sum(0) {}

  protected:
    void spmd() {
        const long p = bsp_nprocs(), s = bsp_pid();
        long mine = 10 * s + 1;
        all.assign(p, -1);
        bsp_push_reg(all.data(), p * sizeof(long));
        bsp_sync();
        for (long q = 0; q < p; q++) bsp_put(q, &mine, all.data(), s * sizeof(long), sizeof(long));
        bsp_sync();
        sum = 0;
        for (long q = 0; q < p; q++) {
            CHECK(all[q] == 10 * q + 1);
            sum += all[q];
        }
        bsp_pop_reg(all.data());
        if (nested) {
            // Every process begins its own nested program at the same time: each run's
            // processes must find their own program object.
            Inner inner(100 + s);
            inner.begin(2);
            CHECK(inner.got == 100 + s);
        }
        if (s == 0) std::printf("gather p=%ld sum=%ld\n", p, sum);
    }
    BSP_program *newInstance() {
        made++;
        return new Gather(nested);
    }
    void destroyInstance(BSP_program *const instance) {
        destroyed++;
        delete instance;
    }
};

int main(int argc, char **argv) {
    CHECK(argc == 2);
    if (!std::strcmp(argv[1], "threads")) {
        Gather g(true);
        g.begin(3);
        CHECK(g.sum == 1 + 11 + 21);
        CHECK(made == 2 && destroyed == 2);
        CHECK(inner_made == 3 && inner_destroyed == 3);
        std::printf("c++ program ok\n");
        return 0;
    }
    const long P = std::atol(argv[1]);
    CHECK(P >= 1);
    Gather g(false);
    g.begin(P);
    std::printf("main goes on\n");
    return 0;
}
