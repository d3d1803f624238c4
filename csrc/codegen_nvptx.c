/* codegen_nvptx.c - the NVPTX wrapper of a kernel: its buffers as pointer
 * parameters, a grid-stride loop over its points (the non-reduced dims),
 * the reduced dims as loops inside each thread, and the identity fill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_priv.h"

/* ---- NVPTX ----------------------------------------------------------------- */


/* Do the non-reduced dims of k store to distinct elements (strides that
 * nest without overlap)?  Size-1 dims do not matter. */
static bool stores_disjoint(const cj_kernel *k) {
    int order[CJ_MAX_RANK], n = 0;
    for (int d = 0; d < k->rank; d++) {
        if ((k->reduced & (1u << d)) || k->dims[d] <= 1) continue;
        int64_t s = k->out_index.stride[d];
        if (s <= 0) return false;
        int j = n++;
        while (j > 0 && k->out_index.stride[order[j - 1]] > s) order[j] = order[j - 1], j--;
        order[j] = d;
    }
    for (int j = 1; j < n; j++)
        if (k->out_index.stride[order[j]] < k->out_index.stride[order[j - 1]] * k->dims[order[j - 1]])
            return false;
    return true;
}

/* See codegen.h. */
int64_t cj_codegen_gpu_points(const cj_plan *plan, int ki, bool *serial) {
    const cj_kernel *k = &plan->kernels[ki];
    int64_t points = 1;
    bool ok = stores_disjoint(k) && !k->scatter.on; /* a scatter's stores may collide: one thread */
    for (int d = 0; d < k->rank; d++) {
        bool red = k->reduced & (1u << d);
        if (red && k->dims[d] > 1 && k->out_index.stride[d] != 0) ok = false;
        if (!red) points *= k->dims[d];
    }
    /* a kernel that reads its own output elsewhere than where it writes */
    for (int e = 0; ok && e < k->nexprs; e++) {
        const cj_expr *x = &k->exprs[e];
        if (x->kind == CJ_EX_LOAD && x->buffer == k->out_buffer &&
            memcmp(&x->index, &k->out_index, sizeof x->index) != 0)
            ok = false;
        for (int i = 0; ok && x->kind == CJ_EX_LOAD && i < k->nalso; i++)
            if (x->buffer == k->also[i].buffer && memcmp(&x->index, &k->also[i].index, sizeof x->index) != 0) ok = false;
    }
    *serial = !ok;
    return ok ? points : (points > 0 ? 1 : 0);
}

static LLVMValueRef read_sreg(cg *c, const char *name) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
    return LLVMBuildZExt(c->b, LLVMBuildCall2(c->b, fty, fn, NULL, 0, name + 24), c->i64, "sreg");
}

/* A PTX kernel "name" whose parameters are the data pointers of the plan
 * buffers bufs[0..n) (generic pointers; NVPTX assumes kernel pointer
 * parameters point to global memory).  Leaves the builder in its entry. */
static void new_gpu_function(cg *c, const char *name, const int *bufs, int n) {
    LLVMTypeRef *params = calloc((size_t)n + 1, sizeof(LLVMTypeRef));
    for (int i = 0; params && i < n; i++) params[i] = c->ptr;
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->void_t, params, (unsigned)n, 0));
    free(params);
    LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
    memset(c->buf_ptr, 0, sizeof(LLVMValueRef) * ((size_t)c->plan->nbuffers + 1));
    for (int i = 0; i < n; i++) {
        char pname[32];
        snprintf(pname, sizeof pname, "buf%d", bufs[i]);
        LLVMValueRef p = LLVMGetParam(fn, (unsigned)i);
        LLVMSetValueName2(p, pname, strlen(pname));
        c->buf_ptr[bufs[i]] = p;
    }
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
    c->fn = fn;
}

/* for (t = gid; t < n; t += gridDim.x * blockDim.x): the phi is *t. */
static void grid_loop_begin(cg *c, loop_state *L, LLVMValueRef n, LLVMValueRef *t, LLVMValueRef *step) {
    LLVMValueRef block = read_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    LLVMValueRef width = read_sreg(c, "llvm.nvvm.read.ptx.sreg.ntid.x");
    LLVMValueRef gid = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, block, width, "base"),
                                    read_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), "gid");
    *step = LLVMBuildMul(c->b, read_sreg(c, "llvm.nvvm.read.ptx.sreg.nctaid.x"), width, "gstride");
    loop_begin(c, L, gid, n, "t");
    *t = L->phi;
}

static void grid_loop_end(cg *c, loop_state *L, LLVMValueRef step) {
    LLVMValueRef next = LLVMBuildAdd(c->b, L->phi, step, "tnext");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(L->phi, &next, &latch, 1);
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, next, L->hi, "more"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->exit);
}

/* Inside one thread: the reduced dims from d on, in order, accumulating
 * into the register slot. */
static bool emit_reduced_loops(cg *c, int d) {
    const cj_kernel *k = c->k;
    while (d < k->rank && !(k->reduced & (1u << d))) d++;
    if (d == k->rank) {
        LLVMValueRef v = emit_exprs(c);
        return v && accumulate_value(c, v);
    }
    if (d == pairwise_from(c, false)) {
        LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
        LLVMValueRef before = LLVMBuildLoad2(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), slot, "acc.in");
        LLVMValueRef total = emit_pairwise_sum(c, d);
        if (!total) return false;
        LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, before, total, "sum"), slot);
        return true;
    }
    char name[16];
    snprintf(name, sizeof name, "r%d", d);
    loop_state L;
    loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0), name);
    c->idx[d] = L.phi;
    if (!emit_reduced_loops(c, d + 1)) return false;
    loop_end(c, &L);
    return true;
}

/* One point of the parallel (non-reduced) dims, flat index t: split t into
 * the loop indices, then store the value, or run the reduced dims in this
 * thread and store the total. */
static bool emit_gpu_point(cg *c, LLVMValueRef t) {
    const cj_kernel *k = c->k;
    int outermost = -1;
    for (int d = 0; d < k->rank && outermost < 0; d++)
        if (!(k->reduced & (1u << d))) outermost = d;
    LLVMValueRef rest = t;
    for (int d = k->rank - 1; d >= 0; d--) {
        if (k->reduced & (1u << d) || k->dims[d] == 1) {
            c->idx[d] = LLVMConstInt(c->i64, 0, 0);
        } else if (d == outermost) {
            c->idx[d] = rest;
        } else {
            LLVMValueRef n = LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0);
            c->idx[d] = LLVMBuildURem(c->b, rest, n, "idx");
            rest = LLVMBuildUDiv(c->b, rest, n, "rest");
        }
    }
    if (!k->reduced) return emit_stores(c);
    /* reduced indices are 0 here, and the output offset does not use them */
    LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
    LLVMBuildStore(c->b, load_value(c, k->out_buffer, &k->out_index), slot);
    if (!emit_reduced_loops(c, 0)) return false;
    for (int d = 0; d < k->rank; d++)
        if (k->reduced & (1u << d)) c->idx[d] = LLVMConstInt(c->i64, 0, 0);
    cj_dtype dt = c->plan->buffers[k->out_buffer].dtype;
    store_value(c, k->out_buffer, &k->out_index, LLVMBuildLoad2(c->b, reg_type(c, dt), slot, "acc.final"));
    return true;
}

/* The PTX form of kernel ki ("<prefix>_k<i>", and "<prefix>_k<i>_init" for
 * reductions): parameters are the buffers of cj_codegen_kernel_buffers; the
 * threads share out the cj_codegen_gpu_points points in a grid-stride loop.
 * A kernel that cannot be split that way runs the CPU loop nest in thread 0. */
bool emit_kernel_nvptx(cg *c, int ki, const char *prefix) {
    const cj_kernel *k = &c->plan->kernels[ki];
    if (k->call)
        return cj_error_set(c->err, CJ_ERR_VALUE, "cuda: argsort (sort, argsort, top_k, median) runs on the CPU "
                            "only so far; compile this function for the CPU"), false;
    c->k = k;
    int *bufs = calloc((size_t)k->nexprs + k->nalso + 2, sizeof(int));
    if (!bufs) return cj_error_set(c->err, CJ_ERR_MEMORY, "codegen: out of memory"), false;
    int nbufs = cj_codegen_kernel_buffers(k, bufs);
    char name[128];
    snprintf(name, sizeof name, "%s_k%d", prefix, ki);
    new_gpu_function(c, name, bufs, nbufs);
    free(bufs);
    c->buf_ptr[c->plan->nbuffers] =
        LLVMBuildAlloca(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), "acc.slot");
    bool serial;
    int64_t points = cj_codegen_gpu_points(c->plan, ki, &serial);
    LLVMValueRef t, step;
    loop_state L;
    grid_loop_begin(c, &L, LLVMConstInt(c->i64, (unsigned long long)points, 0), &t, &step);
    if (serial) {
        /* thread 0 (the only point) runs the whole nest, as on the CPU */
        LLVMValueRef zero = LLVMConstInt(c->i64, 0, 0);
        if (!emit_loops(c, 0, zero, LLVMConstInt(c->i64, (unsigned long long)k->dims[0], 0))) return false;
    } else if (!emit_gpu_point(c, t)) {
        return false;
    }
    grid_loop_end(c, &L, step);
    LLVMBuildRetVoid(c->b);

    if (cj_kernel_needs_identity(k)) {
        const cj_buffer *out = &c->plan->buffers[k->out_buffer];
        snprintf(name, sizeof name, "%s_k%d_init", prefix, ki);
        new_gpu_function(c, name, &k->out_buffer, 1);
        grid_loop_begin(c, &L, LLVMConstInt(c->i64, (unsigned long long)cj_shape_numel(&out->shape), 0), &t, &step);
        LLVMValueRef v = reduce_identity(c, k->reduce_op, out->dtype);
        if (out->dtype == CJ_BOOL) v = LLVMBuildZExt(c->b, v, c->i8, "b");
        LLVMBuildStore(c->b, v, LLVMBuildInBoundsGEP2(c->b, mem_type(c, out->dtype), c->buf_ptr[k->out_buffer], &t, 1, "addr"));
        grid_loop_end(c, &L, step);
        LLVMBuildRetVoid(c->b);
    }
    return true;
}
