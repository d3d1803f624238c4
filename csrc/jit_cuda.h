/* jit_cuda.h - kernels as PTX, and the CUDA driver loaded at run time.
 *
 * Nothing here needs CUDA to build: the driver (libcuda.so.1) is opened
 * with dlopen on first use and its calls are looked up by their versioned
 * names.  PTX comes from LLVM's NVPTX target, so it can be produced (and
 * checked with ptxas) on a machine without a GPU.
 *
 * Device memory is named by its 64-bit device address (CUdeviceptr). */
#ifndef CJ_JIT_CUDA_H
#define CJ_JIT_CUDA_H

#include "pipeline.h"

/* ---- PTX ------------------------------------------------------------------ */

/* The PTX text of every kernel of `plan` (see cj_codegen_module_target),
 * named "<prefix>_k<i>".  `arch` is the CPU ("sm_90"); NULL means
 * $CJIT_CUDA_ARCH or "sm_90".  The features are $CJIT_CUDA_FEATURES or
 * "+ptx80".  Returns a NUL-terminated string the caller frees, or NULL with
 * err set. */
char *cj_cuda_ptx(const cj_plan *plan, const char *arch, const char *prefix, cj_error *err);

/* ---- the driver ------------------------------------------------------------ */

/* Loads the driver if needed and returns the number of CUDA devices.  When
 * there are none, returns 0 and writes why into why[0..n) ("libcuda.so.1
 * not found", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)").  A failed load
 * is retried on the next call; a successful one lasts for the process. */
int cj_cuda_device_count(char *why, size_t n);

/* Name and compute capability of device `dev`. */
cj_status cj_cuda_device_info(int dev, char *name, size_t n, int *major, int *minor, cj_error *err);

/* Device memory on device `dev`.  A zero-byte allocation gives address 0.
 * Every call makes the device's primary context current first. */
cj_status cj_cuda_alloc(int dev, int64_t nbytes, uint64_t *addr, cj_error *err);
void cj_cuda_free(int dev, uint64_t addr);
cj_status cj_cuda_upload(int dev, uint64_t dst, const void *src, int64_t nbytes, cj_error *err);
cj_status cj_cuda_download(int dev, void *dst, uint64_t src, int64_t nbytes, cj_error *err);
/* Waits for all work on the device; reports errors of earlier launches. */
cj_status cj_cuda_synchronize(int dev, cj_error *err);

/* ---- programs: a plan's kernels loaded on one device ------------------------- */

typedef struct cj_cuda_program cj_cuda_program;

/* Emits PTX for `plan` (for the device's compute capability, at most
 * sm_90, or $CJIT_CUDA_ARCH), loads it, and copies from the plan what a
 * launch needs (the plan is not referenced afterwards).  The caller owns
 * the result (cj_cuda_program_free). */
cj_cuda_program *cj_cuda_program_new(const cj_plan *plan, int dev, cj_error *err);
void cj_cuda_program_free(cj_cuda_program *p);
int cj_cuda_program_device(const cj_cuda_program *p);
/* Bytes of PTX the program was loaded from. */
int64_t cj_cuda_program_ptx_bytes(const cj_cuda_program *p);

/* Runs the kernels in order on device addresses: params[i], arrays[i] and
 * outputs[i] as in cj_executable_run.  Allocates the arena for the call,
 * and returns once the device has finished (errors of the kernels are
 * reported here).  A loop asks poll (may be NULL) whether to stop at each
 * iteration, as on the CPU (cj_runtime_poll); a stop is CJ_ERR_CANCELLED,
 * after the launches already queued have finished. */
cj_status cj_cuda_program_run(cj_cuda_program *p, const uint64_t *params, const uint64_t *arrays,
                              const uint64_t *outputs, const cj_run_poll *poll, cj_error *err);

#endif
