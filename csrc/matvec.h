/* matvec.h - small matrix-vector products as a vectorized kernel,
 * generated at JIT time for the host CPU (matvec.c). */
#ifndef CJ_MATVEC_H
#define CJ_MATVEC_H

#include <llvm-c/Core.h>

#include "kernel.h"

/* Emits the body of kernel k's function fn (parameters start, end,
 * buffers; loop 0, the rows of C, runs [start, end)) as a matrix-vector
 * product; k is one cj_kernel_is_matvec accepts (kernel.h).  C is written
 * whole. */
void cj_matvec_emit(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef fn, const cj_plan *plan, const cj_kernel *k);

#endif
