/* codegen.h - kernels to LLVM IR (codegen.c) and IR to native code (jit_cpu.c). */
#ifndef CJ_CODEGEN_H
#define CJ_CODEGEN_H

#include <llvm-c/Core.h>

#include "kernel.h"

#include <stdlib.h>

/* The CPU kernel ABI: run loop-0 iterations [start, end) of the kernel;
 * buffers[b] is the data pointer of plan buffer b. */
typedef void (*cj_kernel_fn)(int64_t start, int64_t end, void *const *buffers);

/* Adds to `mod` one function "<prefix>_k<i>" per kernel i with only[i]
 * (every kernel when `only` is NULL).  (CPU target.)  A kernel that
 * accumulates in a loop nest expects its output to hold the reduction's
 * identity already: the runtime fills it with cj_rt_fill_identity. */
cj_status cj_codegen_module(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, const bool *only,
                            cj_error *err);

typedef enum {
    CJ_TARGET_CPU,    /* the kernel ABI above */
    CJ_TARGET_NVPTX,  /* PTX kernels, see below */
} cj_target;

/* As cj_codegen_module, for `target`.  On NVPTX "<prefix>_k<i>" is a PTX
 * kernel (LLVMPTXKernelCallConv) whose parameters are the device pointers
 * of the plan buffers listed by cj_codegen_kernel_buffers, in that order;
 * the threads of the grid share out cj_codegen_gpu_points points with a
 * grid-stride loop (flat index blockIdx.x * blockDim.x + threadIdx.x).  A
 * point is one element of the non-reduced dims; the reduced dims run as
 * loops inside its thread, so no two threads touch one output element.
 * "<prefix>_k<i>_init" takes the output buffer only and fills all of it
 * with the identity (its points: the output's element count).  The module
 * defines every function it calls (no host helpers).  A loop kernel k
 * (scan, while, cond) has no function of its own: the kernels of its body
 * j are added as "<prefix>_k<k>_b<j>_k<i>" (and so on, for loops nested
 * in bodies), which the host launches around the loop (cuda_loops.c). */
cj_status cj_codegen_module_target(const cj_plan *plan, LLVMModuleRef mod, const char *prefix,
                                   cj_target target, cj_error *err);

/* The plan buffers kernel k touches, output first, then reads in order of
 * first use, without repeats; writes them to bufs (room for k->nexprs + 1)
 * and returns the count. */
int cj_codegen_kernel_buffers(const cj_kernel *k, int *bufs);

/* How many points the NVPTX form of kernel ki spreads over threads: the
 * product of its non-reduced dims.  *serial is set when the kernel cannot
 * be split safely (overlapping stores, an output read at another offset);
 * then it runs whole in one thread and this returns 1 (0 if empty). */
int64_t cj_codegen_gpu_points(const cj_plan *plan, int ki, bool *serial);

/* Compiled code of one executable; freeing it removes the code from the JIT. */
typedef struct cj_jit_code cj_jit_code;

/* The pipeline's codegen and link steps on the CPU (pipeline.c's list,
 * executable.c's backend).  cj_jit_emit compiles every kernel of `plan`
 * to object files in memory (modules on parallel threads); once *cancel is
 * set (NULL: never) it stops between LLVM's phases with CJ_ERR_CANCELLED.
 * With `keep`, the code will keep copies of its object files (taken with
 * cj_jit_code_take_objects), and its symbols get a prefix unique across
 * processes.  Nothing enters the JIT before cj_jit_link. */
typedef struct cj_jit_pending cj_jit_pending;
cj_status cj_jit_emit(const cj_plan *plan, const cj_cancel *cancel, bool keep, cj_jit_pending **out, cj_error *err);
/* Adds what cj_jit_emit made for `plan` to the JIT (consuming it) and fills
 * kernels[i], groups[g] with the driver of each group of two or more stages
 * (NULL for a group of one: run its kernel), and groups[ngroups] with NULL;
 * for a loop body compiled as one function (plan->one_function) only
 * groups[ngroups], that function, every other entry NULL.  The code is the
 * caller's (cj_jit_code_free). */
cj_status cj_jit_link(const cj_plan *plan, cj_jit_pending *pending, cj_kernel_fn *kernels, cj_kernel_fn *groups,
                      cj_jit_code **code, cj_error *err);
void cj_jit_pending_free(cj_jit_pending *pending);
void cj_jit_code_free(cj_jit_code *code);
/* For tests of Ctrl-C during a compile (jit_cpu.c): while compiles are
 * held, each compile waits before its first LLVM piece until it is
 * cancelled or the hold is lifted.  Returns the previous setting. */
bool cj_jit_hold_compiles(bool on);
/* How many of a compile's module jobs wait at the hold now. */
int cj_jit_compiles_held(void);
/* A module job's wait at the hold (compile_hold.c), if compiles are held. */
void cj_jit_wait_while_held(const cj_cancel *cancel);
int64_t cj_jit_code_bytes(const cj_jit_code *code);

/* What a later process needs to add an executable's code to its JIT
 * without compiling (the disk cache): the object files, the prefix of
 * their symbols ("<prefix>_k<i>", "<prefix>_g<j>") and the mathlib
 * functions they call, which the JIT must define first. */
typedef struct {
    char prefix[40];
    char **math;
    int nmath;
    uint8_t **objs;
    size_t *sizes;
    int nobjs;
} cj_jit_objects;
/* Frees a set of object files (made by jit_cpu.c, or read back from the
 * disk cache by executable.c); inline here so that neither file needs the
 * other for it. */
static inline void cj_jit_objects_free(cj_jit_objects *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->nmath; i++)
        free(o->math[i]);
    for (int i = 0; i < o->nobjs; i++)
        free(o->objs[i]);
    free(o->math);
    free(o->objs);
    free(o->sizes);
    free(o);
}

/* The kept objects (the caller owns them), or NULL when none were kept. */
cj_jit_objects *cj_jit_code_take_objects(cj_jit_code *code);
/* Adds kept objects to the JIT and fills kernels[i] (for compiled[i]) and
 * groups[g] (groups of two or more stages) as cj_jit_link does.  Code
 * already in the JIT under the same prefix is shared, not added twice. */
cj_status cj_jit_load(const cj_plan *plan, const cj_jit_objects *objs, const bool *compiled, cj_kernel_fn *kernels,
                      cj_kernel_fn *groups, cj_jit_code **code, cj_error *err);


/* Adds "<prefix>_g<j>" to `mod` for every group j of two or more stages
 * with only[j] (every group when `only` is NULL): for each block of rows in
 * [start, end) it fills the block's rows of each accumulating stage's
 * output with the identity (cj_rt_fill_identity) and calls each stage;
 * stages not defined in `mod` are declared, to be linked from another
 * module of the same executable. */
void cj_group_emit_drivers(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, const bool *only);
/* Adds "<prefix>_b" to `mod`, which holds every kernel and driver of loop
 * body `plan` (plan->one_function): one iteration of the body, every group
 * in order, as one call (body_fn.c); makes its callees internal and
 * alwaysinline (they are compiled into it only). */
void cj_body_fn_emit(const cj_plan *plan, LLVMModuleRef mod, const char *prefix);

#endif
