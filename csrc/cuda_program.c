/* cuda_program.c - a plan's kernels loaded on one GPU, and a run of them.
 *
 * A program is the PTX of a plan (jit_cuda.c's cj_cuda_ptx: every kernel,
 * and the kernels of every loop body, in one module) loaded on a device,
 * and a copy of the plan as launches (cj_cuda_plan, cuda_program.h): a
 * kernel's function and parameters, or, for a scan, while or cond kernel,
 * the loop the host runs around its bodies' launches (cuda_loops.c), each
 * body a cj_cuda_plan of its own.  Nothing of the cj_plan is referenced
 * once the program is made.
 *
 * A run allocates the outer plan's arena, binds every buffer to a device
 * address (as runtime.c binds host pointers) and launches the kernels in
 * order on the default stream.  A loop's workspace is a temporary of the
 * arena, so its bodies' buffers are bound inside it at every iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "cuda_program.h"
#include "loops.h"

struct cj_cuda_program {
    int dev;
    void *module;
    cj_cuda_plan plan;
    uint64_t iota;              /* int32 0, 1, ...: the index of every scan's iterations */
    int64_t ptx_bytes;
};

static void plan_free(cj_cuda_plan *p);

static void loop_free(cj_cuda_loop *L) {
    if (!L) return;
    for (int j = 0; L->bodies && j < L->ngraphs; j++) plan_free(&L->bodies[j]);
    free(L->bodies);
    free(L->in_buf);
    free(L->out_buf);
    free(L->spare_offset);
    free(L->dead_offset);
    free(L->result_bytes);
    free(L->xs_row);
    free(L);
}

static void plan_free(cj_cuda_plan *p) {
    for (int i = 0; p->kernels && i < p->nkernels; i++) {
        free(p->kernels[i].bufs);
        loop_free(p->kernels[i].loop);
    }
    free(p->kernels);
    free(p->buffers);
    memset(p, 0, sizeof *p);
}

/* The longest scan of plan p, its loops' bodies included. */
static int64_t longest_scan(const cj_plan *p) {
    int64_t n = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cj_loop_plan *L = p->kernels[k].loop;
        if (!L) continue;
        if (L->body->op == CJ_OP_SCAN && L->body->length > n) n = L->body->length;
        for (int j = 0; j < L->body->ngraphs; j++) {
            int64_t m = longest_scan(L->plans[j]);
            if (m > n) n = m;
        }
    }
    return n;
}

static int64_t *copy64(const int64_t *src, int n) {
    int64_t *d = calloc((size_t)n + 1, sizeof *d);
    if (d && src && n > 0) memcpy(d, src, sizeof *d * (size_t)n);
    return d;
}

static int *copy_int(const int *src, int n) {
    int *d = calloc((size_t)n + 1, sizeof *d);
    if (d && src && n > 0) memcpy(d, src, sizeof *d * (size_t)n);
    return d;
}

static cj_status plan_load(cj_cuda_program *prog, const cj_plan *plan, const char *prefix, cj_cuda_plan *out,
                           cj_error *err);

/* The loop kernel k of `plan` (its bodies named "<prefix>_k<k>_b<j>"). */
static cj_status loop_load(cj_cuda_program *prog, const cj_plan *plan, int k, const char *prefix, cj_cuda_loop **out,
                           cj_error *err) {
    const cj_loop_plan *src = plan->kernels[k].loop;
    const cj_body *b = src->body;
    if (b->op != CJ_OP_SCAN && b->op != CJ_OP_WHILE && b->op != CJ_OP_COND)
        return cj_error_set(err, CJ_ERR_VALUE, "cuda: %s regions do not run on a GPU; compile this function for the CPU",
                            cj_op_name(b->op));
    cj_cuda_loop *L = *out = calloc(1, sizeof *L);
    if (!L) return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    L->op = b->op;
    L->ngraphs = b->ngraphs;
    L->ncarry = b->ncarry;
    L->nxs = b->nxs;
    L->nconsts = b->nconsts;
    L->nys = b->nys;
    L->nresults = b->nresults;
    L->length = b->length;
    L->reverse = b->reverse;
    L->work_buf = src->work_buf;
    L->pred_offset = src->pred_offset;
    L->iota = prog->iota;
    L->bodies = calloc((size_t)b->ngraphs + 1, sizeof *L->bodies);
    L->in_buf = copy_int(src->in_buf, src->ninputs);
    L->out_buf = copy_int(src->out_buf, b->nresults);
    L->spare_offset = copy64(src->spare_offset, b->ncarry);
    L->dead_offset = copy64(src->dead_offset, b->nresults);
    L->result_bytes = copy64(NULL, b->nresults);
    L->xs_row = copy64(NULL, b->nxs);
    if (!L->bodies || !L->in_buf || !L->out_buf || !L->spare_offset || !L->dead_offset || !L->result_bytes || !L->xs_row)
        return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    for (int r = 0; r < b->nresults; r++)
        L->result_bytes[r] = cj_shape_numel(&b->result_shape[r]) * cj_dtype_size(b->result_dtype[r]);
    for (int x = 0; b->op == CJ_OP_SCAN && b->length > 0 && x < b->nxs; x++)
        L->xs_row[x] = plan->buffers[src->in_buf[b->ncarry + x]].nbytes / b->length;
    for (int j = 0; j < b->ngraphs; j++) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s_k%d_b%d", prefix, k, j);
        if (plan_load(prog, src->plans[j], inner, &L->bodies[j], err) != CJ_OK) return err->status;
    }
    return CJ_OK;
}

/* Copies `plan` into out and looks up its kernels ("<prefix>_k<i>") in
 * the program's module. */
static cj_status plan_load(cj_cuda_program *prog, const cj_plan *plan, const char *prefix, cj_cuda_plan *out,
                           cj_error *err) {
    out->nkernels = plan->nkernels;
    out->nbuffers = plan->nbuffers;
    out->arena_bytes = plan->arena_bytes;
    out->kernels = calloc((size_t)plan->nkernels + 1, sizeof *out->kernels);
    out->buffers = calloc((size_t)plan->nbuffers + 1, sizeof *out->buffers);
    if (!out->kernels || !out->buffers) return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    if (plan->nbuffers > 0) memcpy(out->buffers, plan->buffers, sizeof *out->buffers * (size_t)plan->nbuffers);
    for (int i = 0; i < plan->nkernels; i++) {
        const cj_kernel *k = &plan->kernels[i];
        cj_cuda_kernel *L = &out->kernels[i];
        if (k->loop) {
            if (loop_load(prog, plan, i, prefix, &L->loop, err) != CJ_OK) return err->status;
            continue;
        }
        char name[320];
        if (!(L->bufs = calloc((size_t)k->nexprs + k->nalso + 2, sizeof(int))))
            return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
        L->nbufs = cj_codegen_kernel_buffers(k, L->bufs);
        L->points = cj_codegen_gpu_points(plan, i, &L->serial);
        L->out_buffer = k->out_buffer;
        L->init_points = cj_shape_numel(&plan->buffers[k->out_buffer].shape);
        snprintf(name, sizeof name, "%s_k%d", prefix, i);
        if (cj_cuda_function(prog->module, name, &L->fn, err) != CJ_OK) return err->status;
        if (cj_kernel_needs_identity(k)) {
            snprintf(name, sizeof name, "%s_k%d_init", prefix, i);
            if (cj_cuda_function(prog->module, name, &L->init, err) != CJ_OK) return err->status;
        }
    }
    return CJ_OK;
}

/* The scans' index on the device: int32 0, 1, ..., n-1, uploaded once, so
 * that an iteration passes its body a pointer into it (no upload per
 * iteration). */
static cj_status iota_upload(cj_cuda_program *p, int64_t n, cj_error *err) {
    if (n <= 0) return CJ_OK;
    int32_t *host = malloc(sizeof(int32_t) * (size_t)n);
    if (!host) return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    for (int64_t i = 0; i < n; i++) host[i] = (int32_t)i;
    cj_status st = cj_cuda_alloc(p->dev, n * (int64_t)sizeof(int32_t), &p->iota, err);
    if (st == CJ_OK) st = cj_cuda_upload(p->dev, p->iota, host, n * (int64_t)sizeof(int32_t), err);
    free(host);
    return st;
}

/* See jit_cuda.h. */
void cj_cuda_program_free(cj_cuda_program *p) {
    if (!p) return;
    cj_cuda_module_unload(p->dev, p->module);
    cj_cuda_free(p->dev, p->iota);
    plan_free(&p->plan);
    free(p);
}

/* See jit_cuda.h. */
cj_cuda_program *cj_cuda_program_new(const cj_plan *plan, int dev, cj_error *err) {
    if (cj_cuda_use(dev, err) != CJ_OK) return NULL;
    char arch[32];
    const char *forced = getenv("CJIT_CUDA_ARCH");
    if (forced && *forced) {
        snprintf(arch, sizeof arch, "%s", forced);
    } else {
        /* LLVM 19 knows up to sm_90; newer GPUs JIT sm_90 PTX themselves */
        int cc = cj_cuda_capability(dev);
        snprintf(arch, sizeof arch, "sm_%d", cc > 90 ? 90 : cc);
    }
    cj_cuda_program *p = calloc(1, sizeof *p);
    if (!p) return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory"), NULL;
    p->dev = dev;
    char *ptx = cj_cuda_ptx(plan, arch, "cj_cuda", err);
    if (!ptx) goto fail;
    p->ptx_bytes = (int64_t)strlen(ptx);
    cj_status st = cj_cuda_module_load(ptx, arch, &p->module, err);
    free(ptx);
    if (st != CJ_OK || iota_upload(p, longest_scan(plan), err) != CJ_OK ||
        plan_load(p, plan, "cj_cuda", &p->plan, err) != CJ_OK)
        goto fail;
    return p;
fail:
    cj_cuda_program_free(p);
    return NULL;
}

int cj_cuda_program_device(const cj_cuda_program *p) { return p->dev; }
int64_t cj_cuda_program_ptx_bytes(const cj_cuda_program *p) { return p->ptx_bytes; }

/* Points every buffer of p at its device address: a parameter, closed-over
 * array, output, or arena offset, then the buffers that live in another
 * (in-place updates, temporaries in donated arguments; a host may itself
 * live in another), as runtime.c's bind_slots. */
static void bind(const cj_cuda_plan *p, uint64_t *slots, const uint64_t *params, const uint64_t *arrays,
                 const uint64_t *outputs, uint64_t arena) {
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        switch (buf->kind) {
        case CJ_BUF_PARAM: slots[b] = params[buf->slot]; break;
        case CJ_BUF_ARRAY: slots[b] = arrays ? arrays[buf->slot] : 0; break; /* a body has none */
        case CJ_BUF_OUTPUT: slots[b] = outputs[buf->slot]; break;
        case CJ_BUF_TEMP: slots[b] = arena + (uint64_t)buf->offset; break;
        }
    }
    for (int b = 0; b < p->nbuffers; b++) {
        uint64_t offset = 0;
        int host = b;
        while (p->buffers[host].alias_of >= 0) {
            offset += (uint64_t)p->buffers[host].offset;
            host = p->buffers[host].alias_of;
        }
        if (host != b) slots[b] = slots[host] + offset;
    }
}

/* Launches the kernels of p in order on its bound slots; a loop kernel's
 * bodies are launched by the host's loop (cuda_loops.c). */
static cj_status plan_launch(int dev, const cj_cuda_plan *p, const uint64_t *slots, const cj_run_poll *poll,
                             cj_error *err);

/* See cj_cuda_body_runner (cuda_program.h). */
static cj_status run_body(int dev, const cj_cuda_plan *body, uint64_t *slots, const uint64_t *params,
                          const uint64_t *outputs, uint64_t work, const cj_run_poll *poll, cj_error *err) {
    bind(body, slots, params, NULL, outputs, work);
    return plan_launch(dev, body, slots, poll, err);
}

static cj_status plan_launch(int dev, const cj_cuda_plan *p, const uint64_t *slots, const cj_run_poll *poll,
                             cj_error *err) {
    for (int k = 0; k < p->nkernels; k++) {
        const cj_cuda_kernel *L = &p->kernels[k];
        if (L->loop) {
            if (cj_cuda_loop_run(dev, L->loop, slots, run_body, poll, err) != CJ_OK) return err->status;
            continue;
        }
        if (L->init && cj_cuda_launch(dev, L->init, L->init_points, false, &L->out_buffer, 1, slots, err) != CJ_OK)
            return err->status;
        if (cj_cuda_launch(dev, L->fn, L->points, L->serial, L->bufs, L->nbufs, slots, err) != CJ_OK) return err->status;
    }
    return CJ_OK;
}

/* See jit_cuda.h. */
cj_status cj_cuda_program_run(cj_cuda_program *p, const uint64_t *params, const uint64_t *arrays,
                              const uint64_t *outputs, const cj_run_poll *poll, cj_error *err) {
    uint64_t arena = 0;
    uint64_t *slots = calloc((size_t)p->plan.nbuffers + 1, sizeof(uint64_t));
    if (!slots) return cj_error_set(err, CJ_ERR_MEMORY, "cuda: out of memory");
    if (cj_cuda_alloc(p->dev, p->plan.arena_bytes, &arena, err) == CJ_OK) { /* makes the device current */
        bind(&p->plan, slots, params, arrays, outputs, arena);
        /* kernels run in order on the default stream: each sees its inputs done */
        cj_status st = plan_launch(p->dev, &p->plan, slots, poll, err);
        /* keeps the arena alive exactly as long as the kernels use it (a
         * stopped loop's queued launches included) */
        cj_error sync_err = {0};
        if (st == CJ_OK) cj_cuda_synchronize(p->dev, err);
        else if (st == CJ_ERR_CANCELLED) cj_cuda_synchronize(p->dev, &sync_err);
    }
    cj_cuda_free(p->dev, arena);
    free(slots);
    return err->status;
}
