/* ir_kernel.c - see ir_kernel.h. */
#include "ir_kernel.h"

#include <stdbool.h>

/* See ir_kernel.h. */
LLVMValueRef cj_ir_loop_open(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef fn, cj_ir_loop *L, LLVMValueRef lo,
                             LLVMValueRef hi, const char *name) {
    L->pre = LLVMGetInsertBlock(b);
    L->body = LLVMAppendBasicBlockInContext(ctx, fn, name);
    L->exit = LLVMAppendBasicBlockInContext(ctx, fn, "done");
    L->hi = hi;
    bool runs = LLVMIsAConstantInt(lo) && LLVMIsAConstantInt(hi) &&
                LLVMConstIntGetSExtValue(lo) < LLVMConstIntGetSExtValue(hi);
    if (runs) LLVMBuildBr(b, L->body);
    else LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, lo, hi, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(b, L->body);
    L->iv = LLVMBuildPhi(b, LLVMInt64TypeInContext(ctx), name);
    LLVMAddIncoming(L->iv, &lo, &L->pre, 1);
    return L->iv;
}

/* See ir_kernel.h. */
void cj_ir_loop_close(LLVMBuilderRef b, cj_ir_loop *L, int64_t step) {
    LLVMValueRef next = LLVMBuildAdd(b, L->iv, LLVMConstInt(LLVMTypeOf(L->iv), (unsigned long long)step, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
    LLVMAddIncoming(L->iv, &next, &latch, 1);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, L->hi, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(b, L->exit);
}

/* See ir_kernel.h. */
LLVMValueRef cj_ir_kernel_buffer(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef fn, int buffer) {
    LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(ctx), (unsigned long long)buffer, 1);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, ptr, LLVMGetParam(fn, 2), &idx, 1, "slot");
    LLVMValueRef data = LLVMBuildLoad2(b, ptr, slot, "data");
    /* the slots do not change while a kernel runs: a loop body's one
     * function (body_fn.c) loads each once, whichever kernels it inlined */
    LLVMSetMetadata(data, LLVMGetMDKindIDInContext(ctx, "invariant.load", 14),
                    LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, 0, 0)));
    return data;
}
