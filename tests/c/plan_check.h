/* plan_check.h - what test_fuse, test_group, test_memplan and test_autodiff
 * share (each includes it once; everything is static):
 *
 *   checks:       CHECK / CHECK_MSG, counted;
 *   building:     a graph and one error for it, a builder's failure ends
 *                 the test (a mistake in the test, not in the core);
 *   interpreters: a graph evaluated node by node, and a plan run kernel by
 *                 kernel with every buffer where memplan put it (the arena,
 *                 a host's bytes); both round each value to its dtype, so
 *                 a plan whose buffers overlap while live, or whose kernels
 *                 compute something else, gives other numbers;
 *   plan facts:   memplan's and group.c's promises, checked on any plan
 *                 from first principles (see check_plan, check_groups).
 *
 * The interpreters know the ops the tests build (elementwise, movement,
 * reductions, matmul, concatenate); anything else ends the test. */
#ifndef CJ_PLAN_CHECK_H
#define CJ_PLAN_CHECK_H

#include "graph.h"
#include "group.h"
#include "kernel.h"
#include "pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checks ---------------------------------------------------------------- */

static int checks, failures;

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                   \
        }                                                                            \
    } while (0)
#define CHECK(cond) CHECK_MSG(cond, "%s", "")

static inline void die(const char *what) {
    fprintf(stderr, "%s\n", what);
    exit(2);
}

/* ---- building graphs ---------------------------------------------------------- */

typedef struct {
    cj_graph *g;
    cj_error err;
    cj_dtype dt; /* of params and constants */
} builder;

static inline builder start(cj_dtype dt) {
    builder b = {.g = cj_graph_new(), .dt = dt};
    if (!b.g) die("out of memory");
    return b;
}

static inline int ok(builder *b, int id) {
    if (id < 0) {
        fprintf(stderr, "building the test graph failed: %s\n", b->err.message);
        exit(2);
    }
    return id;
}

static inline cj_shape s0(void) { return (cj_shape){0, {0}}; }
static inline cj_shape s1(int64_t a) { return (cj_shape){1, {a}}; }
static inline cj_shape s2(int64_t a, int64_t c) { return (cj_shape){2, {a, c}}; }

static inline int param(builder *b, cj_shape s) { return ok(b, cj_build_param(b->g, &s, b->dt, false, -1, &b->err)); }
static inline int un(builder *b, cj_op op, int x) { return ok(b, cj_build_unary(b->g, op, x, -1, &b->err)); }
static inline int bin(builder *b, cj_op op, int x, int y) { return ok(b, cj_build_binary(b->g, op, x, y, -1, &b->err)); }
/* x op c, c a weak Python float */
static inline int binc(builder *b, cj_op op, int x, double c) {
    cj_shape scalar = s0();
    int k = ok(b, cj_build_constant(b->g, c, (int64_t)c, CJ_FLOAT64, true, &scalar, -1, &b->err));
    return bin(b, op, x, k);
}
static inline int constant(builder *b, double c, cj_shape s) {
    return ok(b, cj_build_constant(b->g, c, (int64_t)c, b->dt, false, &s, -1, &b->err));
}
static inline int reduce(builder *b, cj_op op, int x, uint32_t axes) {
    return ok(b, cj_build_reduce(b->g, op, x, axes, -1, &b->err));
}
static inline int matmul(builder *b, int x, int y) { return ok(b, cj_build_matmul(b->g, x, y, -1, &b->err)); }
static inline int bcast(builder *b, int x, cj_shape to) { return ok(b, cj_build_broadcast(b->g, x, &to, -1, &b->err)); }
static inline int reshape(builder *b, int x, cj_shape to) { return ok(b, cj_build_reshape(b->g, x, &to, -1, &b->err)); }
static inline int transpose2(builder *b, int x) { return ok(b, cj_build_transpose(b->g, x, (const int[]){1, 0}, -1, &b->err)); }
static inline void outputs(builder *b, const int *ids, int n) {
    if (cj_graph_set_outputs(b->g, ids, n, &b->err) != CJ_OK) ok(b, -1);
}
/* A row vector (R,) as (R, C): its value repeated along each row. */
static inline int rows_as_matrix(builder *b, int v, int64_t R, int64_t C) {
    return bcast(b, reshape(b, v, s2(R, 1)), s2(R, C));
}

/* Lowers b's graph with options o (NULL: defaults); a failure ends the test. */
static inline cj_lowered lower_or_die(const char *what, builder *b, const cj_compile_options *o) {
    cj_lowered l;
    cj_error err = {0};
    if (cj_lower(b->g, o, &l, &err) != CJ_OK) {
        fprintf(stderr, "%s: cj_lower: %s\n", what, err.message);
        exit(1);
    }
    return l;
}

/* Fuses g (every node live) and, when `group`, groups the kernels: the
 * plan as those passes leave it, before memplan reorders or merges loops.
 * Free with cj_plan_free. */
static inline cj_plan fuse_only(const cj_graph *g, bool group) {
    cj_plan p;
    memset(&p, 0, sizeof p);
    cj_error err = {0};
    bool *live = malloc(sizeof(bool) * ((size_t)g->nnodes + 1));
    if (!live) die("out of memory");
    for (int i = 0; i < g->nnodes; i++) live[i] = true;
    if (cj_fuse_run(g, live, true, &p, &err) != CJ_OK || (group && cj_group_run(&p, true, &err) != CJ_OK)) {
        fprintf(stderr, "fuse/group: %s\n", err.message);
        exit(1);
    }
    free(live);
    return p;
}

/* ---- a random number generator (xorshift64*), seeded per case ------------------- */

static uint64_t rng_state = 88172645463325252ull;
static inline void rng_seed(uint64_t s) { rng_state = s * 2654435761ull + 88172645463325252ull; }
static inline uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static inline int rng_int(int n) { return (int)(rng_next() % (uint64_t)n); }
static inline double rng_unit(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }

/* ---- one op on scalars, as both interpreters apply it ------------------------- */

static inline double round_to(cj_dtype dt, double v) {
    switch (dt) {
    case CJ_FLOAT32: return (double)(float)v;
    case CJ_FLOAT64: return v;
    case CJ_BOOL: return v != 0;
    case CJ_INT32: return (double)(int32_t)v;
    case CJ_INT64: return (double)(int64_t)v;
    default: die("interpreter: dtype not supported");
    }
    return 0;
}

static inline double apply_op(cj_op op, double a, double b, double c) {
    switch (op) {
    case CJ_OP_NEG: return -a;
    case CJ_OP_ABS: return fabs(a);
    case CJ_OP_SIGN: return a > 0 ? 1 : a < 0 ? -1 : a;
    case CJ_OP_EXP: return exp(a);
    case CJ_OP_EXPM1: return expm1(a);
    case CJ_OP_LOG: case CJ_OP_LOG_LIBC: return log(a);
    case CJ_OP_LOG1P: return log1p(a);
    case CJ_OP_SQRT: return sqrt(a);
    case CJ_OP_RECIPROCAL: return 1 / a;
    case CJ_OP_TANH: return tanh(a);
    case CJ_OP_SIN: return sin(a);
    case CJ_OP_COS: return cos(a);
    case CJ_OP_FLOOR: return floor(a);
    case CJ_OP_CEIL: return ceil(a);
    case CJ_OP_LOGICAL_NOT: return !a;
    case CJ_OP_ISNAN: return isnan(a);
    case CJ_OP_ISFINITE: return isfinite(a);
    case CJ_OP_CAST: case CJ_OP_NAME: case CJ_OP_STOP_GRADIENT: return a;
    case CJ_OP_ADD: return a + b;
    case CJ_OP_SUB: return a - b;
    case CJ_OP_MUL: return a * b;
    case CJ_OP_DIV: return a / b;
    case CJ_OP_POW: return pow(a, b);
    case CJ_OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case CJ_OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case CJ_OP_LOGICAL_AND: return a && b;
    case CJ_OP_LOGICAL_OR: return a || b;
    case CJ_OP_EQ: return a == b;
    case CJ_OP_NE: return a != b;
    case CJ_OP_LT: return a < b;
    case CJ_OP_LE: return a <= b;
    case CJ_OP_GT: return a > b;
    case CJ_OP_GE: return a >= b;
    case CJ_OP_SELECT: return a ? b : c;
    case CJ_OP_FMA: return a * b + c;
    case CJ_OP_REDUCE_SUM: return a + b;
    case CJ_OP_REDUCE_PROD: return a * b;
    case CJ_OP_REDUCE_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case CJ_OP_REDUCE_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    default:
        fprintf(stderr, "interpreter: op %s not supported\n", cj_op_name(op));
        exit(2);
    }
}

static inline double reduce_start(cj_op op) {
    return op == CJ_OP_REDUCE_SUM ? 0 : op == CJ_OP_REDUCE_PROD ? 1 : op == CJ_OP_REDUCE_MAX ? -INFINITY : INFINITY;
}

/* ---- the graph interpreter --------------------------------------------------------
 * values[i]: node i's elements, row-major, as doubles rounded to its dtype. */

static inline void unravel(const cj_shape *s, int64_t i, int64_t *idx) {
    for (int d = s->rank - 1; d >= 0; d--) {
        idx[d] = s->dims[d] ? i % s->dims[d] : 0;
        i = s->dims[d] ? i / s->dims[d] : 0;
    }
}
static inline int64_t ravel(const cj_shape *s, const int64_t *idx) {
    int64_t i = 0;
    for (int d = 0; d < s->rank; d++) i = i * s->dims[d] + idx[d];
    return i;
}

/* Evaluates every node of g; params[slot] holds parameter slot's elements.
 * Returns values (free with free_values). */
static inline double **eval_graph(const cj_graph *g, double *const *params) {
    double **v = calloc((size_t)g->nnodes + 1, sizeof(double *));
    if (!v) die("out of memory");
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        int64_t N = cj_shape_numel(&n->shape);
        double *out = v[i] = malloc(sizeof(double) * ((size_t)N + 1));
        if (!out) die("out of memory");
        const cj_node *in0 = n->ninputs > 0 ? &g->nodes[n->inputs[0]] : NULL;
        int64_t idx[CJ_MAX_RANK], j[CJ_MAX_RANK];
        cj_opkind kind = cj_op_kind(n->op);
        if (n->op == CJ_OP_PARAM) {
            for (int64_t e = 0; e < N; e++) out[e] = round_to(n->dtype, params[n->attrs.index][e]);
        } else if (n->op == CJ_OP_CONSTANT) {
            bool f = n->dtype == CJ_FLOAT32 || n->dtype == CJ_FLOAT64;
            for (int64_t e = 0; e < N; e++) out[e] = round_to(n->dtype, f ? n->attrs.fvalue : (double)n->attrs.ivalue);
        } else if (n->op == CJ_OP_IOTA) {
            for (int64_t e = 0; e < N; e++) unravel(&n->shape, e, idx), out[e] = (double)idx[n->attrs.axis];
        } else if (kind == CJ_OPKIND_UNARY || kind == CJ_OPKIND_BINARY || kind == CJ_OPKIND_COMPARE ||
                   kind == CJ_OPKIND_SELECT || kind == CJ_OPKIND_TERNARY || kind == CJ_OPKIND_CAST) {
            if (n->op == CJ_OP_BITCAST) die("interpreter: bitcast not supported");
            for (int64_t e = 0; e < N; e++) {
                double a[3] = {0, 0, 0};
                for (int k = 0; k < n->ninputs && k < 3; k++) a[k] = v[n->inputs[k]][e]; /* shapes are equal */
                out[e] = round_to(n->dtype, apply_op(n->op, a[0], a[1], a[2]));
            }
        } else if (n->op == CJ_OP_BROADCAST) {
            int lead = n->shape.rank - in0->shape.rank;
            for (int64_t e = 0; e < N; e++) {
                unravel(&n->shape, e, idx);
                for (int d = 0; d < in0->shape.rank; d++) j[d] = in0->shape.dims[d] == 1 ? 0 : idx[d + lead];
                out[e] = v[n->inputs[0]][ravel(&in0->shape, j)];
            }
        } else if (n->op == CJ_OP_RESHAPE) {
            memcpy(out, v[n->inputs[0]], sizeof(double) * (size_t)N);
        } else if (n->op == CJ_OP_TRANSPOSE) {
            for (int64_t e = 0; e < N; e++) {
                unravel(&n->shape, e, idx);
                for (int d = 0; d < n->shape.rank; d++) j[n->attrs.perm[d]] = idx[d];
                out[e] = v[n->inputs[0]][ravel(&in0->shape, j)];
            }
        } else if (n->op == CJ_OP_SLICE) {
            for (int64_t e = 0; e < N; e++) {
                unravel(&n->shape, e, idx);
                for (int d = 0; d < n->shape.rank; d++) j[d] = n->attrs.start[d] + n->attrs.step[d] * idx[d];
                out[e] = v[n->inputs[0]][ravel(&in0->shape, j)];
            }
        } else if (kind == CJ_OPKIND_REDUCE) {
            /* in the input's row-major order, rounding each step as a kernel does */
            for (int64_t e = 0; e < N; e++) out[e] = reduce_start(n->op);
            int64_t M = cj_shape_numel(&in0->shape);
            for (int64_t e = 0; e < M; e++) {
                unravel(&in0->shape, e, idx);
                int r = 0;
                for (int d = 0; d < in0->shape.rank; d++)
                    if (!(n->attrs.axes >> d & 1)) j[r++] = idx[d];
                int64_t o = ravel(&n->shape, j);
                out[o] = round_to(n->dtype, apply_op(n->op, out[o], v[n->inputs[0]][e], 0));
            }
        } else if (n->op == CJ_OP_MATMUL) {
            const cj_shape *A = &in0->shape, *B = &g->nodes[n->inputs[1]].shape;
            if (A->rank != 2 || B->rank != 2) die("interpreter: matmul of rank 2 only");
            int64_t M = A->dims[0], K = A->dims[1], Nn = B->dims[1];
            const double *a = v[n->inputs[0]], *bb = v[n->inputs[1]];
            for (int64_t m = 0; m < M; m++)
                for (int64_t c = 0; c < Nn; c++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s = round_to(n->dtype, s + round_to(n->dtype, a[m * K + k] * bb[k * Nn + c]));
                    out[m * Nn + c] = s;
                }
        } else if (n->op == CJ_OP_CONCATENATE) {
            int64_t at = 0;
            for (int k = 0; k < n->ninputs; k++) {
                const cj_shape *s = &g->nodes[n->inputs[k]].shape;
                for (int64_t e = 0; e < cj_shape_numel(s); e++) {
                    unravel(s, e, idx);
                    idx[n->attrs.axis] += at;
                    out[ravel(&n->shape, idx)] = v[n->inputs[k]][e];
                }
                at += s->dims[n->attrs.axis];
            }
        } else {
            fprintf(stderr, "interpreter: op %s not supported\n", cj_op_name(n->op));
            exit(2);
        }
    }
    return v;
}

static inline void free_values(const cj_graph *g, double **v) {
    for (int i = 0; i < g->nnodes; i++) free(v[i]);
    free(v);
}

/* ---- the plan interpreter -----------------------------------------------------------
 * Runs the plan's kernels in order over real memory laid out as memplan
 * says: one arena, each temporary at its offset, a buffer with alias_of at
 * its offset in its host.  Elements are stored in their dtype's bytes. */

static inline double load_elem(cj_dtype dt, const char *base, int64_t i) {
    switch (dt) {
    case CJ_FLOAT32: return ((const float *)base)[i];
    case CJ_FLOAT64: return ((const double *)base)[i];
    case CJ_BOOL: return ((const uint8_t *)base)[i];
    case CJ_INT32: return ((const int32_t *)base)[i];
    case CJ_INT64: return (double)((const int64_t *)base)[i];
    default: die("interpreter: dtype not supported");
    }
    return 0;
}
static inline void store_elem(cj_dtype dt, char *base, int64_t i, double x) {
    switch (dt) {
    case CJ_FLOAT32: ((float *)base)[i] = (float)x; break;
    case CJ_FLOAT64: ((double *)base)[i] = x; break;
    case CJ_BOOL: ((uint8_t *)base)[i] = x != 0; break;
    case CJ_INT32: ((int32_t *)base)[i] = (int32_t)x; break;
    case CJ_INT64: ((int64_t *)base)[i] = (int64_t)x; break;
    default: die("interpreter: dtype not supported");
    }
}

static inline int64_t at_point(const cj_affine *a, const int64_t *i, int rank) {
    int64_t o = a->offset;
    for (int d = 0; d < rank; d++) o += a->stride[d] * i[d];
    return o;
}

typedef struct {
    char **base;    /* per buffer: its first byte */
    char *arena;
    char **own;     /* per buffer: memory of its own (params, outputs), or NULL */
    int n;
} plan_memory;

static inline void memory_free(plan_memory *m) {
    for (int b = 0; b < m->n; b++) free(m->own[b]);
    free(m->own), free(m->base), free(m->arena);
}

/* Runs plan p on params (row-major doubles per slot); outs[j] receives
 * output j's elements (malloc'd).  Returns false for a plan the
 * interpreter does not run (gemm, call, loop, scatter kernels, blocks). */
static inline bool run_plan(const cj_plan *p, double *const *params, double **outs) {
    plan_memory m = {calloc((size_t)p->nbuffers + 1, sizeof(char *)), malloc((size_t)p->arena_bytes + 64),
                     calloc((size_t)p->nbuffers + 1, sizeof(char *)), p->nbuffers};
    if (!m.base || !m.arena || !m.own) die("out of memory");
    /* garbage in the arena: nothing may read a temporary before it is written */
    for (int64_t i = 0; i < p->arena_bytes; i++) m.arena[i] = (char)0xA5;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *B = &p->buffers[b];
        if (B->block_storage > 0 || B->block_on_stack) goto unsupported;
        if (B->kind != CJ_BUF_TEMP && B->alias_of < 0) {
            m.own[b] = malloc((size_t)B->nbytes + 8);
            if (!m.own[b]) die("out of memory");
            memset(m.own[b], 0x5A, (size_t)B->nbytes);
            if (B->kind == CJ_BUF_PARAM)
                for (int64_t e = 0; e < cj_shape_numel(&B->shape); e++) store_elem(B->dtype, m.own[b], e, params[B->slot][e]);
            if (B->kind == CJ_BUF_ARRAY) goto unsupported;
        }
    }
    for (int b = 0; b < p->nbuffers; b++) {
        int h = b;
        int64_t off = 0;
        while (p->buffers[h].alias_of >= 0) off += p->buffers[h].offset, h = p->buffers[h].alias_of;
        m.base[b] = (m.own[h] ? m.own[h] : m.arena + p->buffers[h].offset) + off;
    }
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *K = &p->kernels[k];
        if (K->gemm.on || K->call || K->loop || K->scatter.on) goto unsupported;
        double *val = malloc(sizeof(double) * ((size_t)K->nexprs + 1));
        if (!val) die("out of memory");
        int64_t points = 1, i[CJ_MAX_RANK] = {0};
        for (int d = 0; d < K->rank; d++) points *= K->dims[d];
        const cj_buffer *O = &p->buffers[K->out_buffer];
        for (int64_t pt = 0; pt < points; pt++) {
            int64_t r = pt;
            bool first = true; /* every reduced index 0: the output element's first visit */
            for (int d = K->rank - 1; d >= 0; d--) {
                i[d] = r % K->dims[d], r /= K->dims[d];
                if ((K->reduced >> d & 1) && i[d]) first = false;
            }
            for (int e = 0; e < K->nexprs; e++) {
                const cj_expr *x = &K->exprs[e];
                switch (x->kind) {
                case CJ_EX_LOAD:
                    val[e] = load_elem(p->buffers[x->buffer].dtype, m.base[x->buffer], at_point(&x->index, i, K->rank));
                    break;
                case CJ_EX_CONST:
                    val[e] = round_to(x->dtype, x->dtype == CJ_FLOAT32 || x->dtype == CJ_FLOAT64 ? x->fvalue : (double)x->ivalue);
                    break;
                case CJ_EX_INDEX: val[e] = (double)at_point(&x->index, i, K->rank); break;
                case CJ_EX_OP: {
                    double a[3] = {0, 0, 0};
                    for (int q = 0; q < x->nargs; q++) a[q] = val[x->args[q]];
                    val[e] = round_to(x->dtype, apply_op(x->op, a[0], a[1], a[2]));
                    break;
                }
                case CJ_EX_GATHER: free(val); goto unsupported;
                }
            }
            for (int a = 0; a < K->nalso; a++)
                store_elem(p->buffers[K->also[a].buffer].dtype, m.base[K->also[a].buffer],
                           at_point(&K->also[a].index, i, K->rank), val[K->also[a].expr]);
            int64_t o = at_point(&K->out_index, i, K->rank);
            double y = val[K->nexprs - 1];
            if (K->reduced) {
                double acc = first ? reduce_start(K->reduce_op) : load_elem(O->dtype, m.base[K->out_buffer], o);
                y = round_to(O->dtype, apply_op(K->reduce_op, acc, y, 0));
            }
            store_elem(O->dtype, m.base[K->out_buffer], o, y);
        }
        free(val);
    }
    for (int j = 0; j < p->graph->noutputs; j++) {
        const cj_buffer *B = &p->buffers[p->output_buffer[j]];
        int64_t N = cj_shape_numel(&B->shape);
        outs[j] = malloc(sizeof(double) * ((size_t)N + 1));
        if (!outs[j]) die("out of memory");
        for (int64_t e = 0; e < N; e++) outs[j][e] = load_elem(B->dtype, m.base[p->output_buffer[j]], e);
    }
    memory_free(&m);
    return true;
unsupported:
    memory_free(&m);
    return false;
}

/* Do the plan's outputs equal the graph interpreter's (of the lowered
 * graph, on the same params)?  Values are rounded alike in both; the
 * tolerance only allows a kernel to order one op's operands otherwise. */
static inline bool plan_matches_graph(const char *what, const cj_lowered *l, double *const *params) {
    const cj_graph *g = l->graph;
    double **outs = calloc((size_t)g->noutputs + 1, sizeof(double *));
    if (!outs) die("out of memory");
    if (!run_plan(&l->plan, params, outs)) {
        fprintf(stderr, "%s: the plan interpreter cannot run this plan\n", what);
        exit(2);
    }
    double **v = eval_graph(g, params);
    int bad = 0;
    for (int j = 0; j < g->noutputs; j++) {
        const cj_node *n = &g->nodes[g->outputs[j]];
        for (int64_t e = 0; e < cj_shape_numel(&n->shape); e++) {
            double want = v[g->outputs[j]][e], got = outs[j][e];
            bool same = (isnan(want) && isnan(got)) || want == got || fabs(want - got) <= 1e-5 * (1 + fabs(want));
            if (!same && bad++ < 3)
                fprintf(stderr, "%s: output %d[%lld] = %.9g, the graph gives %.9g\n", what, j, (long long)e, got, want);
        }
        free(outs[j]);
    }
    free(outs);
    free_values(g, v);
    return bad == 0;
}

/* Fills params[slot] with values in [lo, hi) for each parameter of g. */
static inline double **random_params(const cj_graph *g, double lo, double hi) {
    double **params = calloc((size_t)g->nparams + 1, sizeof(double *));
    if (!params) die("out of memory");
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        if (n->op != CJ_OP_PARAM || params[n->attrs.index]) continue;
        int64_t N = cj_shape_numel(&n->shape);
        params[n->attrs.index] = malloc(sizeof(double) * ((size_t)N + 1));
        if (!params[n->attrs.index]) die("out of memory");
        for (int64_t e = 0; e < N; e++) params[n->attrs.index][e] = lo + (hi - lo) * rng_unit();
    }
    return params;
}

static inline void free_params(const cj_graph *g, double **params) {
    for (int i = 0; i < g->nparams; i++) free(params[i]);
    free(params);
}

/* ---- random graphs --------------------------------------------------------------------
 * Values of one square shape (N x N, float32) from 1 to 3 parameters:
 * unary and binary elementwise ops (an operand possibly transposed),
 * matmuls and, unless `uniform`, row or column reductions broadcast back;
 * 1 to 3 outputs.  With `uniform` every value a buffer may hold has the
 * same bytes. */
static inline builder random_graph(uint64_t seed, bool uniform) {
    rng_seed(seed);
    builder b = start(CJ_FLOAT32);
    int64_t N = 2 + rng_int(8);
    int pool[64], n = 0, nparams = 1 + rng_int(3), nops = 3 + rng_int(23);
    for (int i = 0; i < nparams; i++) pool[n++] = param(&b, s2(N, N));
    static const cj_op unary[] = {CJ_OP_TANH, CJ_OP_SIN, CJ_OP_NEG, CJ_OP_ABS, CJ_OP_EXP};
    static const cj_op binary[] = {CJ_OP_ADD, CJ_OP_SUB, CJ_OP_MUL, CJ_OP_MAXIMUM};
    for (int i = 0; i < nops && n < 64; i++) {
        int x = pool[n - 1 - rng_int(n < 4 ? n : 4)], y = pool[rng_int(n)], v; /* mostly recent values */
        if (rng_int(5) == 0) y = transpose2(&b, y);
        switch (rng_int(uniform ? 4 : 5)) {
        case 0: v = un(&b, unary[rng_int(5)], x); break;
        case 1: case 2: v = bin(&b, binary[rng_int(4)], x, y); break;
        case 3: v = matmul(&b, x, y); break;
        default: {
            int axis = rng_int(2);
            int r = reduce(&b, rng_int(2) ? CJ_OP_REDUCE_SUM : CJ_OP_REDUCE_MAX, x, 1u << axis);
            v = bin(&b, CJ_OP_SUB, x, bcast(&b, reshape(&b, r, axis ? s2(N, 1) : s2(1, N)), s2(N, N)));
        }
        }
        pool[n++] = v;
    }
    int outs[3], nouts = 1 + rng_int(3);
    outs[0] = pool[n - 1];
    for (int j = 1; j < nouts; j++) outs[j] = pool[nparams + rng_int(n - nparams)];
    outputs(&b, outs, nouts);
    return b;
}

/* ---- looking at a plan -------------------------------------------------------------- */

static inline int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

static inline int group_of(const cj_plan *p, int k) {
    for (int g = 0; g < p->ngroups; g++)
        if (k >= p->groups[g].first && k < p->groups[g].first + p->groups[g].count) return g;
    return -1;
}

static inline int count_buffers(const cj_plan *p, cj_buf_kind kind) {
    int n = 0;
    for (int b = 0; b < p->nbuffers; b++) n += p->buffers[b].kind == kind;
    return n;
}

/* How many expressions of kernel k apply op (-1: any op). */
static inline int count_ops(const cj_kernel *k, int op) {
    int n = 0;
    for (int e = 0; e < k->nexprs; e++) n += k->exprs[e].kind == CJ_EX_OP && (op < 0 || k->exprs[e].op == (cj_op)op);
    return n;
}

static inline bool kernel_reads(const cj_kernel *k, int buf) {
    for (int e = 0; e < k->nexprs; e++)
        if (cj_expr_reads(&k->exprs[e]) && k->exprs[e].buffer == buf) return true;
    return false;
}

/* The buffer holding node `node`'s value, or -1. */
static inline int buffer_of_node(const cj_plan *p, int node) {
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].node == node) return b;
    return -1;
}

/* Is an arena temporary (bytes in the arena of its own) live at group g? */
static inline bool in_arena(const cj_buffer *B) {
    return B->kind == CJ_BUF_TEMP && B->alias_of < 0 && cj_buffer_bytes(B) > 0;
}

/* memplan's promises, from first principles: every pair of temporaries
 * live at once (in the arena, or in one host) is disjoint; the arena is
 * the highest end, over the groups, of a temporary live there (a
 * brute-force maximum over live ranges and offsets) and at least the most
 * bytes live at once; peak = arguments + outputs + arena; peak_kernel is
 * the group with the most live bytes; a host outlives what lives in it;
 * alias_bytes is how much of the donated arguments is reused. */
static inline void check_plan(const char *what, const cj_plan *p) {
    int64_t args = 0, outs = 0, top_most = 0, live_most = 0, live_best = -1;
    int best_group = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *B = &p->buffers[b];
        if (B->kind == CJ_BUF_PARAM || B->kind == CJ_BUF_ARRAY) args += B->nbytes;
        if (B->kind == CJ_BUF_OUTPUT && B->alias_of < 0) outs += B->nbytes;
        CHECK_MSG(B->nbytes == cj_shape_numel(&B->shape) * cj_dtype_size(B->dtype), "%s: buf%d's bytes", what, b);
        if (B->alias_of >= 0 && B->alias_of < p->nbuffers) {
            const cj_buffer *H = &p->buffers[B->alias_of];
            CHECK_MSG(B->offset >= 0 && B->offset + cj_buffer_bytes(B) <= H->nbytes, "%s: buf%d at %lld in buf%d", what,
                      b, (long long)B->offset, B->alias_of);
            if (H->kind == CJ_BUF_TEMP)
                CHECK_MSG(H->first_use <= B->first_use && B->last_use <= H->last_use,
                          "%s: buf%d (groups %d-%d) outlives its host buf%d (%d-%d)", what, b, B->first_use, B->last_use,
                          B->alias_of, H->first_use, H->last_use);
        } else if (in_arena(B)) {
            CHECK_MSG(B->offset >= 0 && B->offset % 64 == 0 && B->offset + cj_buffer_bytes(B) <= p->arena_bytes,
                      "%s: buf%d at %lld, arena %lld", what, b, (long long)B->offset, (long long)p->arena_bytes);
        }
    }
    for (int g = 0; g < p->ngroups; g++) {
        int64_t top = 0, live = 0, live_exact = 0;
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *B = &p->buffers[b];
            if (!in_arena(B) || B->first_use > g || g > B->last_use) continue;
            if (B->offset + align64(cj_buffer_bytes(B)) > top) top = B->offset + align64(cj_buffer_bytes(B));
            live += align64(cj_buffer_bytes(B));
            live_exact += cj_buffer_bytes(B);
        }
        if (top > top_most) top_most = top;
        if (live > live_most) live_most = live;
        if (live_exact > live_best) live_best = live_exact, best_group = g;
    }
    CHECK_MSG(p->arena_bytes == top_most, "%s: arena %lld, the highest live end %lld", what, (long long)p->arena_bytes,
              (long long)top_most);
    CHECK_MSG(p->arena_bytes >= live_most, "%s: arena %lld < %lld bytes live at once", what, (long long)p->arena_bytes,
              (long long)live_most);
    CHECK_MSG(p->ngroups == 0 || p->peak_kernel == best_group, "%s: peak at group %d, the most live bytes at %d", what,
              p->peak_kernel, best_group);
    CHECK_MSG(p->argument_bytes == args && p->output_bytes == outs, "%s: argument bytes %lld (%lld), outputs %lld (%lld)",
              what, (long long)p->argument_bytes, (long long)args, (long long)p->output_bytes, (long long)outs);
    CHECK_MSG(p->peak_bytes == args + outs + p->arena_bytes, "%s: peak %lld != %lld + %lld + %lld", what,
              (long long)p->peak_bytes, (long long)args, (long long)outs, (long long)p->arena_bytes);
    /* every pair of temporaries in one place (the arena, or one host), live at once: disjoint */
    int clashes = 0;
    for (int a = 0; a < p->nbuffers; a++)
        for (int b = a + 1; b < p->nbuffers; b++) {
            const cj_buffer *A = &p->buffers[a], *B = &p->buffers[b];
            if (A->kind != CJ_BUF_TEMP || B->kind != CJ_BUF_TEMP || A->alias_of != B->alias_of) continue;
            if (cj_buffer_bytes(A) == 0 || cj_buffer_bytes(B) == 0) continue;
            bool at_once = A->first_use <= B->last_use && B->first_use <= A->last_use;
            bool apart = A->offset + cj_buffer_bytes(A) <= B->offset || B->offset + cj_buffer_bytes(B) <= A->offset;
            if (at_once && !apart && clashes++ < 3)
                fprintf(stderr, "%s: buf%d [%lld, +%lld) groups %d-%d and buf%d [%lld, +%lld) groups %d-%d overlap\n",
                        what, a, (long long)A->offset, (long long)cj_buffer_bytes(A), A->first_use, A->last_use, b,
                        (long long)B->offset, (long long)cj_buffer_bytes(B), B->first_use, B->last_use);
        }
    CHECK_MSG(clashes == 0, "%s: %d pairs of temporaries share bytes while both live", what, clashes);
    /* liveness covers every use; groups are consecutive and cover every kernel */
    int next = 0;
    for (int g = 0; g < p->ngroups; g++) {
        CHECK_MSG(p->groups[g].first == next && p->groups[g].count >= 1, "%s: group %d", what, g);
        next = p->groups[g].first + p->groups[g].count;
    }
    CHECK_MSG(next == p->nkernels, "%s: groups cover %d of %d kernels", what, next, p->nkernels);
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *K = &p->kernels[k];
        int g = group_of(p, k);
        for (int e = -1 - K->nalso; e < K->nexprs; e++) {
            int b = e == -1 ? K->out_buffer : e < -1 ? K->also[-2 - e].buffer
                  : cj_expr_reads(&K->exprs[e]) ? K->exprs[e].buffer : -1;
            if (b < 0) continue;
            CHECK_MSG(p->buffers[b].first_use <= g && g <= p->buffers[b].last_use,
                      "%s: kernel %d (group %d) uses buf%d, live %d-%d", what, k, g, b, p->buffers[b].first_use,
                      p->buffers[b].last_use);
        }
    }
    /* alias_bytes: per donated argument, the highest end of what lives in it */
    int64_t reused = 0;
    for (int d = 0; d < p->nbuffers; d++) {
        if (p->buffers[d].kind != CJ_BUF_PARAM) continue;
        int64_t end = 0;
        for (int b = 0; b < p->nbuffers; b++)
            if (p->buffers[b].alias_of == d && p->buffers[b].offset + cj_buffer_bytes(&p->buffers[b]) > end)
                end = p->buffers[b].offset + cj_buffer_bytes(&p->buffers[b]);
        reused += end < p->buffers[d].nbytes ? end : p->buffers[d].nbytes;
    }
    CHECK_MSG(p->alias_bytes == reused, "%s: alias bytes %lld, %lld reused", what, (long long)p->alias_bytes,
              (long long)reused);
}

/* ---- group.c's rule, restated ------------------------------------------------------- */

/* Does access a of kernel k touch only row i_0 of buffer b? */
static inline bool row_local_access(const cj_plan *p, const cj_kernel *k, int b, const cj_affine *a) {
    const cj_buffer *B = &p->buffers[b];
    int64_t rows = k->dims[0];
    if (k->rank < 1 || rows <= 0 || B->shape.rank == 0 || B->shape.dims[0] != rows) return false;
    int64_t row = cj_shape_numel(&B->shape) / rows, lo = a->offset, hi = a->offset;
    if (a->stride[0] != row) return false;
    for (int d = 1; d < k->rank; d++) {
        int64_t span = a->stride[d] * (k->dims[d] - 1);
        if (span < 0) lo += span;
        else hi += span;
    }
    return lo >= 0 && hi < row;
}

static inline bool is_matmul_kernel(const cj_plan *p, const cj_kernel *k) {
    return k->root_node >= 0 && p->graph->nodes[k->root_node].op == CJ_OP_MATMUL;
}

/* May kernel k be a stage of a group over `rows` rows (as its head when
 * `head`)?  Loop 0 is those rows and not reduced, every store row-local,
 * not a scatter or a call, and a matmul only as the head. */
static inline bool stage_ok(const cj_plan *p, const cj_kernel *k, int64_t rows, bool head) {
    if (k->rank < 1 || k->dims[0] < 2 || (k->reduced & 1u) || k->scatter.on || k->call || k->loop) return false;
    if (!head && (k->dims[0] != rows || is_matmul_kernel(p, k))) return false;
    for (int a = 0; a < k->nalso; a++)
        if (!row_local_access(p, k, k->also[a].buffer, &k->also[a].index)) return false;
    return row_local_access(p, k, k->out_buffer, &k->out_index);
}

/* Does kernel k read anything the kernels [first, k) write other than row by row? */
static inline bool reads_group_rows_only(const cj_plan *p, int first, int k) {
    const cj_kernel *K = &p->kernels[k];
    for (int e = 0; e < K->nexprs; e++) {
        const cj_expr *x = &K->exprs[e];
        if (!cj_expr_reads(x)) continue;
        for (int s = first; s < k; s++)
            if (cj_kernel_writes(&p->kernels[s], x->buffer) &&
                (x->kind == CJ_EX_GATHER || !row_local_access(p, K, x->buffer, &x->index)))
                return false;
    }
    return true;
}

/* group.c's promises on a plan fresh from the group pass (before memplan's
 * orders): every group of two or more stages shares its rows, stage by
 * stage as stage_ok says, each reading what earlier stages wrote row by
 * row only; and groups are as long as that allows: the kernel after a
 * group could not have joined it.  Returns the groups of two or more. */
static inline int check_groups(const char *what, const cj_plan *p) {
    int multi = 0;
    for (int g = 0; g < p->ngroups; g++) {
        const cj_group *G = &p->groups[g];
        const cj_kernel *head = &p->kernels[G->first];
        CHECK_MSG(G->rows == (head->rank >= 1 ? head->dims[0] : 1), "%s: group %d's rows", what, g);
        CHECK_MSG(G->block >= 1 && G->block <= (G->rows > 0 ? G->rows : 1), "%s: group %d's block", what, g);
        if (G->count > 1) {
            multi++;
            CHECK_MSG(stage_ok(p, head, G->rows, true), "%s: group %d's head %s cannot lead", what, g, head->label);
            for (int k = G->first + 1; k < G->first + G->count; k++)
                CHECK_MSG(stage_ok(p, &p->kernels[k], G->rows, false) && reads_group_rows_only(p, G->first, k),
                          "%s: group %d's stage %d (%s) does not share its rows", what, g, k, p->kernels[k].label);
        }
        int next = G->first + G->count;
        if (next < p->nkernels && stage_ok(p, head, G->rows, true))
            CHECK_MSG(!(stage_ok(p, &p->kernels[next], G->rows, false) && reads_group_rows_only(p, G->first, next)),
                      "%s: kernel %d (%s) could have joined group %d", what, next, p->kernels[next].label, g);
    }
    return multi;
}

#endif
