// The header compiles as C++ (extern "C") and the library runs C++ SPMD code.
#include <mcbsp.h>
#include <vector>
#include <numeric>
#include <cstdio>

static std::vector<int> gathered;

static void spmd() {
    bsp_begin(3);
    int mine = static_cast<int>(bsp_pid()) * 2;
    std::vector<int> all(bsp_nprocs(), -1);
    bsp_push_reg(all.data(), all.size() * sizeof(int));
    bsp_sync();
    for (unsigned q = 0; q < bsp_nprocs(); q++) bsp_put(q, &mine, all.data(), bsp_pid() * sizeof(int), sizeof(int));
    bsp_sync();
    if (bsp_pid() == 0) gathered = all;
    bsp_pop_reg(all.data());
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(spmd, argc, argv);
    spmd();
    if (std::accumulate(gathered.begin(), gathered.end(), 0) != 6) return 3;
    std::printf("c++ ok\n");
    return 0;
}
