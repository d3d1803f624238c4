/* gemm_small.h - matmuls with few rows as a register-tiled loop nest,
 * generated at JIT time for the host CPU (gemm_small.c). */
#ifndef CJ_GEMM_SMALL_H
#define CJ_GEMM_SMALL_H

#include <llvm-c/Core.h>

#include "kernel.h"

/* Whether a matmul kernel that BLAS could run (its gemm fields filled by
 * blas.c) runs faster as cjit's own small kernel: few rows, B and C with
 * unit stride along N.  The size rule and its measurements are in
 * gemm_small.c and docs/ARCHITECTURE.md ("Matmul"). */
bool cj_gemm_small_suits(const cj_kernel *k, cj_dtype dtype);

/* Emits the body of kernel k's function `fn` (the CPU kernel ABI:
 * start, end, buffers; codegen.h) at the builder's position, which is in
 * fn's entry block; leaves the builder at the end of a block that still
 * needs its `ret void`.  Writes every element of C (no identity fill). */
void cj_gemm_small_emit(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef fn, const cj_plan *plan,
                        const cj_kernel *k);

/* The bytes of one vector register that the kernel's tiles use on this
 * host (32 with AVX, else 16). */
int cj_gemm_small_vector_bytes(void);

#endif
