/* body_fn.c - a loop body as one function: "<prefix>_b" runs every group
 * of a body that cj_plan_one_function accepts, in order, as the runtime
 * would (runtime.c's run_groups): a group's driver over its rows, or a
 * lone kernel over its loop 0 after the identity fill it needs.  Its
 * callees are defined in the same module (jit_cpu.c puts the whole body
 * in one), marked alwaysinline and made internal, so that after the
 * kernels are optimized on their own they are inlined with their bounds
 * known and dropped: the module's code is the one function, and one
 * iteration of the loop is one call. */
#include <stdio.h>
#include <string.h>

#include "codegen.h"

/* Gives fn the attribute `key` of `from`, when from has it. */
static void copy_string_attribute(LLVMValueRef from, LLVMValueRef fn, const char *key) {
    LLVMAttributeRef a = LLVMGetStringAttributeAtIndex(from, LLVMAttributeFunctionIndex, key, (unsigned)strlen(key));
    if (a) LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

/* See codegen.h. */
void cj_body_fn_emit(const cj_plan *p, LLVMModuleRef mod, const char *prefix) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx), i32 = LLVMInt32TypeInContext(ctx);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), void_t = LLVMVoidTypeInContext(ctx);
    LLVMTypeRef params[3] = {i64, i64, ptr};
    LLVMTypeRef fty = LLVMFunctionType(void_t, params, 3, 0);
    LLVMTypeRef fill_params[5] = {ptr, i64, i64, i32, i32};
    LLVMTypeRef fill_ty = LLVMFunctionType(void_t, fill_params, 5, 0);
    unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    char name[128];
    snprintf(name, sizeof name, "%s_b", prefix);
    LLVMValueRef fn = LLVMAddFunction(mod, name, fty), bufs = LLVMGetParam(fn, 2);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, nounwind, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    for (int gi = 0; gi < p->ngroups; gi++) {
        const cj_group *g = &p->groups[gi];
        const cj_kernel *k = &p->kernels[g->first];
        int64_t n = g->count > 1 ? g->rows : k->rank > 0 ? k->dims[0] : 1;
        if (g->count == 1 && cj_kernel_cpu_needs_identity(p, k)) {
            LLVMValueRef fill = LLVMGetNamedFunction(mod, "cj_rt_fill_identity"); /* rt.c */
            if (!fill) fill = LLVMAddFunction(mod, "cj_rt_fill_identity", fill_ty);
            LLVMValueRef slot_index = LLVMConstInt(i64, (unsigned long long)k->out_buffer, 0);
            LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, ptr, bufs, &slot_index, 1, "slot");
            LLVMValueRef args[5] = {
                LLVMBuildLoad2(b, ptr, slot, "out"), LLVMConstInt(i64, 0, 0),
                LLVMConstInt(i64, (unsigned long long)cj_shape_numel(&p->buffers[k->out_buffer].shape), 0),
                LLVMConstInt(i32, (unsigned long long)p->buffers[k->out_buffer].dtype, 0),
                LLVMConstInt(i32, (unsigned long long)k->reduce_op, 0)};
            LLVMBuildCall2(b, fill_ty, fill, args, 5, "");
        }
        if (g->count > 1) snprintf(name, sizeof name, "%s_g%d", prefix, gi);
        else snprintf(name, sizeof name, "%s_k%d", prefix, g->first);
        LLVMValueRef callee = LLVMGetNamedFunction(mod, name);
        if (!callee) callee = LLVMAddFunction(mod, name, fty); /* never: the module holds the body */
        LLVMValueRef args[3] = {LLVMConstInt(i64, 0, 0), LLVMConstInt(i64, (unsigned long long)n, 0), bufs};
        LLVMBuildCall2(b, fty, callee, args, 3, "");
    }
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    /* every kernel and driver inlines into it, and then goes; it prefers their vector width */
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        if (f == fn || LLVMIsDeclaration(f)) continue;
        size_t len;
        const char *fname = LLVMGetValueName2(f, &len);
        if (strncmp(fname, prefix, strlen(prefix)) != 0 || fname[strlen(prefix)] != '_') continue;
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, always, 0));
        LLVMSetLinkage(f, LLVMInternalLinkage);
        copy_string_attribute(f, fn, "prefer-vector-width");
    }
}
