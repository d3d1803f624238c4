/* codegen.c - fused kernels to LLVM IR, for the CPU or for NVPTX.
 *
 * On the CPU each kernel becomes `void k(i64 start, i64 end, ptr buffers)`:
 * a loop nest over the kernel's dims (the outermost from start to end, so
 * that a thread pool can split it), whose innermost body evaluates the
 * expression DAG and stores or accumulates the result.  All shapes are
 * compile-time constants, so every offset is an affine function of the loop
 * counters with constant strides, which LLVM's vectorizer understands.
 *
 * On NVPTX the same body (emit_exprs and everything below it is shared) is
 * wrapped differently, see emit_kernel_nvptx: the kernel takes the buffers
 * it touches as separate pointer parameters and gets its index from
 * blockIdx.x * blockDim.x + threadIdx.x, in a grid-stride loop.
 *
 * Values are kept in registers as i1 (bool), i32, i64, float or double;
 * bools are i8 in memory.
 *
 * This file holds the CPU kernel functions and the module entry points; the
 * loop body is codegen_expr.c, one loop codegen_loop.c, the loop nest and its
 * reductions codegen_reduce.c and the NVPTX wrapper codegen_nvptx.c (their
 * shared state and layering: codegen_priv.h). */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/TargetMachine.h> /* the host's features: the vector width */

#include "blas.h"
#include "cmath.h"
#include "codegen_priv.h"
#include "gemm_small.h"
#include "loops.h"
#include "matvec.h"
#include "mathlib.h"
#include "rt.h"


/* The vector width kernels ask LLVM for (its "prefer-vector-width"), decided
 * once: CJIT_LLVM_VECTOR_WIDTH (128, 256 or 512; empty: LLVM's own choice),
 * else 512 where the host has AVX-512F.  LLVM's own choice is 256 bits on
 * Intel's AVX-512 cores and 512 on AMD's Zen 4; on Zen 4 512 bits ran the
 * compute-bound kernels (exp, tanh, softmax, the 8-op chain) 7-20% faster
 * than 256 (docs/ARCHITECTURE.md, "Vector width").  NULL: no preference. */
static const char *vector_width;
static bool vector_width_bad;
static pthread_once_t vector_width_once = PTHREAD_ONCE_INIT;

static void decide_vector_width(void) {
    const char *env = getenv("CJIT_LLVM_VECTOR_WIDTH");
    if (env) {
        if (strcmp(env, "128") == 0 || strcmp(env, "256") == 0 || strcmp(env, "512") == 0) vector_width = env;
        else vector_width_bad = *env != '\0';
        return;
    }
    char *features = LLVMGetHostCPUFeatures();
    if (features && strstr(features, "+avx512f")) vector_width = "512";
    LLVMDisposeMessage(features);
}

static LLVMValueRef new_function(cg *c, const char *name, LLVMValueRef *start, LLVMValueRef *end) {
    LLVMTypeRef params[3] = {c->i64, c->i64, c->ptr};
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->void_t, params, 3, 0));
    LLVMSetValueName2(LLVMGetParam(fn, 0), "start", 5);
    LLVMSetValueName2(LLVMGetParam(fn, 1), "end", 3);
    LLVMSetValueName2(LLVMGetParam(fn, 2), "buffers", 7);
    /* kernels never unwind; say so, it helps the optimizer */
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
    pthread_once(&vector_width_once, decide_vector_width);
    if (vector_width_bad)
        cj_error_set(c->err, CJ_ERR_VALUE, "CJIT_LLVM_VECTOR_WIDTH=%s: give 128, 256 or 512 (bits), or leave it "
                     "empty for LLVM's own choice", getenv("CJIT_LLVM_VECTOR_WIDTH"));
    else if (vector_width)
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(c->ctx, "prefer-vector-width", 19, vector_width,
                                                          (unsigned)strlen(vector_width)));
    *start = LLVMGetParam(fn, 0);
    *end = LLVMGetParam(fn, 1);
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
    c->fn = fn;
    return fn;
}

/* The storage buffer b lives in (as storage_of) and b's byte offset there,
 * as the runtime binds it (runtime.c: a host's address plus the offset). */
static int storage_and_offset(const cj_plan *p, int b, int64_t *offset) {
    *offset = 0;
    while (p->buffers[b].alias_of >= 0) {
        *offset += p->buffers[b].offset;
        b = p->buffers[b].alias_of;
    }
    return b;
}

/* Loads buffer's data pointer in the entry block.  Buffers at one address
 * (an in-place update reads x and writes y over it) get one pointer value:
 * LLVM then sees that each iteration loads and stores the same element,
 * and vectorizes the loop without a run-time overlap check, which two
 * pointers of unknown distance would need (and which always failed). */
static void load_buffer_pointer(cg *c, int buffer) {
    if (c->buf_ptr[buffer]) return;
    const cj_kernel *k = c->k;
    int64_t offset, other_offset;
    int root = storage_and_offset(c->plan, buffer, &offset);
    int others[1 + 64], nothers = 0;
    others[nothers++] = k->out_buffer;
    for (int i = 0; i < k->nalso && nothers < 32; i++) others[nothers++] = k->also[i].buffer;
    for (int e = 0; e < k->nexprs && nothers < (int)(sizeof others / sizeof *others); e++)
        if (cj_expr_reads(&k->exprs[e])) others[nothers++] = k->exprs[e].buffer;
    for (int i = 0; i < nothers; i++) {
        int o = others[i];
        if (o == buffer || !c->buf_ptr[o]) continue;
        if (storage_and_offset(c->plan, o, &other_offset) == root && other_offset == offset) {
            c->buf_ptr[buffer] = c->buf_ptr[o];
            return;
        }
    }
    LLVMValueRef bufs = LLVMGetParam(c->fn, 2);
    LLVMValueRef i = LLVMConstInt(c->i64, (unsigned long long)buffer, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->ptr, bufs, &i, 1, "slot");
    char name[32];
    snprintf(name, sizeof name, "buf%d", buffer);
    c->buf_ptr[buffer] = LLVMBuildLoad2(c->b, c->ptr, slot, name);
    /* the slots do not change while a kernel runs (nor while a loop body's
     * one function runs, body_fn.c): so its inlined kernels load each once */
    LLVMSetMetadata(c->buf_ptr[buffer], LLVMGetMDKindIDInContext(c->ctx, "invariant.load", 14),
                    LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, NULL, 0)));
}



/* A kernel the runtime runs (a BLAS gemm, blas.c; an argsort, sort_rt.c):
 * its function passes a constant descriptor and its own arguments on to
 * `fn` (void fn(const int64_t *desc, int64_t start, int64_t end, void *const *buffers)). */
static void emit_runtime_call(cg *c, const char *fn, const int64_t *desc, int ndesc, LLVMValueRef start,
                              LLVMValueRef end) {
    LLVMValueRef elems[CJ_GEMM_DESC_LEN > CJ_CALL_DESC_LEN ? CJ_GEMM_DESC_LEN : CJ_CALL_DESC_LEN];
    if (ndesc > (int)(sizeof elems / sizeof *elems)) ndesc = (int)(sizeof elems / sizeof *elems); /* never: the two above */
    for (int i = 0; i < ndesc; i++) elems[i] = LLVMConstInt(c->i64, (unsigned long long)desc[i], 1);
    LLVMValueRef init = LLVMConstArray2(c->i64, elems, (uint64_t)ndesc);
    char name[64];
    snprintf(name, sizeof name, "%s.desc", LLVMGetValueName(c->fn));
    LLVMValueRef global = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(global, init);
    LLVMSetGlobalConstant(global, 1);
    LLVMSetLinkage(global, LLVMPrivateLinkage);
    LLVMTypeRef params[4] = {c->ptr, c->i64, c->i64, c->ptr};
    LLVMTypeRef fty = LLVMFunctionType(c->void_t, params, 4, 0);
    LLVMValueRef callee = LLVMGetNamedFunction(c->mod, fn);
    if (!callee) callee = LLVMAddFunction(c->mod, fn, fty);
    LLVMValueRef args[4] = {global, start, end, LLVMGetParam(c->fn, 2)};
    LLVMBuildCall2(c->b, fty, callee, args, 4, "");
}

static void emit_gemm_call(cg *c, int ki, LLVMValueRef start, LLVMValueRef end) {
    int64_t desc[CJ_GEMM_DESC_LEN];
    cj_blas_describe(&c->plan->kernels[ki], desc);
    emit_runtime_call(c, "cj_rt_gemm", desc, CJ_GEMM_DESC_LEN, start, end);
}

/* A kernel with more elementary functions than this calls them (mathlib.c)
 * instead of inlining them.  Each inline copy costs LLVM about 4 ms (16
 * sin in one loop body: 90 ms), while the calls cost nothing measurable
 * at run time (the vector variants take whole vectors); a few inline
 * copies keep small programs free of the library's one-off compile. */
#define CJ_INLINE_MATH_MAX 4


static bool emit_kernel(cg *c, int ki, const char *prefix) {
    const cj_kernel *k = &c->plan->kernels[ki];
    c->k = k;
    char name[128];
    snprintf(name, sizeof name, "%s_k%d", prefix, ki);
    LLVMValueRef start, end;
    new_function(c, name, &start, &end);
    if (c->err->status != CJ_OK) return false;
    if (cj_kernel_is_matvec(c->plan, k)) { /* before BLAS: small ones are faster here */
        cj_matvec_emit(c->mod, c->b, c->fn, c->plan, k);
        LLVMBuildRetVoid(c->b);
        return true; /* C written whole: no init */
    }
    if (k->gemm.on) {
        if (k->gemm.small) cj_gemm_small_emit(c->mod, c->b, c->fn, c->plan, k);
        else emit_gemm_call(c, ki, start, end);
        LLVMBuildRetVoid(c->b);
        return true; /* beta = 0: no init */
    }
    if (k->call != CJ_CALL_NONE) {
        if (k->call != CJ_CALL_ARGSORT && !cj_lapack_available())
            return cj_error_set(c->err, CJ_ERR_VALUE, "%s needs LAPACK, from the OpenBLAS library cjit loads (the "
                                "scipy-openblas32 wheel; cjit._cjit.blas_library() says which): none with it is loaded",
                                k->label ? k->label : "linear algebra"), false;
        int64_t desc[CJ_CALL_DESC_LEN];
        cj_call_describe(c->plan, k, desc);
        static const char *const fns[] = {[CJ_CALL_ARGSORT] = "cj_rt_argsort", [CJ_CALL_CHOLESKY] = "cj_rt_cholesky",
                                          [CJ_CALL_TRISOLVE] = "cj_rt_trisolve", [CJ_CALL_LU] = "cj_rt_lu",
                                          [CJ_CALL_LU_PIVOTS] = "cj_rt_lu_pivots", [CJ_CALL_QR] = "cj_rt_qr",
                                          [CJ_CALL_EIGH] = "cj_rt_eigh", [CJ_CALL_SVD] = "cj_rt_svd"};
        const char *fn = fns[k->call];
        emit_runtime_call(c, fn, desc, CJ_CALL_DESC_LEN, start, end);
        LLVMBuildRetVoid(c->b);
        return true;
    }
    memset(c->buf_ptr, 0, sizeof(LLVMValueRef) * ((size_t)c->plan->nbuffers + 1));
    load_buffer_pointer(c, k->out_buffer);
    for (int i = 0; i < k->nalso; i++) load_buffer_pointer(c, k->also[i].buffer);
    for (int e = 0; e < k->nexprs; e++)
        if (cj_expr_reads(&k->exprs[e])) load_buffer_pointer(c, k->exprs[e].buffer);
    if (c->scope) set_alias_scopes(c, ki, k);
    c->call_math = c->target == CJ_TARGET_CPU && cj_kernel_long_math(k) > CJ_INLINE_MATH_MAX;
    /* the register accumulator lives in a stack slot that mem2reg promotes */
    c->buf_ptr[c->plan->nbuffers] =
        LLVMBuildAlloca(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), "acc.slot");
    emit_invariants(c);
    if (!emit_loops(c, 0, start, end)) return false;
    LLVMBuildRetVoid(c->b);

    return true;
}

/* The kernels with only[i] (all when only is NULL) into mod. */
static cj_status codegen_kernels(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, cj_target target,
                                 const bool *only, cj_error *err) {
    cg c;
    memset(&c, 0, sizeof c);
    c.ctx = LLVMGetModuleContext(mod);
    c.mod = mod;
    c.plan = plan;
    c.target = target;
    c.unroll_dim = -1;
    c.unroll = 1;
    c.err = err;
    c.i1 = LLVMInt1TypeInContext(c.ctx);
    c.i8 = LLVMInt8TypeInContext(c.ctx);
    c.i16 = LLVMInt16TypeInContext(c.ctx);
    c.i32 = LLVMInt32TypeInContext(c.ctx);
    c.i64 = LLVMInt64TypeInContext(c.ctx);
    c.f32 = LLVMFloatTypeInContext(c.ctx);
    c.f64 = LLVMDoubleTypeInContext(c.ctx);
    c.ptr = LLVMPointerTypeInContext(c.ctx, 0);
    c.void_t = LLVMVoidTypeInContext(c.ctx);
    c.buf_ptr = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
    if (target == CJ_TARGET_CPU) {
        c.scope = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
        c.noalias = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
    }
    if (!c.buf_ptr || (target == CJ_TARGET_CPU && (!c.scope || !c.noalias))) {
        free(c.buf_ptr);
        free(c.scope);
        free(c.noalias);
        return cj_error_set(err, CJ_ERR_MEMORY, "codegen: out of memory");
    }
    c.b = LLVMCreateBuilderInContext(c.ctx);
    for (int i = 0; i < plan->nkernels && err->status == CJ_OK; i++) {
        free(c.hoisted); /* one kernel's values are no other's */
        c.hoisted = NULL;
        if ((!only || only[i]) && !(target == CJ_TARGET_NVPTX ? emit_kernel_nvptx(&c, i, prefix) : emit_kernel(&c, i, prefix)) &&
            err->status == CJ_OK)
            cj_error_set(err, CJ_ERR_INTERNAL, "codegen: kernel %d failed", i);
    }
    free(c.hoisted);
    LLVMDisposeBuilder(c.b);
    free(c.buf_ptr);
    free(c.scope);
    free(c.noalias);
    return err->status;
}

/* See codegen.h. */
cj_status cj_codegen_module_target(const cj_plan *plan, LLVMModuleRef mod, const char *prefix,
                                   cj_target target, cj_error *err) {
    if (target == CJ_TARGET_CPU) return codegen_kernels(plan, mod, prefix, target, NULL, err);
    /* NVPTX: a loop kernel has no device code (the host runs the loop,
     * cuda_loops.c); each body's kernels are emitted under
     * "<prefix>_k<k>_b<j>", recursively for nested loops */
    bool *only = malloc(sizeof(bool) * ((size_t)plan->nkernels + 1));
    if (!only) return cj_error_set(err, CJ_ERR_MEMORY, "codegen: out of memory");
    for (int k = 0; k < plan->nkernels; k++) only[k] = plan->kernels[k].loop == NULL;
    cj_status st = codegen_kernels(plan, mod, prefix, target, only, err);
    free(only);
    for (int k = 0; st == CJ_OK && k < plan->nkernels; k++) {
        const cj_loop_plan *L = plan->kernels[k].loop;
        for (int j = 0; L && st == CJ_OK && j < L->body->ngraphs; j++) {
            char inner[256];
            snprintf(inner, sizeof inner, "%s_k%d_b%d", prefix, k, j);
            st = cj_codegen_module_target(L->plans[j], mod, inner, target, err);
        }
    }
    return st;
}

/* See codegen.h. */
cj_status cj_codegen_module(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, const bool *only,
                            cj_error *err) {
    cj_math_helpers_elsewhere(mod); /* sin/cos slow paths: one copy in the JIT (mathlib.c) */
    return codegen_kernels(plan, mod, prefix, CJ_TARGET_CPU, only, err);
}
