/* ir_kernel.h - IR building blocks of the hand-written kernels
 * (gemm_small.c, matvec.c): a counted loop and a plan buffer's data
 * pointer, for functions of the kernel ABI (codegen.h). */
#ifndef CJ_IR_KERNEL_H
#define CJ_IR_KERNEL_H

#include <stdint.h>

#include <llvm-c/Core.h>

/* A counted loop [lo, hi) stepping `step`; the body is emitted between
 * cj_ir_loop_open and cj_ir_loop_close.  hi - lo is a multiple of step. */
typedef struct {
    LLVMBasicBlockRef pre, body, exit;
    LLVMValueRef iv, hi;
} cj_ir_loop;

/* Opens L in fn at the builder's position; returns its induction variable.
 * A loop known to run (constant lo < hi) enters unconditionally, so the
 * values its last iteration computes can be used after it. */
LLVMValueRef cj_ir_loop_open(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef fn, cj_ir_loop *L, LLVMValueRef lo,
                             LLVMValueRef hi, const char *name);
/* Closes L: the step, the back edge, the builder after the loop. */
void cj_ir_loop_close(LLVMBuilderRef b, cj_ir_loop *L, int64_t step);
/* The data pointer of plan buffer `buffer`: slot `buffer` of the kernel's
 * third parameter (void *const *buffers). */
LLVMValueRef cj_ir_kernel_buffer(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef fn, int buffer);

#endif
