/* cuda_loops.c - control flow on a GPU: the host runs the loop (or picks
 * the branch) and launches the bodies' kernels, on device addresses, where
 * loops_rt.c calls the bodies' code on host pointers.  Where everything
 * lives is the same (loops.h: the workspace, its spares and dead results):
 *
 * scan:  iteration i reads the carries from where iteration i-1 wrote them
 *        (iteration 0: the initial values in place) and writes the next
 *        into the other of the result's buffer and the workspace's spare,
 *        chosen so that the last iteration writes the result's; row i of
 *        each xs and ys by address offset; its index is a pointer into the
 *        program's iota (int32 0, 1, ... on the device): no upload per
 *        iteration, and no wait, so the launches of every iteration queue
 *        up on the stream.
 * while: the condition's bool is downloaded after each run of the
 *        condition (the one wait per iteration), then the body runs; the
 *        final carries are copied on the device into the results when the
 *        trip count's parity left them in the spare.
 * cond:  the branch index is downloaded (one wait), clamped, and that
 *        branch's kernels are launched.
 *
 * Every iteration of a scan or while asks the run's poll whether to stop
 * (Ctrl-C), as loops_rt.c does every few.  loops_rt.c is not shared: its
 * speed comes from host-side things a GPU run has no use for (slot arrays
 * bound once, a body's one function), while a GPU iteration costs its
 * launches. */
#include <stdlib.h>

#include "cuda_program.h"

/* Where result k of L lives in this call. */
static uint64_t result_at(const cj_cuda_loop *L, const uint64_t *slots, int k) {
    return L->out_buf[k] >= 0 ? slots[L->out_buf[k]] : slots[L->work_buf] + (uint64_t)L->dead_offset[k];
}

/* The argument lists of a body run: params, outputs, and slots with room
 * for the largest body's buffers; one allocation, freed by the caller. */
static uint64_t *lists(const cj_cuda_loop *L, int nparams, int noutputs, uint64_t **outputs, uint64_t **slots) {
    int most = 0;
    for (int j = 0; j < L->ngraphs; j++)
        if (L->bodies[j].nbuffers > most) most = L->bodies[j].nbuffers;
    uint64_t *a = calloc((size_t)nparams + (size_t)noutputs + (size_t)most + 1, sizeof *a);
    if (!a) return NULL;
    *outputs = a + nparams;
    *slots = *outputs + noutputs;
    return a;
}

static cj_status run_scan(int dev, const cj_cuda_loop *L, const uint64_t *slots, cj_cuda_body_runner *run_body,
                          const cj_run_poll *poll, cj_error *err) {
    int nc = L->ncarry, nx = L->nxs, nk = L->nconsts, ny = L->nys;
    int64_t n = L->length;
    uint64_t work = slots[L->work_buf], *outputs, *body_slots;
    uint64_t *params = lists(L, 1 + nc + nx + nk, nc + ny, &outputs, &body_slots);
    if (!params) return cj_error_set(err, CJ_ERR_MEMORY, "scan: out of memory");
    for (int j = 0; j < nk; j++) params[1 + nc + nx + j] = slots[L->in_buf[nc + nx + j]];
    cj_status st = CJ_OK;
    int64_t next_poll = 0;
    for (int c = 0; n == 0 && c < nc && st == CJ_OK; c++) /* the carries come out as they went in */
        st = cj_cuda_copy(result_at(L, slots, c), slots[L->in_buf[c]], L->result_bytes[c], err);
    for (int64_t it = 0; it < n && st == CJ_OK; it++) {
        int64_t i = L->reverse ? n - 1 - it : it;
        params[0] = L->iota + (uint64_t)i * sizeof(int32_t);
        bool last_parity = ((n - 1 - it) & 1) == 0; /* this iteration writes the results' own buffers */
        for (int c = 0; c < nc; c++) {
            params[1 + c] = it == 0 ? slots[L->in_buf[c]] : outputs[c];
            outputs[c] = last_parity ? result_at(L, slots, c) : work + (uint64_t)L->spare_offset[c];
        }
        for (int x = 0; x < nx; x++) params[1 + nc + x] = slots[L->in_buf[nc + x]] + (uint64_t)(i * L->xs_row[x]);
        for (int y = 0; y < ny; y++)
            outputs[nc + y] = result_at(L, slots, nc + y) + (uint64_t)(i * (L->result_bytes[nc + y] / n));
        st = run_body(dev, &L->bodies[0], body_slots, params, outputs, work, poll, err);
        if (st == CJ_OK && cj_runtime_poll(poll, &next_poll))
            st = cj_error_set(err, CJ_ERR_CANCELLED, "run: stopped in a scan on the GPU");
    }
    free(params);
    return st;
}

static cj_status run_while(int dev, const cj_cuda_loop *L, const uint64_t *slots, cj_cuda_body_runner *run_body,
                           const cj_run_poll *poll, cj_error *err) {
    int nc = L->ncarry, nk = L->nconsts;
    uint64_t work = slots[L->work_buf], pred = work + (uint64_t)L->pred_offset, *outputs, *body_slots;
    uint64_t *params = lists(L, nc + nk, nc, &outputs, &body_slots);
    if (!params) return cj_error_set(err, CJ_ERR_MEMORY, "while: out of memory");
    for (int j = 0; j < nk; j++) params[nc + j] = slots[L->in_buf[nc + j]];
    for (int c = 0; c < nc; c++) params[c] = slots[L->in_buf[c]];
    int where = 0; /* the carries are in: 0 the inputs, 1 the results, 2 the spares */
    cj_status st;
    int64_t next_poll = 0;
    for (;;) {
        uint8_t go = 0;
        if ((st = run_body(dev, &L->bodies[0], body_slots, params, &pred, work, poll, err)) != CJ_OK ||
            (st = cj_cuda_read(&go, pred, 1, err)) != CJ_OK || !go)
            break;
        int to = where == 1 ? 2 : 1;
        for (int c = 0; c < nc; c++)
            outputs[c] = to == 1 ? result_at(L, slots, c) : work + (uint64_t)L->spare_offset[c];
        if ((st = run_body(dev, &L->bodies[1], body_slots, params, outputs, work, poll, err)) != CJ_OK) break;
        for (int c = 0; c < nc; c++) params[c] = outputs[c];
        where = to;
        if (cj_runtime_poll(poll, &next_poll)) {
            st = cj_error_set(err, CJ_ERR_CANCELLED, "run: stopped in a while loop on the GPU");
            break;
        }
    }
    for (int c = 0; st == CJ_OK && where != 1 && c < nc; c++)
        st = cj_cuda_copy(result_at(L, slots, c), params[c], L->result_bytes[c], err);
    free(params);
    return st;
}

static cj_status run_cond(int dev, const cj_cuda_loop *L, const uint64_t *slots, cj_cuda_body_runner *run_body,
                          const cj_run_poll *poll, cj_error *err) {
    int no = L->ncarry, nk = L->nconsts, nr = L->nresults;
    int32_t index = 0;
    if (cj_cuda_read(&index, slots[L->in_buf[0]], sizeof index, err) != CJ_OK) return err->status;
    int branch = index < 0 ? 0 : index >= L->ngraphs ? L->ngraphs - 1 : index; /* clamped, as lax.switch */
    uint64_t *outputs, *body_slots;
    uint64_t *params = lists(L, no + nk, nr, &outputs, &body_slots);
    if (!params) return cj_error_set(err, CJ_ERR_MEMORY, "cond: out of memory");
    for (int j = 0; j < no + nk; j++) params[j] = slots[L->in_buf[1 + j]];
    for (int r = 0; r < nr; r++) outputs[r] = result_at(L, slots, r);
    cj_status st = run_body(dev, &L->bodies[branch], body_slots, params, outputs, slots[L->work_buf], poll, err);
    free(params);
    return st;
}

/* See cuda_program.h. */
cj_status cj_cuda_loop_run(int dev, const cj_cuda_loop *L, const uint64_t *slots, cj_cuda_body_runner *run_body,
                           const cj_run_poll *poll, cj_error *err) {
    if (L->op == CJ_OP_SCAN) return run_scan(dev, L, slots, run_body, poll, err);
    if (L->op == CJ_OP_WHILE) return run_while(dev, L, slots, run_body, poll, err);
    if (L->op == CJ_OP_COND) return run_cond(dev, L, slots, run_body, poll, err);
    return cj_error_set(err, CJ_ERR_INTERNAL, "cuda: %s is not a loop", cj_op_name(L->op));
}
