/* loops_rt.c - running control flow: the real loop (or branch) around a
 * region's compiled bodies (loops.h says where everything lives).
 *
 * scan:  iteration i reads the carries from where iteration i-1 wrote them
 *        (iteration 0: the initial values, read in place), row i of each
 *        xs by pointer, and writes the new carries into the other of two
 *        buffers and row i of each stacked ys in place.  The two buffers
 *        are the result's own and a spare in the workspace, chosen so that
 *        the last iteration writes the result's: no copy at the end.
 * while: the same, with the condition run first each time; the final
 *        carries are copied into the results when the trip count's parity
 *        left them in the spare (one copy per call).
 * cond:  the branch index, clamped to the branches, picks the body that
 *        reads the operands and writes the results.
 * Every body's temporaries are at the start of the workspace, reused by
 * every iteration.  A body's slot array lives as long as the loop: after
 * the first iteration only the slots at its parameters and outputs are
 * bound again (runtime.c), and the clock is read for Ctrl-C only every
 * poll_stride iterations.  A body compiled as one function (body_fn.c)
 * does better where an iteration's binding repeats: a scan of carries only
 * keeps a slot array per parity, a while loop one per place of its
 * carries, and a run on an array bound before is one call. */
#include <stdlib.h>
#include <string.h>

#include "executable.h"
#include "loops.h"
#include "stats.h"

#define MAX_ARGS 256 /* on the stack; more go to the heap */

typedef struct {
    void **params, **outputs;
    void *small[2 * MAX_ARGS];
    void *heap;
} arg_lists;

static bool args_init(arg_lists *a, int nparams, int noutputs) {
    a->heap = NULL;
    if (nparams + noutputs <= 2 * MAX_ARGS) {
        a->params = a->small;
    } else if (!(a->params = a->heap = malloc(sizeof(void *) * (size_t)(nparams + noutputs)))) {
        return false;
    }
    a->outputs = a->params + nparams;
    return true;
}

/* One body's buffer slots, kept from one iteration to the next so that
 * only those at parameters and outputs are bound again (runtime.c); and
 * how many of its runs its one function made, counted when the loop ends. */
typedef struct {
    void **slots;
    void *small[MAX_ARGS];
    bool bound;
    int64_t one_function_runs;
} body_slots;

/* x NULL: slots that will not be used (none allocated). */
static bool slots_init(body_slots *s, const cj_executable *x) {
    s->bound = false;
    s->one_function_runs = 0;
    if (!x) return (s->slots = s->small) != NULL;
    s->slots = x->plan.nbuffers <= MAX_ARGS ? s->small : malloc(sizeof(void *) * (size_t)x->plan.nbuffers);
    return s->slots != NULL;
}

static void slots_free(body_slots *s) {
    if (s->one_function_runs) cj_stats_one_function_runs(s->one_function_runs);
    if (s->slots != s->small) free(s->slots);
}

static cj_status run_in(cj_body_runner *run_body, cj_executable *x, body_slots *s, void *const *params,
                        void *const *outputs, char *work, cj_error *err) {
    cj_status st = run_body(x, s->slots, s->bound, params, outputs, work, NULL, err);
    s->bound = true;
    s->one_function_runs += x->one_function != NULL;
    return st;
}

/* Iterations between two looks at the clock for Ctrl-C: a clock read took
 * as long as a small body's whole iteration, so a body of w units of work
 * (flops + bytes, as cost_analysis counts them) looks every
 * POLL_WORK / w iterations (at most 1024), about a millisecond apart. */
#define POLL_WORK ((int64_t)1 << 20)
static int64_t poll_stride(const cj_executable *x, const cj_executable *y) {
    int64_t w = x->flops + x->bytes_accessed + (y ? y->flops + y->bytes_accessed : 0);
    int64_t stride = POLL_WORK / (w > 0 ? w : 1);
    return stride < 1 ? 1 : stride > 1024 ? 1024 : stride;
}

/* Counts an iteration down to the next look at the clock (every stride-th,
 * the first included: a countdown, as a division per iteration showed in
 * a small body's profile). */
static bool poll_due(int64_t *until, int64_t stride) {
    if (--*until > 0) return false;
    *until = stride;
    return true;
}

static int64_t nbytes_of(const cj_shape *s, cj_dtype dt) { return cj_shape_numel(s) * cj_dtype_size(dt); }

/* Where result k of L lives in this call. */
static char *result_at(const cj_loop_plan *L, void *const *slots, int k) {
    return L->out_buf[k] >= 0 ? slots[L->out_buf[k]] : (char *)slots[L->work_buf] + L->dead_offset[k];
}

/* A scan of carries only (no xs, no ys) whose body is one function
 * (body_fn.c): from the second iteration on, where an iteration reads and
 * writes its carries depends only on its parity, so two slot arrays, each
 * bound by the body's run on it (iterations 1 and 2), serve every later
 * iteration, which is then one call of the body's function. */
static bool parity_slots(const cj_body *b, const cj_executable *x) {
    return x->one_function && b->nxs == 0 && b->nys == 0;
}

static cj_status run_scan(const cj_plan *p, const cj_loop_plan *L, void *const *slots, const cj_run_poll *poll,
                          cj_body_runner *run_body, cj_error *err) {
    const cj_body *b = L->body;
    int nc = b->ncarry, nx = b->nxs, nk = b->nconsts, ny = b->nys;
    char *work = slots[L->work_buf];
    cj_executable *x0 = L->exe[0];
    bool by_parity = parity_slots(b, x0);
    arg_lists a;
    body_slots bs[3]; /* iteration 0 (every iteration, unless by_parity); odd, even ones */
    for (int q = 0; q < 3; q++)
        if (!slots_init(&bs[q], q == 0 || by_parity ? x0 : NULL)) {
            while (q >= 0) slots_free(&bs[q--]);
            return cj_error_set(err, CJ_ERR_MEMORY, "scan: out of memory");
        }
    if (!args_init(&a, 1 + nc + nx + nk, nc + ny)) {
        for (int q = 0; q < 3; q++) slots_free(&bs[q]);
        return cj_error_set(err, CJ_ERR_MEMORY, "scan: out of memory");
    }
    int32_t index = 0;
    a.params[0] = &index;
    for (int j = 0; j < nk; j++) a.params[1 + nc + nx + j] = slots[L->in_buf[nc + nx + j]];
    int64_t n = b->length;
    cj_status st = CJ_OK;
    int64_t *row = malloc(sizeof(int64_t) * (size_t)(nx + ny + 1)); /* bytes of a row of each xs, each ys */
    if (!row) {
        st = cj_error_set(err, CJ_ERR_MEMORY, "scan: out of memory");
        goto done;
    }
    for (int x = 0; n > 0 && x < nx; x++) row[x] = p->buffers[L->in_buf[nc + x]].nbytes / n;
    for (int y = 0; n > 0 && y < ny; y++) row[nx + y] = nbytes_of(&b->result_shape[nc + y], b->result_dtype[nc + y]) / n;
    if (n == 0) { /* the carries come out as they went in */
        for (int c = 0; c < nc; c++)
            memmove(result_at(L, slots, c), slots[L->in_buf[c]], (size_t)nbytes_of(&b->result_shape[c], b->result_dtype[c]));
        goto done;
    }
    int64_t next_poll = 0, stride = poll_stride(L->exe[0], NULL), until_poll = 1;
    for (int64_t it = 0; it < n; it++) {
        int64_t i = b->reverse ? n - 1 - it : it;
        index = (int32_t)i;
        body_slots *s = by_parity && it > 0 ? &bs[1 + (it & 1)] : &bs[0];
        if (by_parity && it > 2) { /* s is bound as this iteration needs it (by iteration it - 2) */
            x0->one_function(0, 1, s->slots);
            s->one_function_runs++;
        } else {
            bool last_parity = ((n - 1 - it) & 1) == 0; /* this iteration writes the results' own buffers */
            for (int c = 0; c < nc; c++) {
                char *own = result_at(L, slots, c), *spare = work + L->spare_offset[c];
                a.params[1 + c] = it == 0 ? slots[L->in_buf[c]] : a.outputs[c];
                a.outputs[c] = last_parity ? own : spare;
            }
            for (int x = 0; x < nx; x++) a.params[1 + nc + x] = (char *)slots[L->in_buf[nc + x]] + i * row[x];
            for (int y = 0; y < ny; y++) a.outputs[nc + y] = result_at(L, slots, nc + y) + i * row[nx + y];
            if ((st = run_in(run_body, x0, s, (void *const *)a.params, (void *const *)a.outputs, work, err)) != CJ_OK)
                break;
        }
        if (poll_due(&until_poll, stride) && cj_runtime_poll(poll, &next_poll)) {
            cj_stats_cancelled();
            st = cj_error_set(err, CJ_ERR_CANCELLED, "run: stopped in a scan");
            break;
        }
    }
done:
    free(row);
    free(a.heap);
    for (int q = 0; q < 3; q++) slots_free(&bs[q]);
    return st;
}

static cj_status run_while(const cj_loop_plan *L, void *const *slots, const cj_run_poll *poll, cj_body_runner *run_body,
                           cj_error *err) {
    const cj_body *b = L->body;
    int nc = b->ncarry, nk = b->nconsts;
    char *work = slots[L->work_buf];
    bool *pred = (bool *)(work + L->pred_offset);
    arg_lists a;
    /* Where the condition and the body read and write depends only on where
     * the carries are (`where`, below): when both are one function, a slot
     * array per place, bound by the first run there, serves every later run
     * there, which is then one call.  Otherwise one array each. */
    bool by_place = L->exe[0]->one_function && L->exe[1]->one_function;
    body_slots cs[3], bs[3];
    bool ok = args_init(&a, nc + nk, nc + 1);
    for (int q = 0; q < 3; q++) {
        ok &= slots_init(&cs[q], q == 0 || by_place ? L->exe[0] : NULL);
        ok &= slots_init(&bs[q], q == 0 || by_place ? L->exe[1] : NULL);
    }
    if (!ok) {
        free(a.heap);
        for (int q = 0; q < 3; q++) slots_free(&cs[q]), slots_free(&bs[q]);
        return cj_error_set(err, CJ_ERR_MEMORY, "while: out of memory");
    }
    for (int j = 0; j < nk; j++) a.params[nc + j] = slots[L->in_buf[nc + j]];
    for (int c = 0; c < nc; c++) a.params[c] = slots[L->in_buf[c]];
    int where = 0; /* the carries are in: 0 the inputs, 1 the results, 2 the spares */
    cj_status st = CJ_OK;
    int64_t next_poll = 0, stride = poll_stride(L->exe[0], L->exe[1]), until_poll = 1;
    for (;;) {
        void *pred_out = pred;
        body_slots *c_at = &cs[by_place ? where : 0], *b_at = &bs[by_place ? where : 0];
        if (by_place && c_at->bound) { /* bound for this place by an earlier run */
            L->exe[0]->one_function(0, 1, c_at->slots);
            c_at->one_function_runs++;
        } else if ((st = run_in(run_body, L->exe[0], c_at, (void *const *)a.params, &pred_out, work, err)) != CJ_OK) {
            break;
        }
        if (!*pred) break;
        int to = where == 1 ? 2 : 1;
        for (int c = 0; c < nc; c++) a.outputs[c] = to == 1 ? result_at(L, slots, c) : work + L->spare_offset[c];
        if (by_place && b_at->bound) {
            L->exe[1]->one_function(0, 1, b_at->slots);
            b_at->one_function_runs++;
        } else if ((st = run_in(run_body, L->exe[1], b_at, (void *const *)a.params, (void *const *)a.outputs, work,
                                err)) != CJ_OK) {
            break;
        }
        for (int c = 0; c < nc; c++) a.params[c] = a.outputs[c];
        where = to;
        if (poll_due(&until_poll, stride) && cj_runtime_poll(poll, &next_poll)) {
            cj_stats_cancelled();
            st = cj_error_set(err, CJ_ERR_CANCELLED, "run: stopped in a while loop");
            break;
        }
    }
    if (st == CJ_OK && where != 1)
        for (int c = 0; c < nc; c++)
            memmove(result_at(L, slots, c), a.params[c], (size_t)nbytes_of(&b->result_shape[c], b->result_dtype[c]));
    free(a.heap);
    for (int q = 0; q < 3; q++) slots_free(&cs[q]), slots_free(&bs[q]);
    return st;
}

static cj_status run_cond(const cj_loop_plan *L, void *const *slots, cj_body_runner *run_body, cj_error *err) {
    const cj_body *b = L->body;
    int no = b->ncarry, nk = b->nconsts, nr = b->nresults;
    arg_lists a;
    int32_t index = *(const int32_t *)slots[L->in_buf[0]];
    int branch = index < 0 ? 0 : index >= b->ngraphs ? b->ngraphs - 1 : index; /* clamped, as lax.switch */
    body_slots bs;
    if (!slots_init(&bs, L->exe[branch])) return cj_error_set(err, CJ_ERR_MEMORY, "cond: out of memory");
    if (!args_init(&a, no + nk, nr)) {
        slots_free(&bs);
        return cj_error_set(err, CJ_ERR_MEMORY, "cond: out of memory");
    }
    for (int j = 0; j < no + nk; j++) a.params[j] = slots[L->in_buf[1 + j]];
    for (int r = 0; r < nr; r++) a.outputs[r] = result_at(L, slots, r);
    cj_status st = run_in(run_body, L->exe[branch], &bs, (void *const *)a.params, (void *const *)a.outputs,
                          slots[L->work_buf], err);
    free(a.heap);
    slots_free(&bs);
    return st;
}

/* See executable.h. */
cj_status cj_loop_run(const cj_plan *p, const cj_kernel *k, void *const *slots, const cj_run_poll *poll,
                      cj_body_runner *run_body, cj_error *err) {
    const cj_loop_plan *L = k->loop;
    for (int j = 0; j < L->body->ngraphs; j++)
        if (!L->exe[j]) return cj_error_set(err, CJ_ERR_INTERNAL, "run: a loop body has no code");
    if (L->body->op == CJ_OP_SCAN) return run_scan(p, L, slots, poll, run_body, err);
    if (L->body->op == CJ_OP_WHILE) return run_while(L, slots, poll, run_body, err);
    if (L->body->op == CJ_OP_COND) return run_cond(L, slots, run_body, err);
    return cj_error_set(err, CJ_ERR_INTERNAL, "run: %s is not a loop", cj_op_name(L->body->op));
}
