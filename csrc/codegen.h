/* codegen.h - kernels to LLVM IR (codegen.c) and IR to native code (jit_cpu.c). */
#ifndef CJ_CODEGEN_H
#define CJ_CODEGEN_H

#include <llvm-c/Core.h>

#include "kernel.h"

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
 * defines every function it calls (no host helpers). */
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

/* Compiles every kernel of `plan`.  On success fills kernels[i], groups[g]
 * with the driver of each group of two or more stages (NULL for a group of
 * one: run its kernel), and returns the code, which the caller owns
 * (cj_jit_code_free).  Once *cancel is set (NULL: never) it stops between
 * LLVM's phases with CJ_ERR_CANCELLED, adding nothing to the JIT. */
cj_status cj_jit_compile(const cj_plan *plan, cj_kernel_fn *kernels, cj_kernel_fn *groups, cj_jit_code **code,
                         const cj_cancel *cancel, cj_error *err);
void cj_jit_code_free(cj_jit_code *code);
int64_t cj_jit_code_bytes(const cj_jit_code *code);

/* Runtime helpers the generated code calls (registered with the JIT). */
int64_t cj_rt_ipow(int64_t base, int64_t exponent);
/* Does kernel k accumulate into its output in a loop nest (so that the
 * output must hold the identity first)? */
bool cj_kernel_needs_identity(const cj_kernel *k);
/* Kernels that copy fewer points than this, element for element, are not
 * compiled when they run alone (not in a group of stages): the runtime
 * copies (runtime.c).  A concatenate of 10,000 small arrays was 10,000
 * compiled loops, a millisecond of LLVM each. */
#define CJ_RUNTIME_COPY_POINTS 4096
/* Is kernel k a copy the runtime may do: one load of a buffer of the
 * output's dtype, stored unchanged, over fewer than CJ_RUNTIME_COPY_POINTS points? */
bool cj_kernel_is_small_copy(const cj_plan *p, const cj_kernel *k);
/* out[start:end] = the identity of reduction `op` in dtype `dtype` (runtime.c;
 * also called by group drivers before each block of an accumulating stage). */
void cj_rt_fill_identity(void *out, int64_t start, int64_t end, int32_t dtype, int32_t op);

#endif
