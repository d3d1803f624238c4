/* codegen_loop.c - one counted loop in IR (the rotated form the vectorizer
 * expects) and the interleave hint on its latch; the building block of the
 * CPU loop nest (codegen_reduce.c), the pairwise sums and the NVPTX
 * wrapper's loops over reduced dims. */
#include <string.h>

#include "codegen_priv.h"

void loop_begin(cg *c, loop_state *L, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    L->pre = LLVMGetInsertBlock(c->b);
    L->body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
    L->exit = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "exit");
    L->hi = hi;
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, lo, hi, "enter"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->body);
    L->phi = LLVMBuildPhi(c->b, c->i64, name);
    LLVMAddIncoming(L->phi, &lo, &L->pre, 1);
}

void loop_end_step(cg *c, loop_state *L, int64_t step) {
    LLVMValueRef next = LLVMBuildAdd(c->b, L->phi, LLVMConstInt(c->i64, (unsigned long long)step, 0), "next");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(L->phi, &next, &latch, 1);
    L->latch = LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, next, L->hi, "more"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->exit);
}

/* The vectorizer's cost model runs a loop whose body is a long polynomial
 * (exp, tanh, ...) one vector at a time, and each vector then waits on the
 * latency of its own chain of multiply-adds.  Two vectors per iteration
 * overlap the chains: the 8-op chain benchmark ran 1.4x faster.  A body
 * with several elementary functions is one long dependent path per element
 * (tanh, then exp, then a division in that benchmark): four vectors in
 * flight ran it 1.3x faster again (1.79 -> 1.37 ns per float32 element on
 * one Zen 3 core), while a single exp or tanh, already bound by the
 * multiply-add ports, ran no faster and compiled slower. */
#define CJ_MATH_INTERLEAVE 2
#define CJ_MATH_INTERLEAVE_LONG 4

unsigned math_interleave(const cj_kernel *k) {
    return cj_kernel_long_math(k) >= 2 ? CJ_MATH_INTERLEAVE_LONG : CJ_MATH_INTERLEAVE;
}


/* !llvm.loop !{self, !{"llvm.loop.interleave.count", i32 n}} on the latch */
void set_interleave(cg *c, LLVMValueRef latch, unsigned n) {
    const char *key = "llvm.loop.interleave.count";
    LLVMMetadataRef hint[2] = {LLVMMDStringInContext2(c->ctx, key, strlen(key)),
                               LLVMValueAsMetadata(LLVMConstInt(c->i32, n, 0))};
    LLVMMetadataRef op = LLVMMDNodeInContext2(c->ctx, hint, 2);
    LLVMMetadataRef loop = self_node(c, &op, 1);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9), LLVMMetadataAsValue(c->ctx, loop));
}

void loop_end(cg *c, loop_state *L) { loop_end_step(c, L, 1); }
