/*
 * bsp.hpp — the C++ interface of MulticoreBSP for C, on mbsp (libmbsp).
 *
 * Everything of bsp.h (the BSPlib primitives), mcbsp-affinity.h and mcbsp-resiliency.h, plus
 * the class mcbsp::BSP_program: a BSP program is a class deriving from it that implements
 *
 *     virtual void spmd();                   the SPMD section, run by every process
 *     virtual BSP_program *newInstance();    a fresh object for a process other than 0
 *
 * and is started with begin(P), which stands for bsp_init, bsp_begin(P), spmd() and bsp_end:
 * process 0 runs spmd() on the object begin was called on, every other process on its own
 * object from newInstance() (so that members are per process), destroyed by destroyInstance
 * (by default `delete`) after its bsp_end. begin returns on process 0 once the run has ended;
 * begin() without P starts bsp_nprocs() processes. Calling begin inside spmd() starts a nested
 * run over the part of the machine the calling process owns. newInstance is called by the
 * processes at once, on the same object: it must not modify that object.
 *
 * Over MPI ranks (the program started by mpiexec; see bsp.h), as for bsp_init: the ranks other
 * than 0 enter spmd() from begin and end at its bsp_end, the process count is rank 0's, and a
 * program has one top-level run (begin a second time at the top level is a misuse).
 *
 * Compiled without exceptions (-fno-exceptions), a process other than 0 leaves at bsp_end by
 * longjmp: its object is destroyed just before its bsp_end instead.
 */
#ifndef MBSP_BSP_HPP
#define MBSP_BSP_HPP

#include "bsp.h"
#include "mcbsp-affinity.h"
#include "mcbsp-resiliency.h"

extern "C" {
/* bsp_init whose run hands data to every process's SPMD function, through mbsp_spmd_data
 * (before or after its bsp_begin). Used by BSP_program::begin. */
void mbsp_init_data(void (*spmd)(void), void *data);
void *mbsp_spmd_data(void);
}

namespace mcbsp {

/* A BSP program as a class: see the top of this file. */
class BSP_program {
  private:
    /* The number of processes begin asked for. */
    bsp_pid_t processes;

    /* A process's own program object, destroyed when the process leaves its SPMD section. */
    class Instance {
      private:
        BSP_program *const owner;
        BSP_program *const object;
        Instance(const Instance &);
        Instance &operator=(const Instance &);

      public:
        explicit Instance(BSP_program *from) : owner(from), object(from->newInstance()) {
            if (object == 0) {
                bsp_abort("mcbsp::BSP_program::newInstance returned NULL");
            }
        }
        ~Instance() { owner->destroyInstance(object); }
        BSP_program *get() const { return object; }
    };

    /* The SPMD function of every run begin starts. */
    static void entry() {
        BSP_program *const owner = static_cast<BSP_program *>(mbsp_spmd_data());
        bsp_begin(owner->processes);
        if (bsp_pid() == 0) {
            owner->spmd();
            bsp_end();
            return;
        }
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
        /* bsp_end throws here: the object outlives the end synchronisation. */
        Instance mine(owner);
        mine.get()->spmd();
        bsp_end();
#else
        {
            Instance mine(owner);
            mine.get()->spmd();
        }
        bsp_end();
#endif
    }

  protected:
    BSP_program() : processes(0) {}

    /* The SPMD section, run by every process (bsp_begin and bsp_end are implied). */
    virtual void spmd() = 0;

    /* A new object for a process other than 0, usually `return new FinalType();`. */
    virtual BSP_program *newInstance() = 0;

    /* Destroys an object newInstance made (by default with delete). */
    virtual void destroyInstance(BSP_program *const instance) { delete instance; }

  public:
    /* Run spmd() on P processes (bsp_init, bsp_begin(P), spmd(), bsp_end). */
    void begin(const bsp_pid_t P = bsp_nprocs()) {
        processes = P;
        mbsp_init_data(&BSP_program::entry, this);
        entry();
    }

    virtual ~BSP_program() {}
};

} /* namespace mcbsp */

#endif /* MBSP_BSP_HPP */
