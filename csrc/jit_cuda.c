/* jit_cuda.c - kernels to PTX through LLVM's NVPTX target, and the CUDA
 * driver API opened at run time.
 *
 * PTX: codegen.c emits the kernels for NVPTX (one thread per output point,
 * grid-stride), the module is optimized with default<O3> for an NVPTX
 * TargetMachine and printed as PTX (LLVMAssemblyFile).  Every compile has
 * its own LLVM context and TargetMachine, so compiles need no lock.
 *
 * Driver: dlopen("libcuda.so.1") on first use, then a table of the calls
 * used, looked up by their versioned names (what cuda.h's macros expand
 * to).  The few driver types are declared here, so cjit builds without the
 * CUDA toolkit.  Every call's result is checked; a failure reports the
 * call's name and cuGetErrorName/cuGetErrorString.  Each device's primary
 * context is retained once and kept for the life of the process; every
 * entry point makes it current on the calling thread first, except the
 * calls of a program's run (cuda_program.h), made once it is. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen.h"
#include "cuda_program.h"

/* ---- PTX ------------------------------------------------------------------ */

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void nvptx_init(void) {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

static const char *env_or(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* CJIT_DUMP=DIR: also write the PTX of each program there. */
static void dump_ptx(const char *prefix, const char *ptx) {
    const char *dir = getenv("CJIT_DUMP");
    if (!dir || !*dir) return;
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.ptx", dir, prefix);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(ptx, f);
    fclose(f);
}

/* See jit_cuda.h. */
char *cj_cuda_ptx(const cj_plan *plan, const char *arch, const char *prefix, cj_error *err) {
    pthread_once(&nvptx_once, nvptx_init);
    const char *triple = "nvptx64-nvidia-cuda";
    if (!arch) arch = env_or("CJIT_CUDA_ARCH", "sm_90");
    const char *features = env_or("CJIT_CUDA_FEATURES", "+ptx80");
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        cj_error_set(err, CJ_ERR_COMPILE, "LLVM has no NVPTX target: %s", msg);
        LLVMDisposeMessage(msg);
        return NULL;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, arch, features, LLVMCodeGenLevelAggressive,
                                                      LLVMRelocDefault, LLVMCodeModelDefault);
    if (!tm) {
        cj_error_set(err, CJ_ERR_COMPILE, "LLVM: no NVPTX target machine for %s %s", arch, features);
        return NULL;
    }
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(prefix, ctx);
    LLVMSetTarget(mod, triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, layout); /* copies the layout */
    LLVMDisposeTargetData(layout);

    char *ptx = NULL;
    LLVMMemoryBufferRef asm_buf = NULL;
    if (cj_codegen_module_target(plan, mod, prefix, CJ_TARGET_NVPTX, err) != CJ_OK) goto done;
    msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        cj_error_set(err, CJ_ERR_COMPILE, "generated NVPTX IR is invalid: %s", msg);
        LLVMDisposeMessage(msg);
        goto done;
    }
    LLVMDisposeMessage(msg);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, "default<O3>", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) {
        msg = LLVMGetErrorMessage(e); /* consumes e; we own msg */
        cj_error_set(err, CJ_ERR_COMPILE, "optimizing for NVPTX: %s", msg);
        LLVMDisposeErrorMessage(msg);
        goto done;
    }
    msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &msg, &asm_buf)) {
        cj_error_set(err, CJ_ERR_COMPILE, "emitting PTX: %s", msg);
        LLVMDisposeMessage(msg);
        goto done;
    }
    /* the buffer (ours) is not NUL-terminated; cuModuleLoadDataEx wants a NUL */
    size_t n = LLVMGetBufferSize(asm_buf);
    ptx = malloc(n + 1);
    if (!ptx) {
        cj_error_set(err, CJ_ERR_MEMORY, "PTX: out of memory");
        goto done;
    }
    memcpy(ptx, LLVMGetBufferStart(asm_buf), n);
    ptx[n] = 0;
    dump_ptx(prefix, ptx);
done:
    if (asm_buf) LLVMDisposeMemoryBuffer(asm_buf);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    LLVMDisposeTargetMachine(tm);
    return ptx;
}

/* ---- the driver ------------------------------------------------------------ */

/* The driver API types cjit uses (cuda.h, CUDA 11 and later). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
enum {
    CUDA_SUCCESS = 0,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/* X(field, symbol): every call cjit makes, by its exported (versioned) name. */
#define CJ_CUDA_CALLS(X)                                   \
    X(cuGetErrorName, "cuGetErrorName")                    \
    X(cuGetErrorString, "cuGetErrorString")                \
    X(cuInit, "cuInit")                                    \
    X(cuDeviceGetCount, "cuDeviceGetCount")                \
    X(cuDeviceGet, "cuDeviceGet")                          \
    X(cuDeviceGetName, "cuDeviceGetName")                  \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute")        \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") \
    X(cuCtxSetCurrent, "cuCtxSetCurrent")                  \
    X(cuCtxSynchronize, "cuCtxSynchronize")                \
    X(cuMemAlloc_v2, "cuMemAlloc_v2")                      \
    X(cuMemFree_v2, "cuMemFree_v2")                        \
    X(cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2")                  \
    X(cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2")                  \
    X(cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2")                  \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx")            \
    X(cuModuleUnload, "cuModuleUnload")                    \
    X(cuModuleGetFunction, "cuModuleGetFunction")          \
    X(cuLaunchKernel, "cuLaunchKernel")

#define CJ_CUDA_MAX_DEVICES 64

typedef struct {
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, CUstream, void **, void **);
} cj_cuda_api;

/* The driver: process-wide, like the driver itself. */
static struct {
    pthread_mutex_t lock;
    bool loaded;
    void *lib;
    cj_cuda_api api;
    int ndevices;
    struct {
        CUdevice dev;
        CUcontext ctx; /* retained primary context, or NULL until first use */
        int major, minor, nsm;
    } dev[CJ_CUDA_MAX_DEVICES];
} drv = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" into buf. */
static void describe(CUresult r, const char *call, char *buf, size_t n) {
    const char *name = NULL, *text = NULL;
    if (!drv.api.cuGetErrorName || drv.api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (!drv.api.cuGetErrorString || drv.api.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (name)
        snprintf(buf, n, "%s failed: %s (%s)", call, name, text ? text : "no description");
    else
        snprintf(buf, n, "%s failed: CUDA error %d", call, r);
}

/* Checks a driver call's result; on failure records it in err. */
static cj_status cu_check(CUresult r, const char *call, cj_error *err) {
    if (r == CUDA_SUCCESS) return CJ_OK;
    char msg[512];
    describe(r, call, msg, sizeof msg);
    return cj_error_set(err, CJ_ERR_INTERNAL, "cjit: CUDA: %s", msg);
}

/* drv.api.<call>(args...) with its result checked under the call's name. */
#define CU(err, call, ...) cu_check(drv.api.call(__VA_ARGS__), #call, err)

/* Opens the driver and counts devices; drv.lock is held.  On failure
 * writes why and leaves nothing open. */
static void load_locked(char *why, size_t n) {
    const char *name = env_or("CJIT_CUDA_LIBRARY", "libcuda.so.1");
    drv.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        const char *e = dlerror();
        snprintf(why, n, "%s not found (%s)", name, e ? e : "dlopen failed");
        return;
    }
    struct {
        const char *symbol;
        void *slot;
    } table[] = {
#define CJ_CUDA_SLOT(field, symbol) {symbol, &drv.api.field},
        CJ_CUDA_CALLS(CJ_CUDA_SLOT)
#undef CJ_CUDA_SLOT
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        void *sym = dlsym(drv.lib, table[i].symbol);
        if (!sym) {
            snprintf(why, n, "%s has no %s (the driver is too old)", name, table[i].symbol);
            goto fail;
        }
        memcpy(table[i].slot, &sym, sizeof sym); /* a data pointer to a function pointer */
    }
    CUresult r = drv.api.cuInit(0);
    if (r != CUDA_SUCCESS) {
        describe(r, "cuInit", why, n);
        goto fail;
    }
    int count = 0;
    if ((r = drv.api.cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
        describe(r, "cuDeviceGetCount", why, n);
        goto fail;
    }
    if (count <= 0) {
        snprintf(why, n, "the driver reports no GPU");
        goto fail;
    }
    if (count > CJ_CUDA_MAX_DEVICES) count = CJ_CUDA_MAX_DEVICES;
    for (int i = 0; i < count; i++) {
        if ((r = drv.api.cuDeviceGet(&drv.dev[i].dev, i)) != CUDA_SUCCESS ||
            (r = drv.api.cuDeviceGetAttribute(&drv.dev[i].major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                              drv.dev[i].dev)) != CUDA_SUCCESS ||
            (r = drv.api.cuDeviceGetAttribute(&drv.dev[i].minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                              drv.dev[i].dev)) != CUDA_SUCCESS ||
            (r = drv.api.cuDeviceGetAttribute(&drv.dev[i].nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                              drv.dev[i].dev)) != CUDA_SUCCESS) {
            describe(r, "cuDeviceGet/cuDeviceGetAttribute", why, n);
            goto fail;
        }
        drv.dev[i].ctx = NULL;
    }
    drv.ndevices = count;
    drv.loaded = true;
    return;
fail:
    dlclose(drv.lib);
    drv.lib = NULL;
    memset(&drv.api, 0, sizeof drv.api);
}

/* See jit_cuda.h. */
int cj_cuda_device_count(char *why, size_t n) {
    char scratch[8];
    if (!why || n == 0) why = scratch, n = sizeof scratch;
    why[0] = 0;
    pthread_mutex_lock(&drv.lock);
    if (!drv.loaded) load_locked(why, n);
    int count = drv.loaded ? drv.ndevices : 0;
    pthread_mutex_unlock(&drv.lock);
    return count;
}

/* Makes device dev's primary context current on this thread (retaining
 * it on first use). */
static cj_status use_device(int dev, cj_error *err) {
    char why[512];
    int count = cj_cuda_device_count(why, sizeof why);
    if (count == 0) return cj_error_set(err, CJ_ERR_INTERNAL, "cjit: no CUDA device: %s", why);
    if (dev < 0 || dev >= count)
        return cj_error_set(err, CJ_ERR_INTERNAL, "cjit: no CUDA device cuda:%d (this machine has %d)", dev, count);
    pthread_mutex_lock(&drv.lock);
    cj_status st = CJ_OK;
    if (!drv.dev[dev].ctx) st = CU(err, cuDevicePrimaryCtxRetain, &drv.dev[dev].ctx, drv.dev[dev].dev);
    CUcontext ctx = drv.dev[dev].ctx;
    pthread_mutex_unlock(&drv.lock);
    if (st != CJ_OK) return st;
    return CU(err, cuCtxSetCurrent, ctx);
}

/* See jit_cuda.h. */
cj_status cj_cuda_device_info(int dev, char *name, size_t n, int *major, int *minor, cj_error *err) {
    if (use_device(dev, err) != CJ_OK) return err->status;
    if (CU(err, cuDeviceGetName, name, (int)n, drv.dev[dev].dev) != CJ_OK) return err->status;
    *major = drv.dev[dev].major;
    *minor = drv.dev[dev].minor;
    return CJ_OK;
}

/* See jit_cuda.h. */
cj_status cj_cuda_alloc(int dev, int64_t nbytes, uint64_t *addr, cj_error *err) {
    *addr = 0;
    if (use_device(dev, err) != CJ_OK) return err->status;
    if (nbytes <= 0) return CJ_OK;
    CUdeviceptr p = 0;
    if (CU(err, cuMemAlloc_v2, &p, (size_t)nbytes) != CJ_OK) return err->status;
    *addr = p;
    return CJ_OK;
}

/* See jit_cuda.h.  Errors cannot be reported (a destructor calls this). */
void cj_cuda_free(int dev, uint64_t addr) {
    cj_error err = {0};
    if (!addr || use_device(dev, &err) != CJ_OK) return;
    (void)drv.api.cuMemFree_v2(addr);
}

/* See jit_cuda.h. */
cj_status cj_cuda_upload(int dev, uint64_t dst, const void *src, int64_t nbytes, cj_error *err) {
    if (use_device(dev, err) != CJ_OK) return err->status;
    if (nbytes <= 0) return CJ_OK;
    return CU(err, cuMemcpyHtoD_v2, dst, src, (size_t)nbytes);
}

/* See jit_cuda.h. */
cj_status cj_cuda_download(int dev, void *dst, uint64_t src, int64_t nbytes, cj_error *err) {
    if (use_device(dev, err) != CJ_OK) return err->status;
    if (nbytes <= 0) return CJ_OK;
    return CU(err, cuMemcpyDtoH_v2, dst, src, (size_t)nbytes);
}

/* See jit_cuda.h. */
cj_status cj_cuda_synchronize(int dev, cj_error *err) {
    if (use_device(dev, err) != CJ_OK) return err->status;
    return CU(err, cuCtxSynchronize);
}

/* ---- for the device runtime (cuda_program.h) ----------------------------------- */

/* See cuda_program.h. */
cj_status cj_cuda_use(int dev, cj_error *err) { return use_device(dev, err); }

/* See cuda_program.h. */
int cj_cuda_capability(int dev) { return drv.dev[dev].major * 10 + drv.dev[dev].minor; }

/* See cuda_program.h. */
cj_status cj_cuda_module_load(const char *ptx, const char *arch, void **module, cj_error *err) {
    char log[4096] = "";
    int options[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[2] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule m = NULL;
    CUresult r = drv.api.cuModuleLoadDataEx(&m, ptx, 2, options, values);
    if (r != CUDA_SUCCESS) {
        char msg[512];
        describe(r, "cuModuleLoadDataEx", msg, sizeof msg);
        *module = NULL;
        return cj_error_set(err, CJ_ERR_COMPILE, "cjit: CUDA: %s for %s: %s", msg, arch, log);
    }
    *module = m;
    return CJ_OK;
}

/* See cuda_program.h. */
void cj_cuda_module_unload(int dev, void *module) {
    cj_error err = {0};
    if (module && use_device(dev, &err) == CJ_OK) (void)drv.api.cuModuleUnload(module);
}

/* See cuda_program.h. */
cj_status cj_cuda_function(void *module, const char *name, void **fn, cj_error *err) {
    CUfunction f = NULL;
    if (CU(err, cuModuleGetFunction, &f, module, name) != CJ_OK) return err->status;
    *fn = f;
    return CJ_OK;
}

#define CJ_CUDA_BLOCK 256

/* See cuda_program.h. */
cj_status cj_cuda_launch(int dev, void *fn, int64_t points, bool serial, const int *bufs, int n,
                         const uint64_t *slots, cj_error *err) {
    if (points <= 0) return CJ_OK;
    CUdeviceptr vals[64], *v = n <= 64 ? vals : malloc(sizeof(CUdeviceptr) * (size_t)n);
    void *args_stack[64], **args = n <= 64 ? args_stack : malloc(sizeof(void *) * (size_t)n);
    if (!v || !args) {
        if (v != vals) free(v);
        if (args != args_stack) free(args);
        return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    }
    for (int i = 0; i < n; i++) {
        v[i] = slots[bufs[i]];
        args[i] = &v[i];
    }
    unsigned block = serial ? 1 : (unsigned)(points < CJ_CUDA_BLOCK ? points : CJ_CUDA_BLOCK);
    int64_t blocks = (points + block - 1) / block;
    int64_t max_blocks = (int64_t)(drv.dev[dev].nsm > 0 ? drv.dev[dev].nsm : 1) * 32;
    if (blocks > max_blocks) blocks = max_blocks; /* the grid-stride loop covers the rest */
    cj_status st = CU(err, cuLaunchKernel, fn, (unsigned)blocks, 1, 1, block, 1, 1, 0, NULL, args, NULL);
    if (v != vals) free(v);
    if (args != args_stack) free(args);
    return st;
}

/* See cuda_program.h. */
cj_status cj_cuda_copy(uint64_t dst, uint64_t src, int64_t nbytes, cj_error *err) {
    if (nbytes <= 0 || dst == src) return CJ_OK;
    return CU(err, cuMemcpyDtoD_v2, dst, src, (size_t)nbytes);
}

/* See cuda_program.h. */
cj_status cj_cuda_read(void *dst, uint64_t src, int64_t nbytes, cj_error *err) {
    if (nbytes <= 0) return CJ_OK;
    return CU(err, cuMemcpyDtoH_v2, dst, src, (size_t)nbytes);
}
