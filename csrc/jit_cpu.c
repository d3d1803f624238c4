/* jit_cpu.c - LLVM IR to native code, through ORC's LLJIT.
 *
 * One LLJIT lives for the whole process (created on first use).  Each
 * executable's kernels are one module: optimized for the host CPU with the
 * new pass manager, emitted to an object file in memory, and added to the
 * JIT under a resource tracker of its own, so that freeing the executable
 * frees its machine code.  The memory the JIT maps for an object is what
 * the executable's code_bytes counts of it (object_mapped_bytes).
 *
 * The pipeline's codegen step is cj_jit_emit (modules to object files),
 * its link step cj_jit_link (object files into the JIT).  Adding modules
 * to one LLJIT from two threads at once is not safe, and each compile
 * thread has a target machine of its own, so each holds `jit_state.lock`. */
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Object.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "blas.h"
#include "codegen.h"
#include "group.h"
#include "mathlib.h"
#include "pipeline.h"
#include "rt.h"

/* An executable's groups are shared out between up to this many modules,
 * compiled at once on as many threads (LLVM compiles separate contexts
 * independently); each thread has a target machine of its own. */
#define CJ_MAX_COMPILE_THREADS 8

/* Most distinct mathlib functions one module calls (8 ops, 2 dtypes, 4
 * widths, and the sin/cos slow paths: far fewer in practice). */
#define CJ_MAX_MATH_USED 128

/* The process-wide JIT.  This is the core's one piece of global state:
 * LLVM's JIT is process-wide by nature, and Python sub-interpreters share
 * the process. */
static struct {
    pthread_mutex_t lock;
    bool ready;
    LLVMOrcLLJITRef jit;
    LLVMTargetMachineRef tms[CJ_MAX_COMPILE_THREADS + 1]; /* host machine, one per compile thread */
    int ntms;
    char *triple;
    uint64_t serial;           /* makes symbol names unique */
    char **math_defined;       /* names of the mathlib functions in the JIT (for good) */
    int nmath_defined;
} jit_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct cj_jit_code {
    LLVMOrcResourceTrackerRef tracker;
    int64_t code_bytes;
    char prefix[40];            /* of its symbols */
    int refs;                   /* executables sharing it (a cache load of live code) */
    struct cj_jit_code *next_live;
    cj_jit_objects *kept;       /* copies of its object files, when asked for (the disk cache) */
};

/* Every cj_jit_code not yet freed, under jit_state.lock: a cached entry
 * loaded twice in one process shares the code the first load (or the
 * compile that made the entry) added, as its symbols are in the JIT already. */
static cj_jit_code *live_codes;

/* Consumes `e` and records its message; returns the status. */
static cj_status take_llvm_error(LLVMErrorRef e, const char *what, cj_error *err) {
    char *msg = LLVMGetErrorMessage(e); /* consumes e; we own msg */
    cj_error_set(err, CJ_ERR_COMPILE, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return CJ_ERR_COMPILE;
}

/* CJIT_LLVM_ARGS="-time-passes ...": options for LLVM, split at blanks, for
 * experiments.  LLVM's parser ends the process after -help or -version
 * (status 0, as if all went well) and after an option it does not know
 * (status 1, with its message); the first two, and words that are not
 * options at all, are refused here with an error instead. */
#define CJ_MAX_LLVM_ARGS 16
static cj_status pass_llvm_args(cj_error *err) {
    const char *spec = getenv("CJIT_LLVM_ARGS");
    if (!spec || !*spec) return CJ_OK;
    char words[1024];
    if (strlen(spec) >= sizeof words)
        return cj_error_set(err, CJ_ERR_VALUE, "CJIT_LLVM_ARGS is longer than %zu characters", sizeof words - 1);
    strcpy(words, spec);
    const char *argv[CJ_MAX_LLVM_ARGS + 1] = {"cjit"};
    int argc = 1;
    for (char *save = NULL, *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        const char *name = w;
        while (*name == '-') name++;
        size_t len = strcspn(name, "=");
        if (name == w || len == 0)
            return cj_error_set(err, CJ_ERR_VALUE, "CJIT_LLVM_ARGS: '%s' is not an option (options start with '-', e.g. -time-passes)", w);
        if (strncmp(name, "help", 4) == 0 || (len == 7 && strncmp(name, "version", 7) == 0))
            return cj_error_set(err, CJ_ERR_VALUE, "CJIT_LLVM_ARGS: '%s' would make LLVM print and end the process; "
                                "it is refused (run `llc %s` to see what it prints)", w, w);
        if (argc == CJ_MAX_LLVM_ARGS + 1)
            return cj_error_set(err, CJ_ERR_VALUE, "CJIT_LLVM_ARGS: more than %d options", CJ_MAX_LLVM_ARGS);
        argv[argc++] = w;
    }
    if (argc > 1) LLVMParseCommandLineOptions(argc, argv, NULL);
    return CJ_OK;
}

/* The target machines that compile IR, one per compile thread: made on the
 * first compile, not with the LLJIT, since a process whose executables all
 * come from the disk cache only links object files and never needs one
 * (each costs a few hundred microseconds of that first call). */
static cj_status jit_init_codegen(cj_error *err) {
    if (jit_state.ntms > 0) return CJ_OK;
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(jit_state.triple, &target, &msg)) {
        cj_error_set(err, CJ_ERR_COMPILE, "LLVM target %s: %s", jit_state.triple, msg);
        LLVMDisposeMessage(msg);
        return CJ_ERR_COMPILE;
    }
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    int ntms = cj_runtime_num_threads();
    if (ntms > CJ_MAX_COMPILE_THREADS) ntms = CJ_MAX_COMPILE_THREADS;
    ntms++; /* one spare: jobs index them from 0 */
    int made = 0;
    for (; made < ntms; made++)
        jit_state.tms[made] = LLVMCreateTargetMachine(target, jit_state.triple, cpu, features,
                                                      LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                                      LLVMCodeModelDefault);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    jit_state.ntms = made;
    return CJ_OK;
}

static cj_status jit_init(cj_error *err) {
    if (jit_state.ready) return CJ_OK;
    if (pass_llvm_args(err) != CJ_OK) return err->status;
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
        return cj_error_set(err, CJ_ERR_COMPILE, "LLVM has no native target for this CPU");
    if (!jit_state.triple) jit_state.triple = LLVMGetDefaultTargetTriple();

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
    LLVMOrcCSymbolMapPair helpers[CJ_RT_MAX_SYMBOLS];
    int nhelpers = 0;
    for (const cj_rt_symbol *s = cj_rt_symbols; s->name && nhelpers < CJ_RT_MAX_SYMBOLS; s++)
        helpers[nhelpers++] = (LLVMOrcCSymbolMapPair){LLVMOrcLLJITMangleAndIntern(jit_state.jit, s->name),
                                                      {(LLVMOrcExecutorAddress)(uintptr_t)s->address, flags}};
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(helpers, (size_t)nhelpers); /* takes the names */
    e = LLVMOrcJITDylibDefine(main_jd, mu);                                 /* consumes mu */
    if (e) return take_llvm_error(e, "defining runtime helpers", err);
    jit_state.ready = true;
    return CJ_OK;
}

/* The optimization passes.  Kernels are loop nests with constant bounds
 * and affine addresses, and need little of what LLVM's O2 does for general
 * code: promote the accumulator slot (sroa), tidy up (early-cse,
 * instcombine, simplifycfg), put loops in the shape the vectorizer wants
 * (loop-rotate, licm, indvars), vectorize, hoist what vectorizing exposed,
 * tidy up again, and reassociate, which lets the vectorized reductions and
 * the math polynomials share more work.  Measured on the benchmark
 * workloads: run times equal to O2's or better (softmax 4% faster), and the
 * train step compiles 4x faster (58 ms against 235 ms).  instcombine named
 * in a pipeline checks, by default, that one run reached a fixpoint and
 * aborts the process when not (O2 turns that off too): so no-verify-fixpoint.
 * CJIT_LLVM_PASSES replaces the list, in LLVM's pass-pipeline syntax ("default<O2>", ...). */
#define CJ_LLVM_PIPELINE                                                                          \
    "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,loop-rotate,"            \
    "loop-mssa(licm),indvars,loop-vectorize,loop-mssa(licm),instcombine<no-verify-fixpoint>,"    \
    "simplifycfg,reassociate)"

/* Kernels of fewer loop points than this are not worth vectorizing: a
 * scalar loop over 4096 floats takes a few microseconds, and the vector
 * loop, its remainder and its interleaving are most of a kernel's compile
 * time.  They share a module of their own, optimized with the short list. */
#define CJ_SMALL_KERNEL_POINTS 4096
/* In a loop's body, which runs its kernels once per iteration, the limit
 * is one vector, CJ_SMALL_BODY_KERNEL_POINTS (kernel.h): a tanh over 64
 * elements took 4x as long unvectorized, a thousand times per call. */
#define CJ_LLVM_PIPELINE_SMALL "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)"
/* A body that runs as one function (body_fn.c): its kernels (all small) optimized as any, then inlined into
 * it, where their bounds are constants: their loops unroll whole, the slots are loaded once. */
#define CJ_UNROLL_FULL "loop-unroll<O3;no-partial;no-runtime>"
#define CJ_LLVM_INLINE_BODY ",always-inline,function(instsimplify,simplifycfg," CJ_UNROLL_FULL ",instsimplify,"     \
    "simplifycfg," CJ_UNROLL_FULL ",early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg)"

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

/* ---- one module of an executable, compiled on one thread ------------------ */

/* A module's kernels are compiled in pieces of at most this compile cost
 * (kernel_compile_cost) and this many functions (kernels and group
 * drivers), an LLVM module and object file each, so that a cancelled
 * compile stops soon: LLVM's optimization and emission of one module are
 * calls that cannot be interrupted, and the 400 functions of each module of
 * a 200-layer MLP's gradient took 0.9 to 1.3 s to emit (LLVM's time per
 * function is more than its size suggests).  A piece takes LLVM up to
 * about 100 ms (measured on 2 busy cores); each costs the JIT 8 KiB or so
 * of pages of its own. */
#define CJ_PIECE_COST 1024
#define CJ_PIECE_FUNCTIONS 64

typedef struct {
    const cj_plan *plan;
    const char *prefix;         /* of every symbol: "cj12" */
    int index;                  /* which module: names the IR dumps */
    bool *kernels, *groups;     /* what this module holds */
    LLVMTargetMachineRef tm;
    LLVMMemoryBufferRef *objs;  /* the result: an object file per piece */
    int nobjs;
    int64_t mapped;             /* bytes the JIT will map for them */
    int64_t ns[3];              /* codegen, optimize, emit */
    char *math_used[CJ_MAX_MATH_USED]; /* mathlib functions the optimized module calls */
    int nmath_used;
    const cj_cancel *cancel;    /* looked at between phases */
    cj_error err;
} module_job;

/* Has the compile been cancelled?  Then the job's error says so. */
static bool job_cancelled(module_job *j) {
    if (!cj_cancelled(j->cancel)) return false;
    cj_error_set(&j->err, CJ_ERR_CANCELLED, "compile: cancelled");
    return true;
}

/* Notes which mathlib functions mod calls (after vectorizing: which widths). */
static void note_math_used(LLVMModuleRef mod, module_job *j) {
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        if (!LLVMIsDeclaration(fn) || !LLVMGetFirstUse(fn)) continue;
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        if (!cj_mathlib_provides(name)) continue;
        bool noted = false; /* by an earlier piece */
        for (int f = 0; f < j->nmath_used && !noted; f++) noted = strcmp(j->math_used[f], name) == 0;
        if (noted) continue;
        if (j->nmath_used == CJ_MAX_MATH_USED || !(j->math_used[j->nmath_used] = strdup(name))) {
            cj_error_set(&j->err, CJ_ERR_MEMORY, "jit: too many math functions");
            return;
        }
        j->nmath_used++;
    }
}

/* Bytes the JIT maps for object file `obj`.  ORC's JITLink linker (LLJIT's
 * default on x86-64 and AArch64 ELF) maps each object's loadable sections
 * grouped by protection, each group rounded up to whole pages: code (.text)
 * executable, constants and unwind tables (.rodata, .eh_frame) read-only,
 * .data/.bss writable.  Symbol and relocation tables are not loaded.  An
 * object of a few kernels thus costs two pages, although its file is a few
 * KiB (measured on /proc/self/maps: 8 KiB per object, r-x and r--). */
static int64_t object_mapped_bytes(LLVMMemoryBufferRef obj) {
    int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    int64_t group[3] = {0, 0, 0}; /* executable, read-only, writable */
    char *msg = NULL;
    LLVMBinaryRef bin = LLVMCreateBinary(obj, NULL, &msg);
    if (!bin) { /* cannot happen for our own objects; count the file */
        LLVMDisposeMessage(msg);
        return (int64_t)LLVMGetBufferSize(obj);
    }
    LLVMSectionIteratorRef it = LLVMObjectFileCopySectionIterator(bin);
    for (; !LLVMObjectFileIsSectionIteratorAtEnd(bin, it); LLVMMoveToNextSection(it)) {
        const char *name = LLVMGetSectionName(it);
        int64_t size = (int64_t)LLVMGetSectionSize(it);
        if (!name) continue;
        if (strncmp(name, ".text", 5) == 0) group[0] += size;
        else if (strncmp(name, ".rodata", 7) == 0 || strcmp(name, ".eh_frame") == 0) group[1] += size;
        else if (strncmp(name, ".data", 5) == 0 || strncmp(name, ".bss", 4) == 0) group[2] += size;
    }
    LLVMDisposeSectionIterator(it);
    LLVMDisposeBinary(bin);
    int64_t total = 0;
    for (int i = 0; i < 3; i++) total += (group[i] + page - 1) / page * page;
    return total;
}

/* Compiles one piece of job j (the kernels and group drivers marked) to an
 * object file, added to j->objs; on failure j->err says why. */
static void compile_piece(module_job *j, int piece, bool small, const bool *kernels, const bool *groups) {
    char name[96]; /* cj12.0, cj12.0.1, ...; small kernels' pieces cj12.0.s0, ... */
    if (small) snprintf(name, sizeof name, "%s.%d.s%d", j->prefix, j->index, piece);
    else if (piece == 0) snprintf(name, sizeof name, "%s.%d", j->prefix, j->index);
    else snprintf(name, sizeof name, "%s.%d.%d", j->prefix, j->index, piece);
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(name, ctx);
    LLVMSetTarget(mod, jit_state.triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(j->tm);
    LLVMSetModuleDataLayout(mod, layout);
    LLVMDisposeTargetData(layout);

    int64_t t0 = cj_clock_ns(), t1;
    char *msg = NULL;
    LLVMMemoryBufferRef obj = NULL;
    if (job_cancelled(j)) goto done;
    if (cj_codegen_module(j->plan, mod, j->prefix, kernels, &j->err) != CJ_OK) goto done;
    cj_group_emit_drivers(j->plan, mod, j->prefix, groups);
    if (j->plan->one_function) cj_body_fn_emit(j->plan, mod, j->prefix);
    dump_module(mod, name, "raw");
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        cj_error_set(&j->err, CJ_ERR_COMPILE, "generated IR is invalid: %s", msg);
        goto done;
    }
    t1 = cj_clock_ns();
    j->ns[0] += t1 - t0;
    if (job_cancelled(j)) goto done;

    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    const char *passes = getenv("CJIT_LLVM_PASSES");
    if (!passes || !*passes)
        passes = j->plan->one_function ? CJ_LLVM_PIPELINE_SMALL CJ_LLVM_INLINE_BODY /* its kernels are small */
                 : small ? CJ_LLVM_PIPELINE_SMALL : CJ_LLVM_PIPELINE;
    LLVMErrorRef e = LLVMRunPasses(mod, passes, j->tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) {
        take_llvm_error(e, "optimizing", &j->err);
        goto done;
    }
    dump_module(mod, name, "opt");
    note_math_used(mod, j);
    t0 = cj_clock_ns();
    j->ns[1] += t0 - t1;
    if (job_cancelled(j)) goto done;

    LLVMDisposeMessage(msg);
    msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(j->tm, mod, LLVMObjectFile, &msg, &obj)) {
        cj_error_set(&j->err, CJ_ERR_COMPILE, "emitting machine code: %s", msg);
        goto done;
    }
    j->mapped += object_mapped_bytes(obj);
    j->objs[j->nobjs++] = obj;
    j->ns[2] += cj_clock_ns() - t0;
    cj_stats_module();
done:
    if (msg) LLVMDisposeMessage(msg);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
}

/* Rough cost of compiling a kernel: LLVM's time grows with the
 * instructions, and a vectorized transcendental is many of them. */
static int64_t kernel_compile_cost(const cj_kernel *k) {
    if (k->gemm.on || k->call) return 6; /* a call, but a function of its own (LLVM's time per function is ~2 ms) */
    return 4 + k->nexprs + 8 * (int64_t)cj_kernel_long_math(k);
}

static bool is_small_kernel(const cj_plan *p, const cj_kernel *k) {
    int64_t points = 1;
    for (int d = 0; d < k->rank; d++) points *= k->dims[d];
    /* a loop body's kernel runs every iteration: worth the vectorizer from a vector's width on */
    return !k->gemm.on && points < (p->loop_body ? CJ_SMALL_BODY_KERNEL_POINTS : CJ_SMALL_KERNEL_POINTS);
}

/* Compiles job j (a thread's share of the kernels) piece by piece, the
 * kernels in plan order, each group's driver with its first stage. */
static void *compile_module(void *arg) {
    module_job *j = arg;
    const cj_plan *p = j->plan;
    bool *kernels = calloc((size_t)p->nkernels + 1, sizeof(bool));
    bool *groups = calloc((size_t)p->ngroups + 1, sizeof(bool));
    bool *leads = calloc((size_t)p->nkernels + 1, sizeof(bool)); /* kernel k's driver is here */
    j->objs = calloc((size_t)p->nkernels + 1, sizeof(LLVMMemoryBufferRef)); /* every piece has a kernel */
    if (!kernels || !groups || !leads || !j->objs) {
        cj_error_set(&j->err, CJ_ERR_MEMORY, "jit: out of memory");
        goto out;
    }
    for (int g = 0; g < p->ngroups; g++) leads[p->groups[g].first] = j->groups[g] && p->groups[g].count > 1;
    cj_jit_wait_while_held(j->cancel);
    /* the vectorized kernels' pieces, then the small kernels' (the short pass list) */
    for (int small = 0; small < 2; small++) {
        int k = 0;
        for (int piece = 0; j->err.status == CJ_OK; piece++) {
            int64_t cost = 0;
            int functions = 0;
            memset(kernels, 0, (size_t)p->nkernels * sizeof(bool));
            for (; k < p->nkernels; k++) {
                if (!j->kernels[k] || is_small_kernel(p, &p->kernels[k]) != (small == 1)) continue;
                int64_t c = kernel_compile_cost(&p->kernels[k]);
                int f = 1 + leads[k];
                if (functions > 0 && (cost + c > CJ_PIECE_COST || functions + f > CJ_PIECE_FUNCTIONS) &&
                    !p->one_function)
                    break;
                kernels[k] = true;
                cost += c;
                functions += f;
            }
            if (functions == 0) break; /* all placed (a job may have nothing: no module then) */
            for (int g = 0; g < p->ngroups; g++) groups[g] = j->groups[g] && kernels[p->groups[g].first];
            compile_piece(j, piece, small == 1, kernels, groups);
        }
    }
out:
    free(kernels);
    free(groups);
    free(leads);
    return NULL;
}

/* Below this total cost one thread compiles everything: a thread and a
 * module of its own cost more than they save on a small executable. */
#define CJ_PARALLEL_COMPILE_MIN_COST 48


/* Shares the kernels out between modules, the costliest first to the least
 * loaded of up to nmax modules (a small executable stays one module).
 * Each module compiles its vectorized kernels and its small ones (under
 * CJ_SMALL_KERNEL_POINTS, the short pass list) as pieces of their own;
 * small ones weigh half, as they skip the vectorizer.  Small copies that
 * run alone go nowhere (the runtime does them, cj_kernel_is_small_copy).
 * A group's driver goes with its first stage and calls stages in other
 * modules through the JIT's linker.  Returns how many modules there are. */
typedef struct {
    int64_t cost;
    int kernel;
} costed_kernel;

static int by_cost_desc(const void *a, const void *b) {
    const costed_kernel *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return x->kernel - y->kernel;
}

static int partition(const cj_plan *p, module_job *jobs, int nmax) {
    int64_t total = 0, load[CJ_MAX_COMPILE_THREADS] = {0};
    int ncompiled = 0, n = 1;
    int *module_of = calloc((size_t)p->nkernels + 1, sizeof(int)); /* 1 + module, 0: none */
    costed_kernel *order = malloc(sizeof(costed_kernel) * ((size_t)p->nkernels + 1));
    bool *by_runtime = calloc((size_t)p->nkernels + 1, sizeof(bool));
    if (!module_of || !order || !by_runtime) { /* out of memory: one module holds everything */
        for (int k = 0; k < p->nkernels; k++) jobs[0].kernels[k] = true;
        for (int g = 0; g < p->ngroups; g++) jobs[0].groups[g] = true;
        goto done;
    }
    for (int g = 0; g < p->ngroups; g++)
        if (p->groups[g].count == 1)
            by_runtime[p->groups[g].first] = cj_kernel_is_small_copy(p, &p->kernels[p->groups[g].first]) &&
                                             !p->one_function; /* its function does all of a body's copies */
    for (int k = 0; k < p->nkernels; k++) by_runtime[k] |= p->kernels[k].loop != NULL; /* loops_rt.c runs it */
    for (int k = 0; k < p->nkernels; k++) {
        if (by_runtime[k]) continue;
        int64_t c = kernel_compile_cost(&p->kernels[k]);
        if (is_small_kernel(p, &p->kernels[k])) c = (c + 1) / 2;
        order[ncompiled++] = (costed_kernel){c, k};
        total += c;
    }
    n = total < CJ_PARALLEL_COMPILE_MIN_COST || p->one_function ? 1 : nmax;
    if (n > ncompiled) n = ncompiled;
    if (n < 1) n = 1; /* nothing to compile: one empty module */
    qsort(order, (size_t)ncompiled, sizeof *order, by_cost_desc);
    for (int i = 0; i < ncompiled; i++) {
        int m = 0;
        for (int q = 1; q < n; q++)
            if (load[q] < load[m]) m = q;
        load[m] += order[i].cost;
        module_of[order[i].kernel] = m + 1;
    }
    for (int k = 0; k < p->nkernels; k++)
        if (module_of[k]) jobs[module_of[k] - 1].kernels[k] = true;
    for (int g = 0; g < p->ngroups; g++)
        if (module_of[p->groups[g].first]) jobs[module_of[p->groups[g].first] - 1].groups[g] = true;
done:
    free(module_of);
    free(order);
    free(by_runtime);
    return n;
}

/* Compiles the mathlib functions the jobs' modules call that the JIT does
 * not hold yet, into one module that stays for the life of the process.
 * (Called with jit_lock held, before the kernels that call them are added.) */
static bool math_defined(const char *name) {
    for (int i = 0; i < jit_state.nmath_defined; i++)
        if (strcmp(jit_state.math_defined[i], name) == 0) return true;
    return false;
}

/* The distinct mathlib functions the jobs' modules call, into names
 * (room for CJ_MAX_MATH_USED, borrowed from the jobs); returns the count. */
static int math_used_by(const module_job *jobs, int n, const char **names) {
    int count = 0;
    for (int i = 0; i < n; i++)
        for (int f = 0; f < jobs[i].nmath_used; f++) {
            bool listed = false;
            for (int q = 0; q < count && !listed; q++) listed = strcmp(names[q], jobs[i].math_used[f]) == 0;
            if (!listed && count < CJ_MAX_MATH_USED) names[count++] = jobs[i].math_used[f];
        }
    return count;
}

static cj_status define_math(const char *const *names, int n, cj_error *err) {
    const char *missing[CJ_MAX_MATH_USED];
    int nmissing = 0;
    for (int i = 0; i < n; i++) {
        if (!cj_mathlib_provides(names[i]))
            return cj_error_set(err, CJ_ERR_VALUE, "jit: no math function %s", names[i]);
        bool listed = math_defined(names[i]);
        for (int q = 0; q < nmissing && !listed; q++) listed = strcmp(missing[q], names[i]) == 0;
        if (!listed && nmissing < CJ_MAX_MATH_USED) missing[nmissing++] = names[i];
    }
    if (!nmissing) return CJ_OK;
    if (jit_init_codegen(err) != CJ_OK) return err->status;
    char **grown = realloc(jit_state.math_defined, sizeof(char *) * (size_t)(jit_state.nmath_defined + nmissing));
    if (!grown) return cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
    jit_state.math_defined = grown;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("cj_mathlib", ctx);
    LLVMTargetMachineRef tm = jit_state.tms[0];
    LLVMSetTarget(mod, jit_state.triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, layout);
    LLVMDisposeTargetData(layout);
    for (int f = 0; f < nmissing; f++)
        if (!cj_mathlib_define(mod, missing[f])) {
            LLVMDisposeModule(mod);
            LLVMContextDispose(ctx);
            return cj_error_set(err, CJ_ERR_INTERNAL, "jit: no math function %s", missing[f]);
        }
    dump_module(mod, "cj_mathlib", "raw");
    cj_status st = CJ_OK;
    char *msg = NULL;
    LLVMMemoryBufferRef obj = NULL;
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, CJ_LLVM_PIPELINE_SMALL, tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) st = take_llvm_error(e, "optimizing the math library", err);
    else if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &obj)) {
        st = cj_error_set(err, CJ_ERR_COMPILE, "emitting the math library: %s", msg);
        obj = NULL;
    }
    if (msg) LLVMDisposeMessage(msg);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    if (st != CJ_OK) return st;
    e = LLVMOrcLLJITAddObjectFile(jit_state.jit, LLVMOrcLLJITGetMainJITDylib(jit_state.jit), obj);
    if (e) return take_llvm_error(e, "adding the math library to the JIT", err);
    for (int f = 0; f < nmissing; f++)
        if ((jit_state.math_defined[jit_state.nmath_defined] = strdup(missing[f]))) jit_state.nmath_defined++;
    return CJ_OK;
}

static cj_status lookup(const char *name, LLVMOrcExecutorAddress *addr, const char *what, cj_error *err) {
    LLVMErrorRef e = LLVMOrcLLJITLookup(jit_state.jit, addr, name);
    return e ? take_llvm_error(e, what, err) : CJ_OK;
}

/* A prefix no other process will use: objects kept for the disk cache
 * are added to other processes' JITs, next to their own compiles (cjN)
 * and other processes' entries. */
static void unique_prefix(char *prefix, size_t n) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) { /* no entropy source: mix what differs */
        r = (uint64_t)cj_clock_ns() ^ ((uint64_t)getpid() << 32) ^ jit_state.serial;
        r ^= r >> 31;
        r *= 0x9e3779b97f4a7c15ull;
        r ^= r >> 29;
    }
    snprintf(prefix, n, "cx%016llx", (unsigned long long)r);
}

/* Copies the jobs' object files and the mathlib functions they call into
 * a new cj_jit_objects; NULL when out of memory. */
static cj_jit_objects *keep_objects(const module_job *jobs, int n, const char *prefix) {
    cj_jit_objects *o = calloc(1, sizeof *o);
    int nobjs = 0;
    for (int i = 0; i < n; i++) nobjs += jobs[i].nobjs;
    const char *math[CJ_MAX_MATH_USED];
    int nmath = math_used_by(jobs, n, math);
    if (!o) return NULL;
    snprintf(o->prefix, sizeof o->prefix, "%s", prefix);
    o->math = calloc((size_t)nmath + 1, sizeof(char *));
    o->objs = calloc((size_t)nobjs + 1, sizeof(uint8_t *));
    o->sizes = calloc((size_t)nobjs + 1, sizeof(size_t));
    if (!o->math || !o->objs || !o->sizes) goto oom;
    for (; o->nmath < nmath; o->nmath++)
        if (!(o->math[o->nmath] = strdup(math[o->nmath]))) goto oom;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < jobs[i].nobjs; b++) {
            size_t size = LLVMGetBufferSize(jobs[i].objs[b]);
            if (!(o->objs[o->nobjs] = malloc(size + 1))) goto oom;
            memcpy(o->objs[o->nobjs], LLVMGetBufferStart(jobs[i].objs[b]), size);
            o->sizes[o->nobjs++] = size;
        }
    return o;
oom:
    cj_jit_objects_free(o);
    return NULL;
}

static void live_add(cj_jit_code *code) {
    code->refs = 1;
    code->next_live = live_codes;
    live_codes = code;
}

/* Looks up the kernels and group drivers of `plan` under `prefix`: those
 * with compiled[k] (the others are small copies the runtime does), and a
 * loop body's one function. */
static cj_status lookup_all(const cj_plan *plan, const char *prefix, const bool *compiled, cj_kernel_fn *kernels,
                            cj_kernel_fn *groups, cj_error *err) {
    char name[128];
    for (int i = 0; i < plan->nkernels; i++) {
        LLVMOrcExecutorAddress addr = 0;
        kernels[i] = NULL;
        if (!compiled[i] || plan->one_function) continue; /* the body's function holds them all */
        snprintf(name, sizeof name, "%s_k%d", prefix, i);
        if (lookup(name, &addr, "looking up a kernel", err) != CJ_OK) return err->status;
        kernels[i] = (cj_kernel_fn)(uintptr_t)addr;
    }
    for (int g = 0; g < plan->ngroups; g++) {
        LLVMOrcExecutorAddress addr = 0;
        groups[g] = NULL;
        if (plan->groups[g].count < 2 || plan->one_function) continue;
        snprintf(name, sizeof name, "%s_g%d", prefix, g);
        if (lookup(name, &addr, "looking up a kernel group", err) != CJ_OK) return err->status;
        groups[g] = (cj_kernel_fn)(uintptr_t)addr;
    }
    LLVMOrcExecutorAddress addr = 0; /* groups[ngroups]: a loop body's one function */
    snprintf(name, sizeof name, "%s_b", prefix);
    if (plan->one_function && lookup(name, &addr, "looking up a loop body", err) != CJ_OK) return err->status;
    groups[plan->ngroups] = (cj_kernel_fn)(uintptr_t)addr;
    return CJ_OK;
}

/* What cj_jit_emit made for cj_jit_link: each module job's object files. */
struct cj_jit_pending {
    module_job jobs[CJ_MAX_COMPILE_THREADS + 1];
    int n, njobs;               /* modules made; jobs set up */
    char prefix[40];
    bool keep;
};

/* See codegen.h. */
void cj_jit_pending_free(cj_jit_pending *pd) {
    if (!pd) return;
    for (int i = 0; i < pd->njobs; i++) {
        module_job *j = &pd->jobs[i];
        for (int o = 0; o < j->nobjs; o++)
            if (j->objs[o]) LLVMDisposeMemoryBuffer(j->objs[o]);
        free(j->objs);
        free(j->kernels);
        free(j->groups);
        for (int f = 0; f < j->nmath_used; f++) free(j->math_used[f]);
    }
    free(pd);
}

/* The codegen step: modules on parallel threads, each through LLVM's
 * passes to object files in memory; nothing enters the JIT. */
static cj_status emit_locked(const cj_plan *plan, const cj_cancel *cancel, bool keep, cj_jit_pending *pd,
                             cj_error *err) {
    if (jit_init(err) != CJ_OK || jit_init_codegen(err) != CJ_OK) return err->status;
    ++jit_state.serial;
    pd->keep = keep;
    if (keep) unique_prefix(pd->prefix, sizeof pd->prefix);
    else snprintf(pd->prefix, sizeof pd->prefix, "cj%llu", (unsigned long long)jit_state.serial);
    module_job *jobs = pd->jobs;
    pthread_t threads[CJ_MAX_COMPILE_THREADS + 1];
    bool started[CJ_MAX_COMPILE_THREADS + 1] = {false};
    int nmax = cj_runtime_num_threads();
    if (nmax > jit_state.ntms - 1) nmax = jit_state.ntms - 1;
    for (int i = 0; i < nmax + 1; i++) { /* partition uses at most nmax */
        jobs[i] = (module_job){.plan = plan, .prefix = pd->prefix, .index = i, .tm = jit_state.tms[i], .cancel = cancel};
        pd->njobs = i + 1;
        jobs[i].kernels = calloc((size_t)plan->nkernels + 1, sizeof(bool));
        jobs[i].groups = calloc((size_t)plan->ngroups + 1, sizeof(bool));
        if (!jobs[i].kernels || !jobs[i].groups) return cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
    }
    int n = pd->n = partition(plan, jobs, nmax);

    /* module 0 on this thread, the others on threads of their own */
    for (int i = 1; i < n; i++) started[i] = pthread_create(&threads[i], NULL, compile_module, &jobs[i]) == 0;
    compile_module(&jobs[0]);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(threads[i], NULL);
        else compile_module(&jobs[i]);
    }
    /* phases ran side by side: the slowest module's time is the wall time */
    int64_t slowest[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        for (int ph = 0; ph < 3; ph++)
            if (jobs[i].ns[ph] > slowest[ph]) slowest[ph] = jobs[i].ns[ph];
    cj_stats_phase(CJ_PHASE_CODEGEN, slowest[0]);
    cj_stats_phase(CJ_PHASE_OPTIMIZE, slowest[1]);
    cj_stats_phase(CJ_PHASE_EMIT, slowest[2]);
    for (int i = 0; i < n; i++)
        if (jobs[i].err.status != CJ_OK) {
            *err = jobs[i].err;
            return err->status;
        }
    return CJ_OK;
}

/* The link step: the object files added to the JIT under a resource
 * tracker of their own, the mathlib functions they call defined first,
 * and the kernels and group drivers looked up. */
static cj_status link_locked(const cj_plan *plan, cj_jit_pending *pd, cj_kernel_fn *kernels, cj_kernel_fn *groups,
                             cj_jit_code **out, cj_error *err) {
    module_job *jobs = pd->jobs;
    int n = pd->n;
    int64_t t1 = cj_clock_ns();
    const char *math[CJ_MAX_MATH_USED];
    cj_jit_code *code = NULL;
    if (define_math(math, math_used_by(jobs, n, math), err) != CJ_OK) goto fail;
    code = calloc(1, sizeof *code);
    if (!code || (pd->keep && !(code->kept = keep_objects(jobs, n, pd->prefix)))) {
        cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
        goto fail;
    }
    snprintf(code->prefix, sizeof code->prefix, "%s", pd->prefix);
    LLVMOrcJITDylibRef main_jd = LLVMOrcLLJITGetMainJITDylib(jit_state.jit);
    code->tracker = LLVMOrcJITDylibCreateResourceTracker(main_jd);
    for (int i = 0; i < n; i++) {
        code->code_bytes += jobs[i].mapped;
        for (int o = 0; o < jobs[i].nobjs; o++) {
            LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(jit_state.jit, code->tracker, jobs[i].objs[o]);
            jobs[i].objs[o] = NULL; /* consumed */
            if (e) {
                take_llvm_error(e, "adding code to the JIT", err);
                goto fail;
            }
        }
    }
    for (int m = 1; m < n; m++) /* jobs[0].kernels now says which kernels were compiled */
        for (int i = 0; i < plan->nkernels; i++) jobs[0].kernels[i] |= jobs[m].kernels[i];
    if (lookup_all(plan, pd->prefix, jobs[0].kernels, kernels, groups, err) != CJ_OK) goto fail;
    cj_stats_phase(CJ_PHASE_LINK, cj_clock_ns() - t1);
    live_add(code);
    *out = code;
    return CJ_OK;

fail:
    if (code) {
        if (code->tracker) {
            LLVMErrorRef re = LLVMOrcResourceTrackerRemove(code->tracker);
            if (re) LLVMConsumeError(re);
            LLVMOrcReleaseResourceTracker(code->tracker);
        }
        cj_jit_objects_free(code->kept);
        free(code);
    }
    return err->status;
}

/* See codegen.h. */
cj_status cj_jit_emit(const cj_plan *plan, const cj_cancel *cancel, bool keep, cj_jit_pending **out, cj_error *err) {
    cj_jit_pending *pd = calloc(1, sizeof *pd);
    if (!pd) return cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
    pthread_mutex_lock(&jit_state.lock);
    cj_status st = emit_locked(plan, cancel, keep, pd, err);
    pthread_mutex_unlock(&jit_state.lock);
    if (st != CJ_OK) cj_jit_pending_free(pd);
    else *out = pd;
    return st;
}

/* See codegen.h. */
cj_status cj_jit_link(const cj_plan *plan, cj_jit_pending *pd, cj_kernel_fn *kernels, cj_kernel_fn *groups,
                      cj_jit_code **code, cj_error *err) {
    pthread_mutex_lock(&jit_state.lock);
    cj_status st = link_locked(plan, pd, kernels, groups, code, err);
    pthread_mutex_unlock(&jit_state.lock);
    cj_jit_pending_free(pd);
    return st;
}

static cj_status load_locked(const cj_plan *plan, const cj_jit_objects *objs, const bool *compiled,
                             cj_kernel_fn *kernels, cj_kernel_fn *groups, cj_jit_code **out, cj_error *err) {
    if (jit_init(err) != CJ_OK) return err->status;
    for (cj_jit_code *c = live_codes; c; c = c->next_live)
        if (strcmp(c->prefix, objs->prefix) == 0) { /* in the JIT already: share it */
            if (lookup_all(plan, objs->prefix, compiled, kernels, groups, err) != CJ_OK) return err->status;
            c->refs++;
            *out = c;
            return CJ_OK;
        }
    int64_t t0 = cj_clock_ns();
    if (define_math((const char *const *)objs->math, objs->nmath, err) != CJ_OK) return err->status;
    cj_jit_code *code = calloc(1, sizeof *code);
    if (!code) return cj_error_set(err, CJ_ERR_MEMORY, "jit: out of memory");
    snprintf(code->prefix, sizeof code->prefix, "%s", objs->prefix);
    code->tracker = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(jit_state.jit));
    for (int i = 0; i < objs->nobjs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.cached%d", objs->prefix, i);
        LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)objs->objs[i],
                                                                            objs->sizes[i], name);
        code->code_bytes += object_mapped_bytes(buf);
        LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(jit_state.jit, code->tracker, buf); /* consumes buf */
        if (e) {
            take_llvm_error(e, "cache entry: adding code to the JIT", err);
            goto fail;
        }
    }
    /* the lookups link the objects: a bad one fails here */
    if (lookup_all(plan, objs->prefix, compiled, kernels, groups, err) != CJ_OK) goto fail;
    cj_stats_phase(CJ_PHASE_LINK, cj_clock_ns() - t0);
    live_add(code);
    *out = code;
    return CJ_OK;
fail: {
        LLVMErrorRef re = LLVMOrcResourceTrackerRemove(code->tracker);
        if (re) LLVMConsumeError(re);
        LLVMOrcReleaseResourceTracker(code->tracker);
        free(code);
        return err->status;
    }
}

/* See codegen.h. */
cj_status cj_jit_load(const cj_plan *plan, const cj_jit_objects *objs, const bool *compiled, cj_kernel_fn *kernels,
                      cj_kernel_fn *groups, cj_jit_code **code, cj_error *err) {
    pthread_mutex_lock(&jit_state.lock);
    cj_status st = load_locked(plan, objs, compiled, kernels, groups, code, err);
    pthread_mutex_unlock(&jit_state.lock);
    return st;
}

/* See codegen.h. */
cj_jit_objects *cj_jit_code_take_objects(cj_jit_code *code) {
    if (!code) return NULL;
    pthread_mutex_lock(&jit_state.lock);
    cj_jit_objects *o = code->kept;
    code->kept = NULL;
    pthread_mutex_unlock(&jit_state.lock);
    return o;
}

/* See codegen.h. */
void cj_jit_target(char *buf, size_t n) {
    unsigned major = 0, minor = 0, patch = 0;
    LLVMGetVersion(&major, &minor, &patch);
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    snprintf(buf, n, "llvm %u.%u.%u; %s; %s; %s", major, minor, patch, triple, cpu, features);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
}

/* See codegen.h.  Removing the tracker frees the machine code. */
void cj_jit_code_free(cj_jit_code *code) {
    if (!code) return;
    pthread_mutex_lock(&jit_state.lock);
    if (--code->refs > 0) { /* another executable shares it */
        pthread_mutex_unlock(&jit_state.lock);
        return;
    }
    for (cj_jit_code **p = &live_codes; *p; p = &(*p)->next_live)
        if (*p == code) {
            *p = code->next_live;
            break;
        }
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(code->tracker);
    if (e) LLVMConsumeError(e);
    LLVMOrcReleaseResourceTracker(code->tracker);
    /* symbol names are interned for the session; drop the ones now unused */
    LLVMOrcSymbolStringPoolClearDeadEntries(
        LLVMOrcExecutionSessionGetSymbolStringPool(LLVMOrcLLJITGetExecutionSession(jit_state.jit)));
    pthread_mutex_unlock(&jit_state.lock);
    cj_jit_objects_free(code->kept);
    free(code);
}

int64_t cj_jit_code_bytes(const cj_jit_code *code) { return code ? code->code_bytes : 0; }
