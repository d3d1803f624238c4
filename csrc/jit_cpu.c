/* jit_cpu.c - LLVM IR to native code, through ORC's LLJIT.
 *
 * One LLJIT lives for the whole process (created on first use).  Each
 * executable's kernels are one module: optimized for the host CPU with the
 * new pass manager, emitted to an object file in memory (whose size is the
 * executable's code_bytes), and added to the JIT under a resource tracker
 * of its own, so that freeing the executable frees its machine code.
 *
 * Adding modules to one LLJIT from two threads at once is not safe, so
 * every compile holds `jit_lock`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "blas.h"
#include "codegen.h"
#include "group.h"
#include "pipeline.h"

/* The process-wide JIT.  This is the core's one piece of global state:
 * LLVM's JIT is process-wide by nature, and Python sub-interpreters share
 * the process. */
static struct {
    pthread_mutex_t lock;
    bool ready;
    LLVMOrcLLJITRef jit;
    LLVMTargetMachineRef tm;   /* host machine, for optimizing and emitting */
    char *triple;
    uint64_t serial;           /* makes symbol names unique */
} jit_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct cj_jit_code {
    LLVMOrcResourceTrackerRef tracker;
    int64_t code_bytes;
};

/* Consumes `e` and records its message; returns the status. */
static cj_status take_llvm_error(LLVMErrorRef e, const char *what, cj_error *err) {
    char *msg = LLVMGetErrorMessage(e); /* consumes e; we own msg */
    cj_error_set(err, CJ_ERR_COMPILE, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return CJ_ERR_COMPILE;
}

int64_t cj_rt_ipow(int64_t base, int64_t exponent) {
    if (exponent < 0) {
        /* NumPy refuses negative integer powers; we cannot raise from a
         * kernel, so give the integer part of the true result. */
        if (base == 1) return 1;
        if (base == -1) return (exponent & 1) ? -1 : 1;
        return 0;
    }
    uint64_t result = 1, b = (uint64_t)base; /* unsigned: wraps like NumPy */
    while (exponent) {
        if (exponent & 1) result *= b;
        b *= b;
        exponent >>= 1;
    }
    return (int64_t)result;
}

static cj_status jit_init(cj_error *err) {
    if (jit_state.ready) return CJ_OK;
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
        return cj_error_set(err, CJ_ERR_COMPILE, "LLVM has no native target for this CPU");

    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        cj_error_set(err, CJ_ERR_COMPILE, "LLVM target %s: %s", triple, msg);
        LLVMDisposeMessage(msg);
        LLVMDisposeMessage(triple);
        return CJ_ERR_COMPILE;
    }
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    jit_state.tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive,
                                           LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    jit_state.triple = triple;

    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&jit_state.jit, builder); /* consumes builder */
    if (e) return take_llvm_error(e, "creating the LLJIT", err);

    LLVMOrcJITDylibRef main_jd = LLVMOrcLLJITGetMainJITDylib(jit_state.jit);
    /* libm's fmod (frem) and friends come from the process */
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit_state.jit), NULL, NULL);
    if (e) return take_llvm_error(e, "process symbols", err);
    LLVMOrcJITDylibAddGenerator(main_jd, gen); /* the dylib owns gen */

    /* Python loads extensions RTLD_LOCAL, so our own helpers are invisible
     * to the process search: define them by address. */
    LLVMJITSymbolFlags flags = {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0};
    LLVMOrcCSymbolMapPair helpers[] = {
        {LLVMOrcLLJITMangleAndIntern(jit_state.jit, "cj_rt_ipow"),
         {(LLVMOrcExecutorAddress)(uintptr_t)&cj_rt_ipow, flags}},
        {LLVMOrcLLJITMangleAndIntern(jit_state.jit, "cj_rt_gemm"),
         {(LLVMOrcExecutorAddress)(uintptr_t)&cj_rt_gemm, flags}},
    };
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(helpers, 2); /* takes the names */
    e = LLVMOrcJITDylibDefine(main_jd, mu);                                 /* consumes mu */
    if (e) return take_llvm_error(e, "defining runtime helpers", err);
    jit_state.ready = true;
    return CJ_OK;
}

/* CJIT_DUMP=DIR: write each executable's IR (before and after optimization). */
static void dump_module(LLVMModuleRef mod, const char *prefix, const char *stage) {
    const char *dir = getenv("CJIT_DUMP");
    if (!dir || !*dir) return;
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.ll", dir, prefix, stage);
    char *msg = NULL;
    if (LLVMPrintModuleToFile(mod, path, &msg)) LLVMDisposeMessage(msg);
}

static cj_status compile_locked(const cj_plan *plan, cj_kernel_fn *kernels, cj_kernel_fn *inits,
                                cj_kernel_fn *groups, cj_jit_code **out, cj_error *err) {
    if (jit_init(err) != CJ_OK) return err->status;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "cj%llu", (unsigned long long)++jit_state.serial);

    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(prefix, ctx);
    LLVMSetTarget(mod, jit_state.triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(jit_state.tm);
    LLVMSetModuleDataLayout(mod, layout);
    LLVMDisposeTargetData(layout);

    cj_jit_code *code = NULL;
    LLVMMemoryBufferRef obj = NULL;
    int64_t t0 = cj_runtime_now_ns(), t1;
    if (cj_codegen_module(plan, mod, prefix, err) != CJ_OK) goto fail;
    if (cj_group_emit_drivers(plan, mod, prefix, err) != CJ_OK) goto fail;
    dump_module(mod, prefix, "raw");
    char *msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        cj_error_set(err, CJ_ERR_COMPILE, "generated IR is invalid: %s", msg);
        LLVMDisposeMessage(msg);
        goto fail;
    }
    LLVMDisposeMessage(msg);
    t1 = cj_runtime_now_ns();
    cj_runtime_note_phase(CJ_PHASE_CODEGEN, t1 - t0);

    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMErrorRef e = LLVMRunPasses(mod, "default<O2>", jit_state.tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) {
        take_llvm_error(e, "optimizing", err);
        goto fail;
    }
    dump_module(mod, prefix, "opt");
    t0 = cj_runtime_now_ns();
    cj_runtime_note_phase(CJ_PHASE_OPTIMIZE, t0 - t1);

    msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(jit_state.tm, mod, LLVMObjectFile, &msg, &obj)) {
        cj_error_set(err, CJ_ERR_COMPILE, "emitting machine code: %s", msg);
        LLVMDisposeMessage(msg);
        goto fail;
    }
    t1 = cj_runtime_now_ns();
    cj_runtime_note_phase(CJ_PHASE_EMIT, t1 - t0);
    code = calloc(1, sizeof *code);
    if (!code) {
        cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
        goto fail;
    }
    code->code_bytes = (int64_t)LLVMGetBufferSize(obj);
    LLVMOrcJITDylibRef main_jd = LLVMOrcLLJITGetMainJITDylib(jit_state.jit);
    code->tracker = LLVMOrcJITDylibCreateResourceTracker(main_jd);
    e = LLVMOrcLLJITAddObjectFileWithRT(jit_state.jit, code->tracker, obj); /* consumes obj */
    obj = NULL;
    if (e) {
        take_llvm_error(e, "adding code to the JIT", err);
        goto fail;
    }
    for (int i = 0; i < plan->nkernels; i++) {
        char name[128];
        LLVMOrcExecutorAddress addr = 0;
        snprintf(name, sizeof name, "%s_k%d", prefix, i);
        e = LLVMOrcLLJITLookup(jit_state.jit, &addr, name);
        if (e) {
            take_llvm_error(e, "looking up a kernel", err);
            goto fail;
        }
        kernels[i] = (cj_kernel_fn)(uintptr_t)addr;
        inits[i] = NULL;
        if (plan->kernels[i].reduced && !plan->kernels[i].gemm.on) {
            snprintf(name, sizeof name, "%s_k%d_init", prefix, i);
            e = LLVMOrcLLJITLookup(jit_state.jit, &addr, name);
            if (e) {
                take_llvm_error(e, "looking up a kernel", err);
                goto fail;
            }
            inits[i] = (cj_kernel_fn)(uintptr_t)addr;
        }
    }
    for (int g = 0; g < plan->ngroups; g++) {
        char name[128];
        LLVMOrcExecutorAddress addr = 0;
        groups[g] = NULL;
        if (plan->groups[g].count < 2) continue;
        snprintf(name, sizeof name, "%s_g%d", prefix, g);
        e = LLVMOrcLLJITLookup(jit_state.jit, &addr, name);
        if (e) {
            take_llvm_error(e, "looking up a kernel group", err);
            goto fail;
        }
        groups[g] = (cj_kernel_fn)(uintptr_t)addr;
    }
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    cj_runtime_note_phase(CJ_PHASE_LINK, cj_runtime_now_ns() - t1);
    *out = code;
    return CJ_OK;

fail:
    if (obj) LLVMDisposeMemoryBuffer(obj);
    if (code) {
        if (code->tracker) {
            LLVMErrorRef re = LLVMOrcResourceTrackerRemove(code->tracker);
            if (re) LLVMConsumeError(re);
            LLVMOrcReleaseResourceTracker(code->tracker);
        }
        free(code);
    }
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    return err->status;
}

/* See codegen.h. */
cj_status cj_jit_compile(const cj_plan *plan, cj_kernel_fn *kernels, cj_kernel_fn *inits,
                         cj_kernel_fn *groups, cj_jit_code **code, cj_error *err) {
    pthread_mutex_lock(&jit_state.lock);
    cj_status st = compile_locked(plan, kernels, inits, groups, code, err);
    pthread_mutex_unlock(&jit_state.lock);
    return st;
}

/* See codegen.h.  Removing the tracker frees the machine code. */
void cj_jit_code_free(cj_jit_code *code) {
    if (!code) return;
    pthread_mutex_lock(&jit_state.lock);
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(code->tracker);
    if (e) LLVMConsumeError(e);
    LLVMOrcReleaseResourceTracker(code->tracker);
    /* symbol names are interned for the session; drop the ones now unused */
    LLVMOrcSymbolStringPoolClearDeadEntries(
        LLVMOrcExecutionSessionGetSymbolStringPool(LLVMOrcLLJITGetExecutionSession(jit_state.jit)));
    pthread_mutex_unlock(&jit_state.lock);
    free(code);
}

int64_t cj_jit_code_bytes(const cj_jit_code *code) { return code ? code->code_bytes : 0; }
