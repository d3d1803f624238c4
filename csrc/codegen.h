/* codegen.h - kernels to LLVM IR (codegen.c) and IR to native code (jit_cpu.c). */
#ifndef CJ_CODEGEN_H
#define CJ_CODEGEN_H

#include <llvm-c/Core.h>

#include "kernel.h"

/* The CPU kernel ABI: run loop-0 iterations [start, end) of the kernel;
 * buffers[b] is the data pointer of plan buffer b. */
typedef void (*cj_kernel_fn)(int64_t start, int64_t end, void *const *buffers);

/* Adds to `mod` one function "<prefix>_k<i>" per kernel, and for kernels
 * that accumulate "<prefix>_k<i>_init", which fills elements [start, end)
 * of the output buffer with the reduction's identity. */
cj_status cj_codegen_module(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, cj_error *err);

/* Compiled code of one executable; freeing it removes the code from the JIT. */
typedef struct cj_jit_code cj_jit_code;

/* Compiles every kernel of `plan`.  On success fills kernels[i] and
 * inits[i] (NULL when the kernel has no init) and returns the code, which
 * the caller owns (cj_jit_code_free). */
cj_status cj_jit_compile(const cj_plan *plan, cj_kernel_fn *kernels, cj_kernel_fn *inits,
                         cj_jit_code **code, cj_error *err);
void cj_jit_code_free(cj_jit_code *code);
int64_t cj_jit_code_bytes(const cj_jit_code *code);

/* Runtime helpers the generated code calls (registered with the JIT). */
int64_t cj_rt_ipow(int64_t base, int64_t exponent);

#endif
