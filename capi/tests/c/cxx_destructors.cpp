// C++ objects of the SPMD function are destroyed on every process: processes other than 0
// leave at bsp_end by an exception that the library catches, so destructors run (as with
// MulticoreBSP's pthread_exit). argv[1] picks the style:
//   spmd   bsp_init(spmd) + spmd(), bsp_begin/bsp_end
//   mcbsp  the same with mcbsp_init, mcbsp_begin, mcbsp_end
//   main   bsp_begin/bsp_end bracketing main (linked with -rdynamic)
//   mixed  C++ SPMD code whose bsp_end is called from C (mixed_end.c): leaves by longjmp
//   c_begin  a C SPMD function (mixed_end.c) whose bsp_end is called from C++: longjmp too
#include <mcbsp.h>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" void mixed_end(void); // mixed_end.c: calls bsp_end from C
extern "C" void c_spmd(void);    // mixed_end.c: C SPMD function calling cxx_end
extern "C" void cxx_end(void);
extern "C" int c_after_end;
void cxx_end(void) {
    bsp_end();
}

static const unsigned P = 4;
static std::atomic<unsigned> destroyed(0);
static std::atomic<unsigned> constructed(0);
static const char *style = "";

struct Tracked {
    std::vector<int> data;
    Tracked() : data(1000, 1) { constructed++; }
    ~Tracked() { destroyed++; }
};

static void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "CHECK FAILED: %s (constructed %u, destroyed %u)\n", what,
                     constructed.load(), destroyed.load());
        std::fflush(stderr);
        std::_Exit(3);
    }
}

static void spmd() {
    if (!std::strcmp(style, "mcbsp")) {
        mcbsp_begin(P);
    } else {
        bsp_begin(P);
    }
    Tracked mine;
    std::string name = "process " + std::to_string(bsp_pid());
    bsp_sync();
    if (!std::strcmp(style, "mixed")) {
        mixed_end();
    } else if (!std::strcmp(style, "mcbsp")) {
        mcbsp_end();
    } else {
        bsp_end();
    }
    // Only pid 0 gets here: the others' objects are destroyed (except with a C bsp_end).
    check(bsp_nprocs() >= 1 && name == "process 0", "only pid 0 continues");
    if (std::strcmp(style, "mixed")) check(destroyed == P - 1, "pids 1.. destroyed theirs");
}

int main(int argc, char **argv) {
    check(argc == 2, "usage: cxx_destructors spmd|mcbsp|main|mixed|c_begin");
    style = argv[1];
    if (!std::strcmp(style, "main")) {
        bsp_begin(P);
        Tracked mine;
        bsp_sync();
        bsp_end();
        check(destroyed == P - 1, "pids 1.. destroyed their objects in main");
        std::printf("c++ destructors ok (%s)\n", style);
        return 0;
    }
    if (!std::strcmp(style, "c_begin")) {
        bsp_init(c_spmd, argc, argv);
        c_spmd();
        check(c_after_end == 1, "only pid 0 continues after bsp_end in c_spmd");
        std::printf("c++ destructors ok (%s)\n", style);
        return 0;
    }
    if (!std::strcmp(style, "mcbsp")) {
        mcbsp_init(spmd, argc, argv);
    } else {
        bsp_init(spmd, argc, argv);
    }
    spmd();
    if (std::strcmp(style, "mixed")) check(destroyed == P, "every process destroyed its object");
    std::printf("c++ destructors ok (%s)\n", style);
    return 0;
}
