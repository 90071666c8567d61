/* The C part of libmbsp: what Rust cannot express portably.
 *
 * - mbsp_c_call: runs an SPMD entry point (void spmd(void), or main itself) under setjmp, so
 *   that bsp_end on a process other than 0 can leave it at once through mbsp_c_leave, as
 *   MulticoreBSP ends the thread (the code after bsp_end is not run). The only Rust frame
 *   skipped by the longjmp is bsp_end's own, which holds nothing to drop. When the run was
 *   started from C++, the entry point is called through the trampoline bsp.h defines for C++,
 *   which catches the exception its bsp_end throws (so C++ destructors run); a C bsp_end
 *   called under it still leaves through the longjmp.
 * - the constructor records argc/argv (glibc passes them to ELF constructors), for spawned
 *   processes whose SPMD section is main.
 * - mbsp_c_weak_main: main, if the executable makes it visible (always with libmbsp.a; with
 *   libmbsp.so when linked -rdynamic). C callers pass main explicitly through the bsp_begin
 *   macro of bsp.h, so this is only the C++ fallback.
 */
#include <setjmp.h>
#include <stddef.h>

static int saved_argc;
static char **saved_argv;

__attribute__((constructor)) static void mbsp_c_record_args(int argc, char **argv, char **envp) {
    (void)envp;
    saved_argc = argc;
    saved_argv = argv;
}

static __thread jmp_buf *current;

/* The C++ trampoline of bsp.h: calls spmd (or main_fn) and returns 1 if it was left through
 * bsp_end, 0 if it returned. */
typedef int (*mbsp_c_trampoline)(void (*spmd)(void), int (*main_fn)(int, char **), int argc,
                                 char **argv);

/* Returns 1 if the entry point was left through bsp_end, 0 if it returned. */
int mbsp_c_call(void (*spmd)(void), int (*main_fn)(int, char **), mbsp_c_trampoline trampoline) {
    jmp_buf here;
    jmp_buf *outer = current;
    current = &here;
    if (setjmp(here) != 0) {
        current = outer;
        return 1;
    }
    if (trampoline != NULL) {
        int left = trampoline(spmd, main_fn, saved_argc, saved_argv);
        current = outer;
        return left;
    }
    if (spmd != NULL) {
        spmd();
    } else {
        main_fn(saved_argc, saved_argv);
    }
    current = outer;
    return 0;
}

/* Leave the innermost mbsp_c_call of this thread; returns only if there is none. */
void mbsp_c_leave(void) {
    if (current != NULL) {
        longjmp(*current, 1);
    }
}

extern int main(int, char **) __attribute__((weak));

void *mbsp_c_weak_main(void) {
    return (void *)main;
}

/* The calling thread's current mbsp context, for every primitive: an initial-exec TLS variable
 * is one instruction away, where Rust's thread_local! in a shared library goes through
 * __tls_get_addr. */
static __thread void *current_ctx __attribute__((tls_model("initial-exec")));

void *mbsp_c_current(void) {
    return current_ctx;
}

void mbsp_c_set_current(void *ctx) {
    current_ctx = ctx;
}
