/* drivers.c - the CPU functions that run a kernel group: for each block
 * of rows, every stage on that block (group.c decides the groups).  A group
 * with block storage (blockmem.c) hands its stages a copy of the slots in
 * which each such buffer points at this thread's block, shifted back by the
 * block's first row, so that the stages' absolute row addressing lands in
 * the block.  A block on the stack is an alloca of this frame. */
#include <stdio.h>

#include "blockmem.h"
#include "codegen.h"

/* The function `name`: defined in this module, or declared here and
 * defined in another module of the same executable or in the runtime (the
 * JIT links them). */
static LLVMValueRef function_here(LLVMModuleRef mod, const char *name, LLVMTypeRef fty) {
    LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
    return fn ? fn : LLVMAddFunction(mod, name, fty);
}

/* See codegen.h. */
void cj_group_emit_drivers(const cj_plan *p, LLVMModuleRef mod, const char *prefix, const bool *only) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMTypeRef params[3] = {i64, i64, ptr};
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 3, 0);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
    LLVMTypeRef fill_params[5] = {ptr, i64, i64, i32, i32};
    LLVMTypeRef fill_ty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), fill_params, 5, 0);
    LLVMValueRef fill = function_here(mod, "cj_rt_fill_identity", fill_ty); /* rt.c */
    LLVMTypeRef index_ty = LLVMFunctionType(i32, NULL, 0, 0);
    LLVMValueRef thread_index = NULL;
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    char name[128];
    for (int gi = 0; gi < p->ngroups; gi++) {
        const cj_group *g = &p->groups[gi];
        if (g->count < 2 || (only && !only[gi])) continue;
        if (g->local_block > 0 && !thread_index) thread_index = function_here(mod, "cj_rt_thread_index", index_ty); /* rt.c */
        snprintf(name, sizeof name, "%s_g%d", prefix, gi);
        LLVMValueRef fn = LLVMAddFunction(mod, name, fty);
        LLVMValueRef start = LLVMGetParam(fn, 0), end = LLVMGetParam(fn, 1), bufs = LLVMGetParam(fn, 2);
        LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
        LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(ctx, fn, "block");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, fn, "done");
        LLVMPositionBuilderAtEnd(b, entry);
        int64_t block = g->local_block > 0 ? g->local_block : g->block;
        /* block storage: the stages' slots, a copy in this frame, and the thread */
        LLVMValueRef slots = bufs, tid = NULL;
        if (g->local_block > 0) {
            slots = LLVMBuildArrayAlloca(b, ptr, LLVMConstInt(i64, (unsigned long long)p->nbuffers, 0), "slots");
            LLVMBuildMemCpy(b, slots, 8, bufs, 8, LLVMConstInt(i64, (unsigned long long)p->nbuffers * 8, 0));
            tid = LLVMBuildSExt(b, LLVMBuildCall2(b, index_ty, thread_index, NULL, 0, "t"), i64, "tid");
            /* a split run has thread_index < local_copies (runtime.c); any
             * other runs alone in its own arena, and takes block 0 */
            LLVMValueRef copies = LLVMConstInt(i64, (unsigned long long)g->local_copies, 0);
            tid = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, tid, copies, ""), tid, LLVMConstInt(i64, 0, 0), "tid");
        }
        /* blocks on the stack: this frame's, 64-byte aligned as the arena's
         * (a group's add up to CJ_BLOCK_STACK_GROUP bytes, so there are at
         * most that / 64 of them) */
        LLVMValueRef frame[CJ_BLOCK_STACK_GROUP / 64];
        int framed[CJ_BLOCK_STACK_GROUP / 64], nframed = 0;
        for (int bi = 0; tid && bi < p->nbuffers && nframed < CJ_BLOCK_STACK_GROUP / 64; bi++) {
            const cj_buffer *buf = &p->buffers[bi];
            if (!buf->block_on_stack || buf->first_use != gi) continue;
            LLVMTypeRef bytes = LLVMArrayType2(LLVMInt8TypeInContext(ctx), (uint64_t)cj_block_stride(p, g, buf));
            frame[nframed] = LLVMBuildAlloca(b, bytes, "block");
            LLVMSetAlignment(frame[nframed], 64);
            framed[nframed++] = bi;
        }
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, start, end, "any"), body, done);
        /* for (r0 = start; r0 < end; r0 += block) run every stage on [r0, r1) */
        LLVMPositionBuilderAtEnd(b, body);
        LLVMValueRef r0 = LLVMBuildPhi(b, i64, "r0");
        int next_framed = 0; /* framed[] lists its buffers in this loop's order */
        for (int bi = 0; tid && bi < p->nbuffers; bi++) {
            const cj_buffer *buf = &p->buffers[bi];
            if (buf->block_storage <= 0 || buf->first_use != gi) continue;
            /* row r0 at the start of this thread's block: storage + tid *
             * stride - r0 * row_bytes (a plain, not inbounds, GEP: the
             * pointer itself may lie before the block; stages address only
             * rows [r0, r1) through it) */
            LLVMValueRef at = LLVMConstInt(i64, (unsigned long long)bi, 0);
            LLVMValueRef base = NULL, mine = LLVMConstInt(i64, 0, 0);
            if (next_framed < nframed && framed[next_framed] == bi) base = frame[next_framed++];
            if (!base) {
                base = LLVMBuildLoad2(b, ptr, LLVMBuildInBoundsGEP2(b, ptr, bufs, &at, 1, ""), "storage");
                mine = LLVMBuildMul(b, tid, LLVMConstInt(i64, (unsigned long long)cj_block_stride(p, g, buf), 0), "");
            }
            LLVMValueRef back = LLVMBuildMul(b, r0, LLVMConstInt(i64, (unsigned long long)(buf->nbytes / g->rows), 0), "");
            LLVMValueRef off = LLVMBuildSub(b, mine, back, "off");
            LLVMValueRef shifted = LLVMBuildGEP2(b, LLVMInt8TypeInContext(ctx), base, &off, 1, "shifted");
            LLVMBuildStore(b, shifted, LLVMBuildInBoundsGEP2(b, ptr, slots, &at, 1, ""));
        }
        LLVMValueRef next = LLVMBuildAdd(b, r0, LLVMConstInt(i64, (unsigned long long)block, 0), "next");
        LLVMValueRef past = LLVMBuildICmp(b, LLVMIntSGT, next, end, "past");
        LLVMValueRef r1 = LLVMBuildSelect(b, past, end, next, "r1");
        for (int s = g->first; s < g->first + g->count; s++) {
            const cj_kernel *k = &p->kernels[s];
            if (cj_kernel_cpu_needs_identity(p, k)) {
                /* fill this block's rows of the output with the identity first */
                int64_t row = cj_shape_numel(&p->buffers[k->out_buffer].shape) / g->rows;
                LLVMValueRef rs = LLVMConstInt(i64, (unsigned long long)row, 0);
                LLVMValueRef slot_index = LLVMConstInt(i64, (unsigned long long)k->out_buffer, 0);
                LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, ptr, slots, &slot_index, 1, "slot");
                LLVMValueRef args[5] = {LLVMBuildLoad2(b, ptr, slot, "out"), LLVMBuildMul(b, r0, rs, "i0"),
                                        LLVMBuildMul(b, r1, rs, "i1"),
                                        LLVMConstInt(i32, (unsigned long long)p->buffers[k->out_buffer].dtype, 0),
                                        LLVMConstInt(i32, (unsigned long long)k->reduce_op, 0)};
                LLVMBuildCall2(b, fill_ty, fill, args, 5, "");
            }
            snprintf(name, sizeof name, "%s_k%d", prefix, s);
            LLVMValueRef stage = function_here(mod, name, fty);
            LLVMValueRef args[3] = {r0, r1, slots};
            LLVMBuildCall2(b, fty, stage, args, 3, "");
        }
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        LLVMAddIncoming(r0, &start, &entry, 1);
        LLVMAddIncoming(r0, &r1, &latch, 1);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r1, end, "more"), body, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMBuildRetVoid(b);
    }
    LLVMDisposeBuilder(b);
}
