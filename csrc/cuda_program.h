/* cuda_program.h - what the device runtime's files share: the driver calls
 * a program makes once a device is current (jit_cuda.c), a plan's kernels
 * as launches (cuda_program.c) and the loops the host runs around their
 * bodies (cuda_loops.c).  jit_cuda.h is the public side.
 *
 * Every call below expects the program's device to be current on the
 * calling thread (cj_cuda_use), as it is for the whole of a run, and works
 * on the default stream: kernels, device-to-device copies and downloads
 * run in the order they are issued. */
#ifndef CJ_CUDA_PROGRAM_H
#define CJ_CUDA_PROGRAM_H

#include "jit_cuda.h"

/* ---- the driver, for a current device (jit_cuda.c) ------------------------- */

/* Makes device dev's primary context current on this thread. */
cj_status cj_cuda_use(int dev, cj_error *err);
/* Loads NUL-terminated PTX (for `arch`, named in errors); unloads it. */
cj_status cj_cuda_module_load(const char *ptx, const char *arch, void **module, cj_error *err);
void cj_cuda_module_unload(int dev, void *module);
/* The kernel `name` of a loaded module. */
cj_status cj_cuda_function(void *module, const char *name, void **fn, cj_error *err);
/* The compute capability (major * 10 + minor) of device dev. */
int cj_cuda_capability(int dev);
/* Launches fn on dev over `points` points (one thread when serial) with
 * the addresses slots[bufs[0..n)] as its parameters. */
cj_status cj_cuda_launch(int dev, void *fn, int64_t points, bool serial, const int *bufs, int n,
                         const uint64_t *slots, cj_error *err);
/* nbytes from src to dst, both on the device, after the work before it. */
cj_status cj_cuda_copy(uint64_t dst, uint64_t src, int64_t nbytes, cj_error *err);
/* nbytes from the device to the host, once the work before it is done. */
cj_status cj_cuda_read(void *dst, uint64_t src, int64_t nbytes, cj_error *err);

/* ---- a plan's kernels as launches (cuda_program.c) -------------------------- */

struct cj_cuda_loop;

/* Kernel k of a plan on the device: its function (and the identity fill
 * of a reduction's output, init), or a loop the host runs. */
typedef struct {
    void *fn, *init;            /* init: NULL unless the kernel accumulates */
    int nbufs, *bufs;           /* parameters: plan buffer indices */
    int64_t points;             /* threads' work (cj_codegen_gpu_points) */
    bool serial;
    int64_t init_points;        /* elements of the output */
    int out_buffer;
    struct cj_cuda_loop *loop;  /* a scan, while or cond: no function of its own */
} cj_cuda_kernel;

/* A plan (the outer one or a loop body's), copied from the cj_plan: what
 * binding its buffers and launching its kernels needs. */
typedef struct cj_cuda_plan {
    int nkernels;
    cj_cuda_kernel *kernels;
    int nbuffers;
    cj_buffer *buffers;         /* copies (kind, slot, offset, alias_of) */
    int64_t arena_bytes;
} cj_cuda_plan;

/* ---- loops on the device (cuda_loops.c) ---------------------------------------- */

/* A loop kernel: its cj_loop_plan and cj_body (loops.h, regions.h), copied. */
typedef struct cj_cuda_loop {
    cj_op op;                   /* CJ_OP_SCAN, CJ_OP_WHILE or CJ_OP_COND */
    int ngraphs, ncarry, nxs, nconsts, nys, nresults;
    int64_t length;             /* scan: the trip count */
    bool reverse;
    cj_cuda_plan *bodies;       /* per body graph */
    int *in_buf;                /* outer buffer of each region input */
    int *out_buf;               /* outer buffer of each result, -1: none reads it */
    int work_buf;
    int64_t *spare_offset;      /* per carry */
    int64_t *dead_offset;       /* per result without a buffer */
    int64_t pred_offset;        /* while: the condition's bool */
    int64_t *result_bytes;      /* per result */
    int64_t *xs_row;            /* per xs: bytes of one row */
    uint64_t iota;              /* scan: the program's int32 0, 1, 2, ... (iteration i reads iota + 4 i) */
} cj_cuda_loop;

/* How a loop runs one of its bodies: binds body's buffers into slots
 * (room for body->nbuffers) from the parameters, outputs and workspace
 * given, and launches its kernels (cuda_program.c passes its runner in, so
 * that cuda_loops.c stays below it). */
typedef cj_status cj_cuda_body_runner(int dev, const cj_cuda_plan *body, uint64_t *slots, const uint64_t *params,
                                      const uint64_t *outputs, uint64_t work, const cj_run_poll *poll,
                                      cj_error *err);

/* Runs loop L on the outer plan's bound slots. */
cj_status cj_cuda_loop_run(int dev, const cj_cuda_loop *L, const uint64_t *slots, cj_cuda_body_runner *run_body,
                           const cj_run_poll *poll, cj_error *err);

#endif
