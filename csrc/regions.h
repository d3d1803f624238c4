/* regions.h - control flow in the graph: bodies (sub-graphs) held by
 * region nodes (SCAN, WHILE, COND in ops.def), and their results.
 *
 * A region node's inputs are, in order:
 *   SCAN   carries (ncarry), xs (nxs, stacked along dim 0), consts (nconsts)
 *   WHILE  carries (ncarry), consts
 *   COND   the branch index (int32 scalar), operands (ncarry), consts
 * where consts are the values the bodies close over (read every iteration).
 * Its value is nothing (a float32 scalar nobody reads); RESULT nodes pick
 * its results: the final carries then the stacked ys (SCAN), the final
 * carries (WHILE), the taken branch's outputs (COND).
 *
 * The bodies are graphs of their own, with parameters:
 *   SCAN   body:   [i (int32 scalar: the row of xs and ys), carries, x rows, consts] -> [carries, y rows]
 *   WHILE  cond:   [carries, consts] -> [bool scalar];  body: [carries, consts] -> [carries]
 *   COND   branch: [operands, consts] -> [outputs]
 * (a body may have fewer parameters than the consts: those it never reads).
 *
 *   CUSTOM inputs: primals (ncarry), consts; results: outputs (nys), then
 *          residuals (nres, a custom_vjp's).  graphs[0], the function:
 *          [primals, consts] -> [outputs, residuals].  graphs[1], the rule:
 *          custom_vjp (!jvp_rule)  bwd: [residuals, output cotangents, consts]
 *                                       -> [a cotangent per primal]
 *          custom_jvp (jvp_rule)   jvp: [primals, a tangent per primal, consts]
 *                                       -> [outputs, output tangents]
 *          The rule is read by autodiff, jvp and vmap only (custom.c): the
 *          lowering inlines graphs[0] first, so it fuses like any code.
 *
 * Lowering (loops.c) plans each body as a graph of its own; the region
 * becomes one kernel of the outer plan (a kernel boundary, as a gemm is)
 * whose `loop` is the plan of its bodies, run by loops_rt.c. */
#ifndef CJ_REGIONS_H
#define CJ_REGIONS_H

#include "autodiff.h"
#include "graph.h"

#define CJ_MAX_BRANCHES 64

typedef struct cj_body {
    int refs;
    cj_op op;               /* CJ_OP_SCAN, CJ_OP_WHILE, CJ_OP_COND or CJ_OP_CUSTOM */
    int ngraphs;            /* scan 1, while 2 (cond, body), cond: the branches */
    cj_graph **graphs;      /* owned */
    int ncarry, nxs, nconsts, nys;
    int64_t length;         /* SCAN: the trip count */
    bool reverse;           /* SCAN: rows from the last to the first */
    int nres;               /* CUSTOM: residuals after the outputs */
    bool jvp_rule;          /* CUSTOM: graphs[1] is a JVP rule (else a VJP's bwd) */
    int nresults;
    cj_shape *result_shape; /* per result */
    cj_dtype *result_dtype;
} cj_body;

/* A new body of `op` with room for ngraphs graphs (NULL on no memory);
 * the caller fills graphs (ownership passes) and the counts, then
 * cj_body_finish. */
cj_body *cj_body_new(cj_op op, int ngraphs);
/* Derives the results' shapes and dtypes from the graphs and checks that
 * the graphs agree with the counts.  CJ_OK or CJ_ERR_VALUE/MEMORY. */
cj_status cj_body_finish(cj_body *b, cj_error *err);
void cj_body_ref(cj_body *b);
void cj_body_unref(cj_body *b);
/* Adds a reference to b to g's bodies; returns its index or -1 (no memory). */
int cj_graph_add_body(cj_graph *g, cj_body *b);
/* (cj_body_ref, cj_body_unref and cj_bodies_heap_bytes are graph.c's: a
 * graph owns its bodies.) */
int64_t cj_bodies_heap_bytes(const cj_graph *g);

/* The body of region node n (NULL if n is not one). */
static inline cj_body *cj_region_body(const cj_graph *g, const cj_node *n) {
    if (cj_op_kind(n->op) != CJ_OPKIND_REGION || n->op == CJ_OP_RESULT) return NULL;
    if (n->attrs.index < 0 || n->attrs.index >= g->nbodies) return NULL;
    return g->bodies[n->attrs.index];
}

/* The number of inputs a region node of body b has. */
static inline int cj_region_inputs(const cj_body *b) {
    return b->ncarry + b->nconsts + (b->op == CJ_OP_SCAN ? b->nxs : b->op == CJ_OP_COND ? 1 : 0);
}

/* Cuts a body out of g: the nodes recorded since `first` that depend on
 * the placeholders ph[0..nph) and that outs[] need are copied into a new
 * graph whose parameters are the placeholders (slots 0..nph-1) and then the
 * consts: the older or independent values they read, in `consts` (outer node
 * ids; *nconsts already there are reused, new ones appended; room for
 * g->nnodes).  Its outputs are outs.  The copied nodes stay in g, dead. */
cj_graph *cj_region_extract(cj_graph *g, int first, const int *ph, int nph, const int *outs, int nouts,
                            int *consts, int *nconsts, cj_error *err);

/* A new graph computing g's outputs outs[] from the nodes ph[] as its
 * parameters 0..nph-1 (everything else they need is copied, constant
 * expressions included): how a transformed copy of a body is cut back into
 * a body.  NULL with err set if they need any other value. */
cj_graph *cj_graph_reslot(cj_graph *g, const int *ph, int nph, const int *outs, int nouts, cj_error *err);

/* Appends to g the nodes of graph body with its parameter slot s read as
 * g's node args[s] (each node at `loc`); outs[k] is body's output k in g. */
cj_status cj_graph_inline(cj_graph *g, const cj_graph *body, const int *args, int nargs, int *outs, int loc,
                          cj_error *err);

/* A copy of graph src, node for node (the same ids, bodies shared by
 * reference, outputs too), for a transformation to work on. */
cj_graph *cj_graph_copy(const cj_graph *src, cj_error *err);

/* Appends the region node of body b (a reference is taken) with `inputs`;
 * returns its id or -1 with err set. */
int cj_build_region(cj_graph *g, cj_body *b, const int *inputs, int ninputs, int loc, cj_error *err);
/* Result k of region node `region`. */
int cj_build_result(cj_graph *g, int region, int k, int loc, cj_error *err);

/* Appends to g the nodes of graph body with its parameter slot s read as
 * g's node args[s], each node keeping its own source location (as the
 * lowering inlines a custom node's function). */
cj_status cj_graph_inline_located(cj_graph *g, const cj_graph *body, const int *args, int nargs, int *outs,
                                  cj_error *err);

/* Reverse mode through region node id (regions_vjp.c, called by
 * autodiff.c): res_ct[k] is the cotangent of result k (-1: none); appends
 * the backward pass and sets in_ct[a] to the cotangent of input a (-1:
 * none).  A while node is refused with CJ_ERR_VALUE (use scan).  A body
 * is differentiated by `vjp`, the caller's reverse mode (cj_autodiff_vjp;
 * see cj_vjp_fn in autodiff.h). */
cj_status cj_region_vjp(cj_graph *g, int id, const int *res_ct, int *in_ct, cj_vjp_fn *vjp, cj_error *err);

#endif
