/* graph.c - the traced graph: node storage, validation of one node,
 * promotion (NEP 50), constants, checkpoint regions, and the helpers the
 * builders share (graph_priv.h).  The op table is ops.c; the builders are
 * graph_build.c (sources, elementwise), graph_shape.c (movement) and
 * graph_reduce.c (reductions, matmul); the text form is graph_text.c.
 *
 * Builders make every implicit step explicit: broadcasting becomes
 * BROADCAST nodes, promotion becomes CAST nodes (constants are re-created
 * at the wanted dtype and shape instead), so that the primitives that
 * reach the later passes never mix shapes or dtypes.  User errors are
 * found before any node is appended, so a failed builder leaves no
 * half-built nodes behind (except where memory runs out midway). */
#include "graph_priv.h"
#include "regions.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---------------------------------------------------- */

/* "(2, 3) float32": how error messages name an operand. */
const char *describe(const cj_node *n, char *buf, size_t size)
{
    char sh[256];
    snprintf(buf, size, "%s %s", cj_shape_str(&n->shape, sh, sizeof sh),
             cj_dtype_name(n->dtype));
    return buf;
}

const char *shape_text(const cj_shape *s, char *buf, size_t size)
{
    return cj_shape_str(s, buf, size);
}

/* Records "<opname>: <message> (at file:line)" in err; returns -1 so that
 * builders can `return fail(...)`. */
int fail(const cj_graph *g, cj_error *err, cj_status status, const char *opname, int loc,
                const char *fmt, ...)
{
    char body[1024], suffix[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (loc >= 0) {
        /* A very long path keeps its end, where the file name and line are. */
        const char *where = cj_graph_loc_str(g, loc);
        size_t wl = strlen(where);
        if (wl > 400)
            snprintf(suffix, sizeof suffix, " (at ...%s)", where + wl - 400);
        else
            snprintf(suffix, sizeof suffix, " (at %s)", where);
    }
    /* Shorten the body, never the location, when the message is too long. */
    int room = (int)sizeof(((cj_error *)0)->message) - 1 - (int)strlen(opname) - 2 - (int)strlen(suffix);
    if (room < 0)
        room = 0;
    cj_error_set(err, status, "%s: %.*s%s", opname, room, body, suffix);
    return -1;
}

/* Checks rank, dims and element count of a shape given by a caller. */
bool shape_check(const cj_graph *g, const char *opname, const cj_shape *s, int loc,
                        cj_error *err)
{
    if (s == NULL) {
        fail(g, err, CJ_ERR_INTERNAL, opname, loc, "shape is NULL");
        return false;
    }
    if (s->rank < 0 || s->rank > CJ_MAX_RANK) {
        fail(g, err, CJ_ERR_VALUE, opname, loc,
             "rank %d is not supported (cjit allows 0 to %d dimensions)", s->rank, CJ_MAX_RANK);
        return false;
    }
    char sh[256];
    for (int d = 0; d < s->rank; d++) {
        if (s->dims[d] < 0) {
            fail(g, err, CJ_ERR_VALUE, opname, loc, "negative dimensions are not allowed: %s",
                 shape_text(s, sh, sizeof sh));
            return false;
        }
    }
    /* Later passes compute byte sizes, so the bound is on bytes at the
     * largest element size (8), which also keeps numel * 8 from overflowing. */
    int64_t numel = cj_shape_numel(s);
    if (numel < 0 || numel > INT64_MAX / 8) {
        fail(g, err, CJ_ERR_VALUE, opname, loc, "array is too big: shape %s would need 2**63 bytes or more",
             shape_text(s, sh, sizeof sh));
        return false;
    }
    return true;
}

/* NumPy broadcasting of two shapes; false if they are incompatible. */
bool broadcast_shapes(const cj_shape *a, const cj_shape *b, cj_shape *out)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    cj_shape r = {.rank = rank};
    for (int i = 0; i < rank; i++) {
        int64_t da = i < a->rank ? a->dims[a->rank - 1 - i] : 1;
        int64_t db = i < b->rank ? b->dims[b->rank - 1 - i] : 1;
        int64_t d;
        if (da == db || db == 1)
            d = da;
        else if (da == 1)
            d = db;
        else
            return false;
        r.dims[rank - 1 - i] = d;
    }
    *out = r;
    return true;
}

/* True when `from` can be broadcast to `to` (NumPy broadcast_to). */
bool broadcastable_to(const cj_shape *from, const cj_shape *to)
{
    if (from->rank > to->rank)
        return false;
    int off = to->rank - from->rank;
    for (int d = 0; d < from->rank; d++) {
        if (from->dims[d] != to->dims[d + off] && from->dims[d] != 1)
            return false;
    }
    return true;
}

/* ---- graph storage ---------------------------------------------------- */

/* Returns a new empty graph owned by the caller (cj_graph_free), or NULL. */
cj_graph *cj_graph_new(void)
{
    cj_graph *g = calloc(1, sizeof(cj_graph));
    if (g != NULL)
        g->backward_start = -1;
    return g;
}

/* Frees the graph, its nodes, locations and arena.  NULL is fine. */
void cj_graph_free(cj_graph *g)
{
    if (g == NULL)
        return;
    free(g->nodes);
    free(g->locs);
    free(g->regions);
    free(g->force_remat);
    for (int i = 0; i < g->nbodies; i++)
        cj_body_unref(g->bodies[i]);
    free(g->bodies);
    cj_arena_free(&g->arena);
    free(g);
}

/* See graph.h. */
int64_t cj_graph_heap_bytes(const cj_graph *g)
{
    if (g == NULL)
        return 0;
    return cj_heap_bytes(g, sizeof *g) + cj_heap_bytes(g->nodes, (size_t)g->cap * sizeof *g->nodes)
           + cj_heap_bytes(g->locs, (size_t)g->locs_cap * sizeof *g->locs)
           + cj_heap_bytes(g->regions, (size_t)g->regions_cap * sizeof *g->regions)
           + cj_heap_bytes(g->force_remat, (size_t)g->nforce_remat * sizeof *g->force_remat)
           + cj_bodies_heap_bytes(g)
           + cj_arena_heap_bytes(&g->arena);
}

/* See graph.h.  A failed realloc leaves the larger array, which is fine. */
void cj_graph_trim(cj_graph *g)
{
    if (g == NULL || g->nodes == NULL || g->cap <= g->nnodes + 1)
        return;
    int cap = g->nnodes + 1;
    cj_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
    if (nodes != NULL) {
        g->nodes = nodes;
        g->cap = cap;
    }
}

/* Returns the id of "file:line" (interned: the same text, the same id), or
 * -1 when file_line is NULL or memory runs out. */
int cj_graph_loc(cj_graph *g, const char *file_line)
{
    if (g == NULL || file_line == NULL)
        return -1;
    /* Newest first: a trace mostly asks for the line it just used. */
    for (int i = g->nlocs - 1; i >= 0; i--) {
        if (strcmp(g->locs[i], file_line) == 0)
            return i;
    }
    if (g->nlocs == g->locs_cap) {
        if (g->locs_cap > INT_MAX / 2)
            return -1;
        int cap = g->locs_cap ? g->locs_cap * 2 : 16;
        const char **locs = realloc(g->locs, (size_t)cap * sizeof *locs);
        if (locs == NULL)
            return -1;
        g->locs = locs;
        g->locs_cap = cap;
    }
    const char *copy = cj_arena_strdup(&g->arena, file_line);
    if (copy == NULL)
        return -1;
    g->locs[g->nlocs] = copy;
    return g->nlocs++;
}

/* Returns the interned "file:line" of loc (borrowed), "?" if unknown. */
const char *cj_graph_loc_str(const cj_graph *g, int loc)
{
    if (g == NULL || loc < 0 || loc >= g->nlocs)
        return "?";
    return g->locs[loc];
}

/* Sets the graph's outputs to a copy of ids[0..n); replaces earlier ones. */
cj_status cj_graph_set_outputs(cj_graph *g, const int *ids, int n, cj_error *err)
{
    if (g == NULL || n < 0 || (n > 0 && ids == NULL))
        return cj_error_set(err, CJ_ERR_INTERNAL, "set_outputs: bad arguments");
    for (int i = 0; i < n; i++) {
        if (!node_ok(g, ids[i]))
            return cj_error_set(err, CJ_ERR_INTERNAL, "set_outputs: output %d is node %d, which does not exist",
                                i, ids[i]);
    }
    int *copy = cj_arena_alloc(&g->arena, (size_t)(n > 0 ? n : 1) * sizeof(int));
    if (copy == NULL)
        return cj_error_set(err, CJ_ERR_MEMORY, "set_outputs: out of memory");
    if (n > 0)
        memcpy(copy, ids, (size_t)n * sizeof(int));
    g->outputs = copy;
    g->noutputs = n;
    return CJ_OK;
}

/* See graph.h. */
cj_status cj_graph_set_outputs_mapped(cj_graph *g, const cj_graph *src, const int *remap, cj_error *err)
{
    int *outs = malloc(sizeof(int) * ((size_t)src->noutputs + 1));
    if (outs == NULL)
        return cj_error_set(err, CJ_ERR_MEMORY, "set_outputs: out of memory");
    for (int j = 0; j < src->noutputs; j++)
        outs[j] = remap[src->outputs[j]];
    cj_status st = cj_graph_set_outputs(g, outs, src->noutputs, err);
    free(outs);
    return st;
}

/* ---- bodies of region nodes: shared, reference counted ------------------- */

/* See regions.h. */
void cj_body_ref(cj_body *b) {
    if (b) b->refs++;
}

void cj_body_unref(cj_body *b) {
    if (!b || --b->refs > 0) return;
    for (int i = 0; i < b->ngraphs; i++) cj_graph_free(b->graphs[i]);
    free(b->graphs);
    free(b->result_shape);
    free(b->result_dtype);
    free(b);
}

/* See regions.h. */
int64_t cj_bodies_heap_bytes(const cj_graph *g) {
    int64_t n = cj_heap_bytes(g->bodies, sizeof(cj_body *) * (size_t)g->bodies_cap);
    for (int i = 0; i < g->nbodies; i++) {
        const cj_body *b = g->bodies[i];
        n += (int64_t)sizeof *b / b->refs; /* shared: each holder counts its share */
        for (int k = 0; k < b->ngraphs; k++) n += cj_graph_heap_bytes(b->graphs[k]) / b->refs;
    }
    return n;
}

/* ---- validation of one node ------------------------------------------ */

/* Checks the kind-specific rules that tie a node to its inputs.  Returns
 * NULL when the node is consistent, else a static reason. */
static const char *check_node(const cj_graph *g, const cj_node *n)
{
    const cj_node *in[CJ_MAX_INPUTS] = {NULL}; /* fixed arities; concatenate reads its inputs below */
    for (int i = 0; i < n->ninputs && i < CJ_MAX_INPUTS; i++)
        in[i] = &g->nodes[n->inputs[i]];
    const cj_shape *s = &n->shape;
    cj_op op = n->op;

    switch (cj_op_kind(op)) {
    case CJ_OPKIND_SOURCE:
        if ((op == CJ_OP_PARAM || op == CJ_OP_ARRAY) && n->attrs.index < 0)
            return "negative slot index";
        if (op == CJ_OP_IOTA) {
            if (n->attrs.axis < 0 || n->attrs.axis >= s->rank)
                return "iota axis out of range";
            if (n->dtype == CJ_BOOL)
                return "iota cannot be bool";
        }
        return NULL;
    case CJ_OPKIND_UNARY: { /* the record's dtype rule (ops_unary.def); identities keep the dtype */
        const cj_unary_info *u = cj_unary(op);
        cj_unary_dtypes rule = u ? u->dtypes : CJ_UDT_SAME;
        if (!cj_shape_equal(&in[0]->shape, s))
            return "input shape differs from the node's";
        if (rule == CJ_UDT_LOGIC)
            return in[0]->dtype == CJ_BOOL && n->dtype == CJ_BOOL ? NULL : "bool in, bool out (LOGIC)";
        if (rule == CJ_UDT_TEST)
            return is_float(in[0]->dtype) && n->dtype == CJ_BOOL ? NULL : "float in, bool out (TEST)";
        if (in[0]->dtype != n->dtype)
            return "input dtype differs from the node's";
        if (rule == CJ_UDT_FLOAT && !is_float(n->dtype))
            return "float math on a non-float dtype";
        if (rule == CJ_UDT_NOBOOL && n->dtype == CJ_BOOL)
            return "not defined for bool (NOBOOL)";
        if (rule == CJ_UDT_BITS && is_float(n->dtype))
            return "bitwise op on a float dtype";
        return NULL;
    }
    case CJ_OPKIND_CAST:
        if (!cj_shape_equal(&in[0]->shape, s))
            return "input shape differs from the node's";
        if (op == CJ_OP_BITCAST && (cj_dtype_size(in[0]->dtype) != cj_dtype_size(n->dtype) || n->dtype == CJ_BOOL ||
                                    in[0]->dtype == CJ_BOOL))
            return "bitcast between dtypes of different widths";
        return NULL;
    case CJ_OPKIND_BINARY:
    case CJ_OPKIND_COMPARE:
        if (!cj_shape_equal(&in[0]->shape, s) || !cj_shape_equal(&in[1]->shape, s))
            return "input shapes differ from the node's";
        if (in[0]->dtype != in[1]->dtype)
            return "input dtypes differ";
        if (cj_op_kind(op) == CJ_OPKIND_COMPARE)
            return n->dtype == CJ_BOOL ? NULL : "a comparison gives bool";
        if (in[0]->dtype != n->dtype)
            return "input dtype differs from the node's";
        if (op == CJ_OP_DIV && !is_float(n->dtype))
            return "div needs a float dtype";
        if ((op == CJ_OP_LOGICAL_AND || op == CJ_OP_LOGICAL_OR) && n->dtype != CJ_BOOL)
            return "logical ops need bool";
        if ((op == CJ_OP_SUB || op == CJ_OP_FLOORDIV || op == CJ_OP_POW) && n->dtype == CJ_BOOL)
            return "sub/floordiv/pow of bool";
        if (cj_op_has_flag(op, CJ_OPF_BITS) && is_float(n->dtype))
            return "bitwise op on a float dtype";
        if (cj_op_has_flag(op, CJ_OPF_BITS) && n->dtype == CJ_BOOL && op != CJ_OP_BITWISE_AND &&
            op != CJ_OP_BITWISE_OR && op != CJ_OP_BITWISE_XOR)
            return "shift of bool";
        return NULL;
    case CJ_OPKIND_SELECT:
        for (int i = 0; i < 3; i++)
            if (!cj_shape_equal(&in[i]->shape, s))
                return "input shapes differ from the node's";
        if (in[0]->dtype != CJ_BOOL)
            return "select condition must be bool";
        if (in[1]->dtype != n->dtype || in[2]->dtype != n->dtype)
            return "select branches must have the node's dtype";
        return NULL;
    case CJ_OPKIND_TERNARY:
        for (int i = 0; i < 3; i++) {
            if (!cj_shape_equal(&in[i]->shape, s))
                return "input shapes differ from the node's";
            if (in[i]->dtype != n->dtype)
                return "input dtype differs from the node's";
        }
        return is_float(n->dtype) ? NULL : "fma needs a float dtype";
    case CJ_OPKIND_MOVE: {
        const cj_shape *is = &in[0]->shape;
        if (in[0]->dtype != n->dtype)
            return "input dtype differs from the node's";
        if (op == CJ_OP_BROADCAST)
            return broadcastable_to(is, s) ? NULL : "input does not broadcast to the node's shape";
        if (op == CJ_OP_RESHAPE)
            return cj_shape_numel(is) == cj_shape_numel(s) ? NULL : "reshape changes the element count";
        if (is->rank != s->rank)
            return "transpose/slice must keep the rank";
        if (op == CJ_OP_TRANSPOSE) {
            bool seen[CJ_MAX_RANK] = {false};
            for (int d = 0; d < s->rank; d++) {
                int p = n->attrs.perm[d];
                if (p < 0 || p >= s->rank || seen[p])
                    return "perm is not a permutation";
                seen[p] = true;
                if (s->dims[d] != is->dims[p])
                    return "transposed shape is wrong";
            }
            return NULL;
        }
        /* SLICE: every index start + i*step, i < dims[d], must be in range. */
        for (int d = 0; d < s->rank; d++) {
            int64_t st = n->attrs.start[d], step = n->attrs.step[d], len = s->dims[d];
            if (step == 0)
                return "slice step is zero";
            if (len == 0)
                continue;
            int64_t span, last;
            if (st < 0 || st >= is->dims[d] || __builtin_mul_overflow(len - 1, step, &span) ||
                __builtin_add_overflow(st, span, &last) || last < 0 || last >= is->dims[d])
                return "slice reads outside its input";
        }
        return NULL;
    }
    case CJ_OPKIND_CONCAT: {
        int ax = n->attrs.axis;
        if (ax < 0 || ax >= s->rank)
            return "concatenate axis out of range";
        int64_t total = 0;
        for (int i = 0; i < n->ninputs; i++) {
            const cj_node *x = &g->nodes[n->inputs[i]];
            if (x->dtype != n->dtype)
                return "concatenate inputs must have the node's dtype";
            if (x->shape.rank != s->rank)
                return "concatenate inputs must have the node's rank";
            for (int d = 0; d < s->rank; d++)
                if (d != ax && x->shape.dims[d] != s->dims[d])
                    return "concatenate inputs differ off the axis";
            total += x->shape.dims[ax];
        }
        return total == s->dims[ax] ? NULL : "concatenate length is wrong";
    }
    case CJ_OPKIND_REDUCE: {
        const cj_shape *is = &in[0]->shape;
        if (in[0]->dtype != n->dtype)
            return "input dtype differs from the node's";
        if (n->attrs.axes >> is->rank)
            return "reduce axes out of range";
        int r = 0;
        for (int d = 0; d < is->rank; d++) {
            if (n->attrs.axes & (1u << d)) {
                if (is->dims[d] == 0 && (op == CJ_OP_REDUCE_MAX || op == CJ_OP_REDUCE_MIN))
                    return "max/min over an empty axis";
                continue;
            }
            if (r >= s->rank || s->dims[r] != is->dims[d])
                return "reduced shape is wrong";
            r++;
        }
        return r == s->rank ? NULL : "reduced shape is wrong";
    }
    case CJ_OPKIND_REGION:
        return cj_region_check(g, n);
    case CJ_OPKIND_GATHER:
    case CJ_OPKIND_SCATTER:
    case CJ_OPKIND_SORT:
        return cj_index_check(g, n);
    case CJ_OPKIND_LINALG:
        return cj_linalg_check(g, n);
    case CJ_OPKIND_MATMUL: {
        const cj_shape *a = &in[0]->shape, *b = &in[1]->shape;
        int r = s->rank;
        if (r < 2 || a->rank != r || b->rank != r)
            return "matmul operands must have the node's rank >= 2";
        if (in[0]->dtype != n->dtype || in[1]->dtype != n->dtype)
            return "matmul dtypes must agree";
        for (int d = 0; d < r - 2; d++)
            if (a->dims[d] != s->dims[d] || b->dims[d] != s->dims[d])
                return "matmul batch dims differ";
        if (a->dims[r - 1] != b->dims[r - 2] || a->dims[r - 2] != s->dims[r - 2] ||
            b->dims[r - 1] != s->dims[r - 1])
            return "matmul (M, K) @ (K, N) -> (M, N) does not hold";
        return NULL;
    }
    }
    return "unknown op kind";
}

/* Copies the node in (inputs into the arena, the NAME string too). */
static int push_node(cj_graph *g, const cj_node *proto, cj_error *err)
{
    const char *opname = cj_op_name(proto->op);
    if (g->nnodes == g->cap) {
        if (g->cap > INT_MAX / 2)
            return fail(g, err, CJ_ERR_MEMORY, opname, proto->loc, "too many nodes");
        int cap = g->cap ? g->cap * 2 : 64;
        cj_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (nodes == NULL)
            return fail(g, err, CJ_ERR_MEMORY, opname, proto->loc, "out of memory");
        g->nodes = nodes;
        g->cap = cap;
    }
    int *inputs = NULL;
    if (proto->ninputs > 0) {
        inputs = cj_arena_alloc(&g->arena, (size_t)proto->ninputs * sizeof(int));
        if (inputs == NULL)
            return fail(g, err, CJ_ERR_MEMORY, opname, proto->loc, "out of memory");
        memcpy(inputs, proto->inputs, (size_t)proto->ninputs * sizeof(int));
    }
    const char *name = NULL;
    if ((cj_op_attrs(proto->op) & CJ_ATTR_NAME) && proto->attrs.name != NULL) {
        name = cj_arena_strdup(&g->arena, proto->attrs.name);
        if (name == NULL)
            return fail(g, err, CJ_ERR_MEMORY, opname, proto->loc, "out of memory");
    }
    cj_node *n = &g->nodes[g->nnodes];
    *n = *proto;
    n->inputs = inputs;
    n->attrs.name = name;
    for (int d = n->shape.rank; d < CJ_MAX_RANK; d++)
        n->shape.dims[d] = 0; /* so that whole-struct compares and hashes agree */
    if (n->op == CJ_OP_PARAM && n->attrs.index >= g->nparams)
        g->nparams = n->attrs.index + 1;
    if (n->op == CJ_OP_ARRAY && n->attrs.index >= g->narrays)
        g->narrays = n->attrs.index + 1;
    return g->nnodes++;
}

/* Validates proto against its inputs and the op table, then appends a copy.
 * Returns the new node id, or -1 with err set (CJ_ERR_INTERNAL for an
 * inconsistent node, CJ_ERR_VALUE for an invalid shape). */
int cj_graph_append(cj_graph *g, const cj_node *proto, cj_error *err)
{
    if (g == NULL || proto == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "graph: append of NULL"), -1;
    if (!op_valid(proto->op))
        return cj_error_set(err, CJ_ERR_INTERNAL, "graph: invalid op %d", (int)proto->op), -1;
    const char *opname = cj_op_name(proto->op);
    if (proto->loc < -1 || proto->loc >= g->nlocs)
        return fail(g, err, CJ_ERR_INTERNAL, opname, -1, "invalid location id %d", proto->loc);
    if (!dtype_ok(proto->dtype))
        return fail(g, err, CJ_ERR_INTERNAL, opname, proto->loc, "invalid dtype %d", (int)proto->dtype);
    if (!shape_check(g, opname, &proto->shape, proto->loc, err))
        return -1;
    int arity = cj_op_arity(proto->op);
    int lo = arity >= 0 ? arity : cj_op_kind(proto->op) == CJ_OPKIND_REGION ? 0 : 2, hi = arity < 0 ? INT_MAX : arity;
    if (proto->ninputs < lo || proto->ninputs > hi || (proto->ninputs > 0 && proto->inputs == NULL))
        return fail(g, err, CJ_ERR_INTERNAL, opname, proto->loc, "takes %d to %d inputs, got %d", lo,
                    hi, proto->ninputs);
    for (int i = 0; i < proto->ninputs; i++) {
        if (!node_ok(g, proto->inputs[i]))
            return fail(g, err, CJ_ERR_INTERNAL, opname, proto->loc, "input %d is node %d, which does not exist",
                        i, proto->inputs[i]);
    }
    if ((cj_op_attrs(proto->op) & CJ_ATTR_NAME) && proto->attrs.name == NULL)
        return fail(g, err, CJ_ERR_INTERNAL, opname, proto->loc, "name is NULL");
    const char *why = check_node(g, proto);
    if (why != NULL)
        return fail(g, err, CJ_ERR_INTERNAL, opname, proto->loc, "invalid node: %s", why);
    return push_node(g, proto, err);
}

/* Appends a node built from parts (inputs copied; attrs may be NULL). */
int emit(cj_graph *g, cj_op op, cj_dtype dt, bool weak, const cj_shape *s, const int *inputs,
                int ninputs, const cj_attrs *attrs, int loc, cj_error *err)
{
    cj_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.dtype = dt;
    n.weak = weak;
    n.shape = *s;
    n.ninputs = ninputs;
    n.inputs = (int *)inputs;
    n.loc = loc;
    n.region = g->current_region;
    if (attrs)
        n.attrs = *attrs;
    return cj_graph_append(g, &n, err);
}

/* ---- promotion --------------------------------------------------------- */

/* NumPy's result type for two strong dtypes (np.result_type).  Mixing any
 * integer with float32 gives float64 because float32 cannot hold every
 * int32/int64 value exactly (int8 and int16 fit in float32); an unsigned
 * with a signed int needs the smallest signed type holding both ranges,
 * and uint64 with any signed int has none: NumPy 2 gives float64. */
static const cj_dtype strong_table[CJ_NUM_DTYPES][CJ_NUM_DTYPES] = {
    /*              bool        int32       int64       float32     float64     uint32      int8        int16       uint8       uint16      uint64 */
    [CJ_BOOL]    = {CJ_BOOL,    CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_UINT32,  CJ_INT8,    CJ_INT16,   CJ_UINT8,   CJ_UINT16,  CJ_UINT64},
    [CJ_INT32]   = {CJ_INT32,   CJ_INT32,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_INT64,   CJ_INT32,   CJ_INT32,   CJ_INT32,   CJ_INT32,   CJ_FLOAT64},
    [CJ_INT64]   = {CJ_INT64,   CJ_INT64,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_INT64,   CJ_INT64,   CJ_INT64,   CJ_INT64,   CJ_INT64,   CJ_FLOAT64},
    [CJ_FLOAT32] = {CJ_FLOAT32, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT32, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT32, CJ_FLOAT32, CJ_FLOAT32, CJ_FLOAT32, CJ_FLOAT64},
    [CJ_FLOAT64] = {CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64},
    [CJ_UINT32]  = {CJ_UINT32,  CJ_INT64,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_UINT32,  CJ_INT64,   CJ_INT64,   CJ_UINT32,  CJ_UINT32,  CJ_UINT64},
    [CJ_INT8]    = {CJ_INT8,    CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_INT64,   CJ_INT8,    CJ_INT16,   CJ_INT16,   CJ_INT32,   CJ_FLOAT64},
    [CJ_INT16]   = {CJ_INT16,   CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_INT64,   CJ_INT16,   CJ_INT16,   CJ_INT16,   CJ_INT32,   CJ_FLOAT64},
    [CJ_UINT8]   = {CJ_UINT8,   CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_UINT32,  CJ_INT16,   CJ_INT16,   CJ_UINT8,   CJ_UINT16,  CJ_UINT64},
    [CJ_UINT16]  = {CJ_UINT16,  CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_UINT32,  CJ_INT32,   CJ_INT32,   CJ_UINT16,  CJ_UINT16,  CJ_UINT64},
    [CJ_UINT64]  = {CJ_UINT64,  CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_UINT64,  CJ_FLOAT64, CJ_FLOAT64, CJ_UINT64,  CJ_UINT64,  CJ_UINT64},
};

/* Returns the NumPy 2 (NEP 50) result dtype of a op b.  A weak operand (a
 * Python scalar) contributes only its kind: it yields to the strong
 * operand's dtype unless its kind is higher, in which case the result is
 * that kind's default (int64, float64).  *weak_out (may be NULL) is true
 * only when both are weak.  Invalid dtypes read as float64. */
cj_dtype cj_promote(cj_dtype a, bool a_weak, cj_dtype b, bool b_weak, bool *weak_out)
{
    if (!dtype_ok(a))
        a = CJ_FLOAT64;
    if (!dtype_ok(b))
        b = CJ_FLOAT64;
    cj_kind ka = cj_dtype_kind(a), kb = cj_dtype_kind(b);
    if (weak_out)
        *weak_out = a_weak && b_weak;
    if (a_weak && b_weak)
        return kind_default(ka > kb ? ka : kb);
    if (a_weak)
        return ka <= kb ? b : kind_default(ka);
    if (b_weak)
        return kb <= ka ? a : kind_default(kb);
    cj_dtype r = strong_table[a][b];
    /* x64 off: a wider dtype made up by the table becomes its 32-bit one */
    return r == a || r == b ? r : cj_dtype_canon(r);
}

/* See graph.h.  Strong operands are promoted among themselves first; a
 * weak operand then only raises the kind (NEP 50), so the order of the
 * operands does not matter: bool, a weak float and float32 give float32. */
cj_dtype cj_promote_all(const cj_dtype *dts, const bool *weak, int n, bool *weak_out)
{
    cj_dtype r = CJ_BOOL;
    bool any_strong = false;
    for (int i = 0; i < n; i++)
        if (!weak[i]) {
            r = any_strong ? cj_promote(r, false, dts[i], false, NULL) : dts[i];
            any_strong = true;
        }
    bool w = !any_strong;
    for (int i = 0; i < n; i++)
        if (weak[i])
            r = cj_promote(r, w, dts[i], true, &w);
    if (weak_out)
        *weak_out = w;
    return r;
}

/* ---- constants --------------------------------------------------------- */

/* Makes fvalue and ivalue agree for dtype dt: the field that dt reads
 * (fvalue for floats, ivalue for ints and bool) is the value; it is rounded
 * to dt (float32 rounding, int32 wrap-around, bool 0/1), and the other field
 * gets the same number (0 when a float does not fit in int64). */
static void const_normalize(cj_dtype dt, double *f, int64_t *i)
{
    switch (cj_dtype_kind(dt)) {
    case CJ_KIND_FLOAT:
        if (dt == CJ_FLOAT32)
            *f = (double)(float)*f;
        if (*f >= -9223372036854775808.0 && *f < 9223372036854775808.0)
            *i = (int64_t)*f;
        else
            *i = 0;
        break;
    case CJ_KIND_INT:
        *i = cj_dtype_wrap_int(dt, *i); /* wraps like NumPy's astype */
        *f = cj_dtype_int_to_double(dt, *i);
        break;
    case CJ_KIND_BOOL:
        *i = *i != 0;
        *f = (double)*i;
        break;
    }
}

/* Converts constant node c to dtype dt with C cast rules (what a CAST node
 * would compute).  Returns false when the result is not defined in C
 * (a nan or out-of-range float to an integer): then a CAST node must do it. */
bool const_convert(const cj_node *c, cj_dtype dt, double *f, int64_t *i)
{
    bool from_float = is_float(c->dtype);
    switch (cj_dtype_kind(dt)) {
    case CJ_KIND_FLOAT:
        *f = from_float ? c->attrs.fvalue : cj_dtype_int_to_double(c->dtype, c->attrs.ivalue);
        *i = 0;
        break;
    case CJ_KIND_BOOL:
        /* nan is true, as bool(nan) in Python */
        *i = from_float ? c->attrs.fvalue != 0.0 : c->attrs.ivalue != 0;
        break;
    case CJ_KIND_INT:
        if (from_float) {
            double v = c->attrs.fvalue;
            /* the unsigned go through int64 (as codegen's cast does), so -1.0
             * wraps to 2**32 - 1; the narrower signed through int32; uint64
             * takes [2**63, 2**64) as they are */
            bool narrow = dt == CJ_INT32 || dt == CJ_INT8 || dt == CJ_INT16;
            double lo = narrow ? -2147483649.0 : -9223372036854777856.0;
            double hi = narrow ? 2147483648.0 : dt == CJ_UINT64 ? 18446744073709551616.0 : 9223372036854775808.0;
            if (!(v > lo && v < hi))
                return false;
            *i = v >= 9223372036854775808.0 ? (int64_t)(uint64_t)v : (int64_t)v;
        } else {
            *i = c->attrs.ivalue;
        }
        break;
    }
    const_normalize(dt, f, i);
    return true;
}

/* Returns a CONSTANT node of the given dtype and shape (no shape checks). */
int emit_constant(cj_graph *g, double f, int64_t i, cj_dtype dt, bool weak, const cj_shape *s,
                         int loc, cj_error *err)
{
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.fvalue = f;
    a.ivalue = i;
    const_normalize(dt, &a.fvalue, &a.ivalue);
    return emit(g, CJ_OP_CONSTANT, dt, weak, s, NULL, 0, &a, loc, err);
}

/* Returns node x converted to dtype dt and broadcast to shape s: x itself
 * when it already is, a re-created constant when x is a CONSTANT, else a
 * CAST and/or a BROADCAST node.  Casts happen before broadcasting, where
 * there are fewer elements.  The caller has checked that x's shape
 * broadcasts to s. */
int coerce(cj_graph *g, const char *opname, int x, cj_dtype dt, const cj_shape *s, int loc,
                  cj_error *err)
{
    cj_node n = g->nodes[x];
    bool same_shape = cj_shape_equal(&n.shape, s);
    if (n.dtype == dt && same_shape)
        return x;
    /* NumPy 2 refuses a Python int that the array's dtype cannot hold
     * (int32_array + 2**40 is an OverflowError there) rather than wrap it. */
    bool from_u64 = n.dtype == CJ_UINT64; /* a Python int of 2**63 or more */
    if (n.op == CJ_OP_CONSTANT && n.weak && cj_dtype_kind(n.dtype) == CJ_KIND_INT &&
        cj_dtype_kind(dt) == CJ_KIND_INT && !cj_dtype_int_fits(dt, n.attrs.ivalue, from_u64)) {
        if (from_u64)
            return fail(g, err, CJ_ERR_OVERFLOW, opname, loc, "Python integer %llu out of bounds for %s",
                        (unsigned long long)n.attrs.ivalue, cj_dtype_name(dt));
        return fail(g, err, CJ_ERR_OVERFLOW, opname, loc, "Python integer %lld out of bounds for %s",
                    (long long)n.attrs.ivalue, cj_dtype_name(dt));
    }
    if (n.op == CJ_OP_CONSTANT) {
        double f = 0;
        int64_t i = 0;
        if (const_convert(&n, dt, &f, &i))
            return emit_constant(g, f, i, dt, n.weak, s, loc, err);
    }
    int id = x;
    if (n.dtype != dt) {
        id = emit(g, CJ_OP_CAST, dt, false, &n.shape, &id, 1, NULL, loc, err);
        if (id < 0)
            return -1;
    }
    if (!same_shape)
        id = emit(g, CJ_OP_BROADCAST, dt, n.weak && n.dtype == dt, s, &id, 1, NULL, loc, err);
    return id;
}

/* ---- checkpoint regions ------------------------------------------------ */

/* See graph.h. */
int cj_graph_region_begin(cj_graph *g, cj_save_policy policy, const char *const *names, int nnames,
                          cj_error *err)
{
    if (g->nregions == 0) {
        g->regions = calloc(8, sizeof *g->regions);
        if (g->regions == NULL)
            return cj_error_set(err, CJ_ERR_MEMORY, "checkpoint: out of memory"), -1;
        g->regions_cap = 8;
        g->nregions = 1; /* region 0: outside every checkpoint */
    }
    if (g->nregions == g->regions_cap) {
        cj_region *r = realloc(g->regions, (size_t)g->regions_cap * 2 * sizeof *r);
        if (r == NULL)
            return cj_error_set(err, CJ_ERR_MEMORY, "checkpoint: out of memory"), -1;
        g->regions = r;
        g->regions_cap *= 2;
    }
    cj_region *r = &g->regions[g->nregions];
    memset(r, 0, sizeof *r);
    r->parent = g->current_region;
    r->policy = policy;
    if (nnames > 0) {
        r->names = cj_arena_alloc(&g->arena, sizeof(char *) * (size_t)nnames);
        if (r->names == NULL)
            return cj_error_set(err, CJ_ERR_MEMORY, "checkpoint: out of memory"), -1;
        for (int i = 0; i < nnames; i++)
            if ((r->names[i] = cj_arena_strdup(&g->arena, names[i])) == NULL)
                return cj_error_set(err, CJ_ERR_MEMORY, "checkpoint: out of memory"), -1;
        r->nnames = nnames;
    }
    g->current_region = g->nregions;
    return g->nregions++;
}

/* See graph.h. */
void cj_graph_region_end(cj_graph *g, int id)
{
    if (id > 0 && id < g->nregions && g->current_region == id)
        g->current_region = g->regions[id].parent;
}
