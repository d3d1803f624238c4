/* graph.c - the traced graph: the op table (ops.def) and its accessors,
 * node storage, validation, the builders (shape and dtype inference with
 * NumPy 2 semantics) and the text form.
 *
 * Builders make every implicit step explicit: broadcasting becomes
 * BROADCAST nodes, promotion becomes CAST nodes (constants are re-created
 * at the wanted dtype and shape instead), so that the primitives that
 * reach the later passes never mix shapes or dtypes.  User errors are
 * found before any node is appended, so a failed builder leaves no
 * half-built nodes behind (except where memory runs out midway). */
#include "graph.h"
#include "regions.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the op table (ops.def) ------------------------------------------ */

static const struct {
    const char *name;
    cj_opkind kind;
    int arity;
    unsigned flags;
    int cost;
    cj_identity identity;
    unsigned attrs;
} op_info[CJ_NUM_OPS] = {
#define OP(name, kind, text, arity, flags, cost, identity, attrs, doc) \
    [CJ_OP_##name] = {text, CJ_OPKIND_##kind, arity, flags, cost, CJ_IDENTITY_##identity, attrs},
#include "ops.def"
#undef OP
};

static bool op_valid(cj_op op)
{
    return (int)op >= 0 && op < CJ_NUM_OPS;
}

/* Returns the op's static text name ("add"), "?" if op is invalid. */
const char *cj_op_name(cj_op op)
{
    return op_valid(op) ? op_info[op].name : "?";
}

/* Returns the op's kind from ops.def (SOURCE for an invalid op). */
cj_opkind cj_op_kind(cj_op op)
{
    return op_valid(op) ? op_info[op].kind : CJ_OPKIND_SOURCE;
}

/* The accessors below read one column each; see graph.h and ops.def. */
int cj_op_arity(cj_op op)
{
    return op_valid(op) ? op_info[op].arity : 0;
}

unsigned cj_op_flags(cj_op op)
{
    return op_valid(op) ? op_info[op].flags : 0;
}

bool cj_op_has_flag(cj_op op, unsigned flag)
{
    return (cj_op_flags(op) & flag) != 0;
}

int cj_op_cost(cj_op op)
{
    return op_valid(op) ? op_info[op].cost : 0;
}

cj_identity cj_op_identity(cj_op op)
{
    return op_valid(op) ? op_info[op].identity : CJ_IDENTITY_NONE;
}

unsigned cj_op_attrs(cj_op op)
{
    return op_valid(op) ? op_info[op].attrs : 0;
}

/* See graph.h. */
bool cj_reduce_identity(cj_op op, cj_dtype dt, double *fvalue, int64_t *ivalue)
{
    bool int32 = dt == CJ_INT32, is_bool = dt == CJ_BOOL, uint32 = dt == CJ_UINT32;
    *fvalue = 0;
    *ivalue = 0;
    switch (cj_op_identity(op)) {
    case CJ_IDENTITY_NONE:
        return false;
    case CJ_IDENTITY_ZERO:
        return true;
    case CJ_IDENTITY_ONE:
        *fvalue = 1;
        *ivalue = 1;
        return true;
    case CJ_IDENTITY_LOWEST:
        *fvalue = -INFINITY;
        *ivalue = is_bool || uint32 ? 0 : int32 ? INT32_MIN : INT64_MIN;
        return true;
    case CJ_IDENTITY_HIGHEST:
        *fvalue = INFINITY;
        *ivalue = is_bool ? 1 : uint32 ? (int64_t)UINT32_MAX : int32 ? INT32_MAX : INT64_MAX;
        return true;
    }
    return false;
}

/* Looks an op up by its text name; returns false (out untouched) if none. */
bool cj_op_from_name(const char *name, cj_op *out)
{
    if (name == NULL)
        return false;
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (strcmp(name, op_info[i].name) == 0) {
            if (out)
                *out = (cj_op)i;
            return true;
        }
    }
    return false;
}

/* ---- small helpers ---------------------------------------------------- */

static bool is_float(cj_dtype dt) { return cj_dtype_kind(dt) == CJ_KIND_FLOAT; }

static bool dtype_ok(cj_dtype dt) { return (int)dt >= 0 && dt < CJ_NUM_DTYPES; }

/* The dtype a weak scalar of this kind takes on its own (NumPy's defaults). */
static cj_dtype kind_default(cj_kind k)
{
    return k == CJ_KIND_FLOAT ? CJ_FLOAT64 : k == CJ_KIND_INT ? CJ_INT64 : CJ_BOOL;
}

/* The float math ops that NumPy computes in floating point only. */
static bool is_float_math(cj_op op)
{
    return cj_op_has_flag(op, CJ_OPF_FLOAT_MATH);
}

static bool node_ok(const cj_graph *g, int id) { return id >= 0 && id < g->nnodes; }

/* "(2, 3) float32": how error messages name an operand. */
static const char *describe(const cj_node *n, char *buf, size_t size)
{
    char sh[256];
    snprintf(buf, size, "%s %s", cj_shape_str(&n->shape, sh, sizeof sh),
             cj_dtype_name(n->dtype));
    return buf;
}

static const char *shape_text(const cj_shape *s, char *buf, size_t size)
{
    return cj_shape_str(s, buf, size);
}

/* Records "<opname>: <message> (at file:line)" in err; returns -1 so that
 * builders can `return fail(...)`. */
static int fail(const cj_graph *g, cj_error *err, cj_status status, const char *opname, int loc,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail(const cj_graph *g, cj_error *err, cj_status status, const char *opname, int loc,
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
static bool shape_check(const cj_graph *g, const char *opname, const cj_shape *s, int loc,
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
static bool broadcast_shapes(const cj_shape *a, const cj_shape *b, cj_shape *out)
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
static bool broadcastable_to(const cj_shape *from, const cj_shape *to)
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
    case CJ_OPKIND_UNARY:
        if (!cj_shape_equal(&in[0]->shape, s))
            return "input shape differs from the node's";
        if (op == CJ_OP_LOGICAL_NOT)
            return in[0]->dtype == CJ_BOOL && n->dtype == CJ_BOOL ? NULL : "logical_not is bool -> bool";
        if (op == CJ_OP_ISNAN || op == CJ_OP_ISFINITE)
            return is_float(in[0]->dtype) && n->dtype == CJ_BOOL ? NULL : "isnan/isfinite is float -> bool";
        if (in[0]->dtype != n->dtype)
            return "input dtype differs from the node's";
        if (is_float_math(op) && !is_float(n->dtype))
            return "float math on a non-float dtype";
        if ((op == CJ_OP_NEG || op == CJ_OP_SIGN) && n->dtype == CJ_BOOL)
            return "neg/sign of bool";
        if (cj_op_has_flag(op, CJ_OPF_BITS) && is_float(n->dtype))
            return "bitwise op on a float dtype";
        return NULL;
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
static int emit(cj_graph *g, cj_op op, cj_dtype dt, bool weak, const cj_shape *s, const int *inputs,
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

/* Builder prologue: the node id must exist. */
#define CHECK_ID(g, id, opname, loc, err)                                                        \
    do {                                                                                         \
        if (!node_ok((g), (id)))                                                                 \
            return fail((g), (err), CJ_ERR_INTERNAL, (opname), (loc), "node %d does not exist",  \
                        (id));                                                           \
    } while (0)

/* ---- promotion --------------------------------------------------------- */

/* NumPy's result type for two strong dtypes (np.result_type).  Mixing any
 * integer with float32 gives float64 because float32 cannot hold every
 * int32/int64 value exactly; uint32 with a signed int needs int64, the
 * smallest signed type holding both ranges. */
static const cj_dtype strong_table[CJ_NUM_DTYPES][CJ_NUM_DTYPES] = {
    /*              bool        int32       int64       float32     float64     uint32 */
    [CJ_BOOL]    = {CJ_BOOL,    CJ_INT32,   CJ_INT64,   CJ_FLOAT32, CJ_FLOAT64, CJ_UINT32},
    [CJ_INT32]   = {CJ_INT32,   CJ_INT32,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_INT64},
    [CJ_INT64]   = {CJ_INT64,   CJ_INT64,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_INT64},
    [CJ_FLOAT32] = {CJ_FLOAT32, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT32, CJ_FLOAT64, CJ_FLOAT64},
    [CJ_FLOAT64] = {CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64, CJ_FLOAT64},
    [CJ_UINT32]  = {CJ_UINT32,  CJ_INT64,   CJ_INT64,   CJ_FLOAT64, CJ_FLOAT64, CJ_UINT32},
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
    return strong_table[a][b];
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
        if (dt == CJ_INT32)
            *i = (int32_t)(uint32_t)(uint64_t)*i; /* wraps like NumPy's astype */
        else if (dt == CJ_UINT32)
            *i = (int64_t)(uint32_t)(uint64_t)*i;
        *f = (double)*i;
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
static bool const_convert(const cj_node *c, cj_dtype dt, double *f, int64_t *i)
{
    bool from_float = is_float(c->dtype);
    switch (cj_dtype_kind(dt)) {
    case CJ_KIND_FLOAT:
        *f = from_float ? c->attrs.fvalue : (double)c->attrs.ivalue;
        *i = 0;
        break;
    case CJ_KIND_BOOL:
        /* nan is true, as bool(nan) in Python */
        *i = from_float ? c->attrs.fvalue != 0.0 : c->attrs.ivalue != 0;
        break;
    case CJ_KIND_INT:
        if (from_float) {
            double v = c->attrs.fvalue;
            /* uint32 goes through int64 (as codegen's cast does), so -1.0 wraps to 2**32 - 1 */
            double lo = dt == CJ_INT32 ? -2147483649.0 : -9223372036854777856.0;
            double hi = dt == CJ_INT32 ? 2147483648.0 : 9223372036854775808.0;
            if (!(v > lo && v < hi))
                return false;
            *i = (int64_t)v;
        } else {
            *i = c->attrs.ivalue;
        }
        break;
    }
    const_normalize(dt, f, i);
    return true;
}

/* Returns a CONSTANT node of the given dtype and shape (no shape checks). */
static int emit_constant(cj_graph *g, double f, int64_t i, cj_dtype dt, bool weak, const cj_shape *s,
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
static int coerce(cj_graph *g, const char *opname, int x, cj_dtype dt, const cj_shape *s, int loc,
                  cj_error *err)
{
    cj_node n = g->nodes[x];
    bool same_shape = cj_shape_equal(&n.shape, s);
    if (n.dtype == dt && same_shape)
        return x;
    /* NumPy 2 refuses a Python int that the array's dtype cannot hold
     * (int32_array + 2**40 is an OverflowError there) rather than wrap it. */
    if (n.op == CJ_OP_CONSTANT && n.weak && cj_dtype_kind(n.dtype) == CJ_KIND_INT &&
        ((dt == CJ_INT32 && (n.attrs.ivalue < INT32_MIN || n.attrs.ivalue > INT32_MAX)) ||
         (dt == CJ_UINT32 && (n.attrs.ivalue < 0 || n.attrs.ivalue > (int64_t)UINT32_MAX))))
        return fail(g, err, CJ_ERR_VALUE, opname, loc, "Python integer %lld out of bounds for %s",
                    (long long)n.attrs.ivalue, cj_dtype_name(dt));
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

/* ---- builders: sources ------------------------------------------------- */

/* Appends parameter slot g->nparams (the next one); returns its node id. */
int cj_build_param(cj_graph *g, const cj_shape *s, cj_dtype dt, bool weak, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "param: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "param", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "param", s, loc, err))
        return -1;
    cj_attrs a = {.index = g->nparams};
    return emit(g, CJ_OP_PARAM, dt, weak, s, NULL, 0, &a, loc, err);
}

/* Appends closed-over array slot g->narrays; returns its node id. */
int cj_build_array(cj_graph *g, const cj_shape *s, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "array: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "array", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "array", s, loc, err))
        return -1;
    cj_attrs a = {.index = g->narrays};
    return emit(g, CJ_OP_ARRAY, dt, false, s, NULL, 0, &a, loc, err);
}

/* Appends a scalar constant broadcast to shape s.  For float dtypes fvalue
 * is the value, for int and bool ivalue; both are stored, made consistent.
 * Returns the node id. */
int cj_build_constant(cj_graph *g, double fvalue, int64_t ivalue, cj_dtype dt, bool weak,
                      const cj_shape *s, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "constant: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "constant", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "constant", s, loc, err))
        return -1;
    return emit_constant(g, fvalue, ivalue, dt, weak, s, loc, err);
}

/* Appends the index along `axis` of shape s as dtype dt (not bool). */
int cj_build_iota(cj_graph *g, const cj_shape *s, int axis, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "iota: graph is NULL"), -1;
    if (!dtype_ok(dt) || dt == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, "iota", loc, "dtype %s is not supported (use an integer or float dtype)",
                    cj_dtype_name(dt));
    if (!shape_check(g, "iota", s, loc, err))
        return -1;
    if (axis < 0 || axis >= s->rank)
        return fail(g, err, CJ_ERR_VALUE, "iota", loc, "axis %d is out of bounds for array of dimension %d",
                    axis, s->rank);
    cj_attrs a = {.axis = axis};
    return emit(g, CJ_OP_IOTA, dt, false, s, NULL, 0, &a, loc, err);
}

/* ---- builders: elementwise --------------------------------------------- */

/* Appends a unary op.  Weak-typedness passes through (as in JAX).  NumPy
 * choices made explicit here:
 *  - float math (exp ... cos, reciprocal) on int or bool computes in float64
 *    (NumPy gives float16 for bool and keeps ints for reciprocal; cjit has no
 *    float16 and keeps one simple rule);
 *  - floor/ceil of int or bool return x itself (NumPy 2 keeps the dtype);
 *  - neg and sign of bool are TypeErrors, as in NumPy;
 *  - isnan/isfinite of int or bool are the constants false/true;
 *  - logical_not casts its input to bool. */
int cj_build_unary(cj_graph *g, cj_op op, int x, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "unary: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    if (cj_op_kind(op) != CJ_OPKIND_UNARY || op == CJ_OP_NAME || !op_valid(op))
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a unary op for cj_build_unary");
    CHECK_ID(g, x, opname, loc, err);
    cj_node n = g->nodes[x];
    char d[300];
    cj_kind k = cj_dtype_kind(n.dtype);

    if (op == CJ_OP_NEG && n.dtype == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, opname, loc,
                    "the boolean negative, the `-` operator, is not supported, use the `~` operator or "
                    "logical_not instead (operand %s)",
                    describe(&n, d, sizeof d));
    if (op == CJ_OP_SIGN && n.dtype == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, opname, loc, "sign is not supported for bool (operand %s)",
                    describe(&n, d, sizeof d));
    if (cj_op_has_flag(op, CJ_OPF_BITS) && k == CJ_KIND_FLOAT)
        return fail(g, err, CJ_ERR_TYPE, opname, loc, "is only supported for integer and bool operands (operand %s)",
                    describe(&n, d, sizeof d));
    if ((op == CJ_OP_FLOOR || op == CJ_OP_CEIL) && k != CJ_KIND_FLOAT)
        return x;
    if ((op == CJ_OP_ISNAN || op == CJ_OP_ISFINITE) && k != CJ_KIND_FLOAT) {
        int v = op == CJ_OP_ISFINITE;
        return emit_constant(g, v, v, CJ_BOOL, n.weak, &n.shape, loc, err);
    }
    cj_dtype in_dt = n.dtype, out_dt = n.dtype;
    if (is_float_math(op) && k != CJ_KIND_FLOAT)
        in_dt = out_dt = CJ_FLOAT64;
    if (op == CJ_OP_LOGICAL_NOT)
        in_dt = out_dt = CJ_BOOL;
    if (op == CJ_OP_ISNAN || op == CJ_OP_ISFINITE)
        out_dt = CJ_BOOL;
    int xi = coerce(g, opname, x, in_dt, &n.shape, loc, err);
    if (xi < 0)
        return -1;
    return emit(g, op, out_dt, n.weak, &n.shape, &xi, 1, NULL, loc, err);
}

/* Appends x converted to dt (C rules, float -> int truncates).  Returns x
 * itself when it already has dtype dt and is strong; the result is strong
 * (an explicit dtype).  Constants are converted here, not at run time. */
int cj_build_cast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "cast: graph is NULL"), -1;
    CHECK_ID(g, x, "cast", loc, err);
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "cast", loc, "unsupported dtype %d", (int)dt);
    cj_node n = g->nodes[x];
    if (n.dtype == dt && !n.weak)
        return x;
    if (n.op == CJ_OP_CONSTANT) {
        double f = 0;
        int64_t i = 0;
        if (const_convert(&n, dt, &f, &i))
            return emit_constant(g, f, i, dt, false, &n.shape, loc, err);
    }
    /* A weak value cast to its own dtype becomes a same-dtype CAST node: it
     * only drops weak-typedness. */
    return emit(g, CJ_OP_CAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
}

/* Appends the bits of x read as dtype dt (lax.bitcast_convert_type for
 * equal widths): float32 <-> int32/uint32, float64 <-> int64.  The result
 * is strong; x itself when it already has dtype dt. */
int cj_build_bitcast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "bitcast: graph is NULL"), -1;
    CHECK_ID(g, x, "bitcast", loc, err);
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "bitcast", loc, "unsupported dtype %d", (int)dt);
    cj_node n = g->nodes[x];
    char d[300];
    if (n.dtype == CJ_BOOL || dt == CJ_BOOL || cj_dtype_size(n.dtype) != cj_dtype_size(dt))
        return fail(g, err, CJ_ERR_TYPE, "bitcast", loc,
                    "needs a dtype of the operand's width other than bool: %s to %s", describe(&n, d, sizeof d),
                    cj_dtype_name(dt));
    if (n.dtype == dt && !n.weak)
        return x;
    if (n.dtype == dt)
        return emit(g, CJ_OP_CAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
    return emit(g, CJ_OP_BITCAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
}

/* Appends a binary or compare op with NumPy broadcasting and NEP 50
 * promotion, after inserting the BROADCAST/CAST nodes that make both
 * operands equal in shape and dtype.  Op-specific dtype rules:
 *  - div computes in float64 when the promoted dtype is not float;
 *  - logical_and/or cast both operands to bool;
 *  - floordiv and pow of bools compute in int64 (NumPy gives int8, which
 *    cjit does not have); maximum/minimum of bools stay bool;
 *  - sub of bools is a TypeError, as in NumPy;
 *  - bitwise and shift ops (CJ_OPF_BITS) refuse floats with a TypeError;
 *    shifts of bools compute in int64 (NumPy: int8);
 *  - comparisons give bool.
 * The result is weak only when both operands are.  Returns the node id. */
int cj_build_binary(cj_graph *g, cj_op op, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "binary: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    cj_opkind kind = cj_op_kind(op);
    if (!op_valid(op) || (kind != CJ_OPKIND_BINARY && kind != CJ_OPKIND_COMPARE))
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a binary op for cj_build_binary");
    CHECK_ID(g, x, opname, loc, err);
    CHECK_ID(g, y, opname, loc, err);
    cj_node a = g->nodes[x], b = g->nodes[y];
    char da[300], db[300];

    cj_shape out;
    if (!broadcast_shapes(&a.shape, &b.shape, &out))
        return fail(g, err, CJ_ERR_VALUE, opname, loc, "operands could not be broadcast together with shapes %s and %s",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    if (!shape_check(g, opname, &out, loc, err))
        return -1;
    bool weak;
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    cj_dtype operand_dt = dt;
    if (op == CJ_OP_LOGICAL_AND || op == CJ_OP_LOGICAL_OR)
        operand_dt = CJ_BOOL;
    else if (op == CJ_OP_DIV && !is_float(dt))
        operand_dt = CJ_FLOAT64;
    else if (cj_op_has_flag(op, CJ_OPF_BITS) && is_float(dt))
        return fail(g, err, CJ_ERR_TYPE, opname, loc,
                    "is only supported for integer and bool operands (operands %s and %s)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    else if ((op == CJ_OP_FLOORDIV || op == CJ_OP_POW || op == CJ_OP_SHIFT_LEFT || op == CJ_OP_SHIFT_RIGHT_LOGICAL ||
              op == CJ_OP_SHIFT_RIGHT_ARITHMETIC || op == CJ_OP_ROTATE_LEFT) && dt == CJ_BOOL)
        operand_dt = CJ_INT64;
    else if (op == CJ_OP_SUB && dt == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, opname, loc,
                    "boolean subtract, the `-` operator, is not supported, use logical_xor or "
                    "the `^` operator instead (operands %s and %s)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    cj_dtype result_dt = kind == CJ_OPKIND_COMPARE ? CJ_BOOL : operand_dt;
    int in[2];
    in[0] = coerce(g, opname, x, operand_dt, &out, loc, err);
    if (in[0] < 0)
        return -1;
    in[1] = coerce(g, opname, y, operand_dt, &out, loc, err);
    if (in[1] < 0)
        return -1;
    return emit(g, op, result_dt, weak, &out, in, 2, NULL, loc, err);
}

/* Appends where(cond, x, y): all three broadcast together, cond cast to
 * bool, x and y promoted as in cj_build_binary.  Returns the node id. */
int cj_build_select(cj_graph *g, int cond, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "select: graph is NULL"), -1;
    CHECK_ID(g, cond, "select", loc, err);
    CHECK_ID(g, x, "select", loc, err);
    CHECK_ID(g, y, "select", loc, err);
    cj_node c = g->nodes[cond], a = g->nodes[x], b = g->nodes[y];
    cj_shape out;
    if (!broadcast_shapes(&c.shape, &a.shape, &out) || !broadcast_shapes(&out, &b.shape, &out)) {
        char dc[300], da[300], db[300];
        return fail(g, err, CJ_ERR_VALUE, "select", loc,
                    "operands could not be broadcast together with shapes %s, %s and %s",
                    describe(&c, dc, sizeof dc), describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    }
    if (!shape_check(g, "select", &out, loc, err))
        return -1;
    bool weak;
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    int in[3];
    in[0] = coerce(g, "select", cond, CJ_BOOL, &out, loc, err);
    if (in[0] < 0)
        return -1;
    in[1] = coerce(g, "select", x, dt, &out, loc, err);
    if (in[1] < 0)
        return -1;
    in[2] = coerce(g, "select", y, dt, &out, loc, err);
    if (in[2] < 0)
        return -1;
    return emit(g, CJ_OP_SELECT, dt, weak, &out, in, 3, NULL, loc, err);
}

/* ---- builders: movement ------------------------------------------------ */

/* Appends NumPy broadcast_to(x, to).  Returns x itself when the shape is
 * already `to`; a constant is re-created at the new shape. */
int cj_build_broadcast(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "broadcast: graph is NULL"), -1;
    CHECK_ID(g, x, "broadcast", loc, err);
    if (!shape_check(g, "broadcast", to, loc, err))
        return -1;
    cj_node n = g->nodes[x];
    if (!broadcastable_to(&n.shape, to)) {
        char d[300], sh[256];
        return fail(g, err, CJ_ERR_VALUE, "broadcast", loc, "operand %s cannot be broadcast to shape %s",
                    describe(&n, d, sizeof d), shape_text(to, sh, sizeof sh));
    }
    return coerce(g, "broadcast", x, n.dtype, to, loc, err);
}

/* Appends x reshaped to `to` (same element count, row-major).  Returns x
 * itself when nothing changes. */
int cj_build_reshape(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "reshape: graph is NULL"), -1;
    CHECK_ID(g, x, "reshape", loc, err);
    if (!shape_check(g, "reshape", to, loc, err))
        return -1;
    cj_node n = g->nodes[x];
    if (cj_shape_numel(&n.shape) != cj_shape_numel(to)) {
        char d[300], sh[256];
        return fail(g, err, CJ_ERR_VALUE, "reshape", loc, "cannot reshape array of size %lld into shape %s (operand %s)",
                    (long long)cj_shape_numel(&n.shape), shape_text(to, sh, sizeof sh),
                    describe(&n, d, sizeof d));
    }
    if (cj_shape_equal(&n.shape, to))
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, to, loc, err);
    return emit(g, CJ_OP_RESHAPE, n.dtype, n.weak, to, &x, 1, NULL, loc, err);
}

/* Appends the transpose of x: output dim d is input dim perm[d] (perm has
 * rank entries).  Returns x itself for the identity permutation. */
int cj_build_transpose(cj_graph *g, int x, const int *perm, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "transpose: graph is NULL"), -1;
    CHECK_ID(g, x, "transpose", loc, err);
    cj_node n = g->nodes[x];
    int rank = n.shape.rank;
    if (perm == NULL && rank > 0)
        return fail(g, err, CJ_ERR_INTERNAL, "transpose", loc, "perm is NULL");
    char d[300];
    bool seen[CJ_MAX_RANK] = {false};
    bool identity = true;
    cj_attrs a;
    memset(&a, 0, sizeof a);
    cj_shape out = {.rank = rank};
    for (int i = 0; i < rank; i++) {
        int p = perm[i];
        if (p < 0 || p >= rank)
            return fail(g, err, CJ_ERR_VALUE, "transpose", loc, "axis %d is out of bounds for array of dimension %d (operand %s)",
                        p, rank, describe(&n, d, sizeof d));
        if (seen[p])
            return fail(g, err, CJ_ERR_VALUE, "transpose", loc, "repeated axis %d in perm (operand %s)", p,
                        describe(&n, d, sizeof d));
        seen[p] = true;
        identity = identity && p == i;
        a.perm[i] = p;
        out.dims[i] = n.shape.dims[p];
    }
    if (identity)
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, &out, loc, err);
    return emit(g, CJ_OP_TRANSPOSE, n.dtype, n.weak, &out, &x, 1, &a, loc, err);
}

/* Appends x[start:stop:step] per dim, with the values Python's
 * slice.indices(n) gives (so 0 <= start, stop <= n for positive steps and
 * -1 <= start, stop <= n - 1 for negative ones).  Returns x itself when the
 * slice takes everything in order. */
int cj_build_slice(cj_graph *g, int x, const int64_t *start, const int64_t *stop, const int64_t *step,
                   int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "slice: graph is NULL"), -1;
    CHECK_ID(g, x, "slice", loc, err);
    cj_node n = g->nodes[x];
    int rank = n.shape.rank;
    if (rank > 0 && (start == NULL || stop == NULL || step == NULL))
        return fail(g, err, CJ_ERR_INTERNAL, "slice", loc, "start/stop/step is NULL");
    char d[300];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    cj_shape out = {.rank = rank};
    bool identity = true;
    for (int i = 0; i < rank; i++) {
        int64_t dim = n.shape.dims[i], b = start[i], e = stop[i], s = step[i], len;
        if (s == 0)
            return fail(g, err, CJ_ERR_VALUE, "slice", loc, "slice step cannot be zero (dimension %d of operand %s)", i,
                        describe(&n, d, sizeof d));
        bool ok = s > 0 ? (b >= 0 && b <= dim && e >= 0 && e <= dim)
                        : (b >= -1 && b <= dim - 1 && e >= -1 && e <= dim - 1);
        if (!ok)
            return fail(g, err, CJ_ERR_VALUE, "slice", loc,
                        "start %lld, stop %lld, step %lld is not a normalized slice of dimension %d "
                        "(size %lld) of operand %s",
                        (long long)b, (long long)e, (long long)s, i, (long long)dim, describe(&n, d, sizeof d));
        /* len(range(b, e, s)); unsigned arithmetic because |s| may be 2**63 */
        if (s > 0)
            len = b < e ? (int64_t)((uint64_t)(e - b - 1) / (uint64_t)s) + 1 : 0;
        else
            len = b > e ? (int64_t)((uint64_t)(b - e - 1) / (0 - (uint64_t)s)) + 1 : 0;
        out.dims[i] = len;
        a.start[i] = len > 0 ? b : 0;
        a.step[i] = len > 1 ? s : 1; /* the step of a 0- or 1-long slice never matters */
        identity = identity && len == dim && a.start[i] == 0 && a.step[i] == 1;
    }
    if (identity)
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, &out, loc, err);
    return emit(g, CJ_OP_SLICE, n.dtype, n.weak, &out, &x, 1, &a, loc, err);
}

/* Appends xs[0..n) joined along `axis` (already in [0, rank)), promoting
 * dtypes as NumPy does: one CONCATENATE node with n inputs; a single
 * input is returned as is. */
int cj_build_concatenate(cj_graph *g, const int *xs, int n, int axis, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "concatenate: graph is NULL"), -1;
    if (n < 1 || xs == NULL)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "need at least one array to concatenate");
    for (int i = 0; i < n; i++)
        CHECK_ID(g, xs[i], "concatenate", loc, err);
    const cj_node *first = &g->nodes[xs[0]];
    int rank = first->shape.rank;
    char d0[300], di[300];
    if (rank == 0)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "zero-dimensional arrays cannot be concatenated (operand %s)",
                    describe(first, d0, sizeof d0));
    if (axis < 0 || axis >= rank)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "axis %d is out of bounds for array of dimension %d", axis,
                    rank);
    cj_dtype dt = first->dtype;
    bool weak = first->weak;
    int64_t total = first->shape.dims[axis];
    for (int i = 1; i < n; i++) {
        const cj_node *xi = &g->nodes[xs[i]];
        if (xi->shape.rank != rank)
            return fail(g, err, CJ_ERR_VALUE, "concatenate", loc,
                        "all the input arrays must have the same number of dimensions, but the array at "
                        "index 0 is %s and the array at index %d is %s",
                        describe(first, d0, sizeof d0), i, describe(xi, di, sizeof di));
        for (int d = 0; d < rank; d++) {
            if (d != axis && xi->shape.dims[d] != first->shape.dims[d])
                return fail(g, err, CJ_ERR_VALUE, "concatenate", loc,
                            "all the input array dimensions except for the concatenation axis must match "
                            "exactly, but along dimension %d, the array at index 0 is %s and the array at "
                            "index %d is %s",
                            d, describe(first, d0, sizeof d0), i, describe(xi, di, sizeof di));
        }
        if (__builtin_add_overflow(total, xi->shape.dims[axis], &total))
            return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "the result is too big");
        bool w;
        dt = cj_promote(dt, weak, xi->dtype, xi->weak, &w);
        weak = w;
    }
    cj_shape out = first->shape;
    out.dims[axis] = total;
    if (!shape_check(g, "concatenate", &out, loc, err))
        return -1;
    if (n == 1)
        return xs[0];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.axis = axis;
    /* one node reading every input (after promotion), so that each input is
     * copied once into its slab of the result */
    int *ins = malloc(sizeof(int) * (size_t)n);
    if (ins == NULL)
        return fail(g, err, CJ_ERR_MEMORY, "concatenate", loc, "out of memory");
    for (int i = 0; i < n; i++) {
        cj_shape own = g->nodes[xs[i]].shape;
        if ((ins[i] = coerce(g, "concatenate", xs[i], dt, &own, loc, err)) < 0) {
            free(ins);
            return -1;
        }
    }
    int id = emit(g, CJ_OP_CONCATENATE, dt, weak, &out, ins, n, &a, loc, err);
    free(ins);
    return id;
}

/* ---- builders: reductions and contraction ------------------------------ */

/* Appends a reduction of x over the dims in the bit mask `axes` (removed
 * from the result).  Sums and products of bool and int32 accumulate in
 * int64, as NumPy does on 64-bit Linux.  max/min over an empty axis is a
 * ValueError, as in NumPy.  With no axes, returns x (cast where needed). */
int cj_build_reduce(cj_graph *g, cj_op op, int x, uint32_t axes, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "reduce: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    if (!op_valid(op) || cj_op_kind(op) != CJ_OPKIND_REDUCE)
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a reduction for cj_build_reduce");
    CHECK_ID(g, x, opname, loc, err);
    cj_node n = g->nodes[x];
    char d[300];
    int rank = n.shape.rank;
    if (axes >> rank) {
        int bad = rank;
        while (!(axes & (1u << bad)))
            bad++;
        return fail(g, err, CJ_ERR_VALUE, opname, loc, "axis %d is out of bounds for array of dimension %d (operand %s)",
                    bad, rank, describe(&n, d, sizeof d));
    }
    cj_shape out = {.rank = 0};
    for (int i = 0; i < rank; i++) {
        if (axes & (1u << i)) {
            if (n.shape.dims[i] == 0 && (op == CJ_OP_REDUCE_MAX || op == CJ_OP_REDUCE_MIN))
                return fail(g, err, CJ_ERR_VALUE, opname, loc,
                            "zero-size array to reduction operation %s which has no identity (operand %s, axis %d)",
                            op == CJ_OP_REDUCE_MAX ? "maximum" : "minimum", describe(&n, d, sizeof d), i);
        } else {
            out.dims[out.rank++] = n.shape.dims[i];
        }
    }
    cj_dtype dt = n.dtype;
    /* NumPy sums small integers in the platform integer; uint32's would be
     * uint64, which cjit lacks: int64 holds the same sums up to 2**63 */
    if ((op == CJ_OP_REDUCE_SUM || op == CJ_OP_REDUCE_PROD) && (dt == CJ_BOOL || dt == CJ_INT32 || dt == CJ_UINT32))
        dt = CJ_INT64;
    int xi = coerce(g, opname, x, dt, &n.shape, loc, err);
    if (xi < 0 || axes == 0)
        return xi;
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.axes = axes;
    return emit(g, op, dt, n.weak, &out, &xi, 1, &a, loc, err);
}

/* Appends NumPy matmul(x, y) for operands of rank >= 1: a 1-D x is taken as
 * (1, K) and a 1-D y as (K, 1) through RESHAPE nodes, and the added dims are
 * removed from the result; batch dims broadcast (BROADCAST nodes make them
 * identical); dtypes are promoted, with bool computed as int64 (NumPy's
 * bool matmul is a logical or of ands; cjit gives integer counts).
 * Returns the node id. */
int cj_build_matmul(cj_graph *g, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "matmul: graph is NULL"), -1;
    CHECK_ID(g, x, "matmul", loc, err);
    CHECK_ID(g, y, "matmul", loc, err);
    cj_node a = g->nodes[x], b = g->nodes[y];
    char da[300], db[300];
    if (a.shape.rank == 0 || b.shape.rank == 0)
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc,
                    "input operand %d does not have enough dimensions (has 0, matmul requires at least 1): "
                    "shapes %s and %s",
                    a.shape.rank == 0 ? 0 : 1, describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    /* The operands as matrices: (..., M, K) and (..., K, N). */
    cj_shape am = a.shape, bm = b.shape;
    if (am.rank == 1) {
        am.rank = 2;
        am.dims[1] = am.dims[0];
        am.dims[0] = 1;
    }
    if (bm.rank == 1) {
        bm.rank = 2;
        bm.dims[1] = 1;
    }
    int64_t ka = am.dims[am.rank - 1], kb = bm.dims[bm.rank - 2];
    if (ka != kb)
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc,
                    "mismatch in contraction dimension: shapes %s and %s (size %lld is different from %lld)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db), (long long)kb, (long long)ka);
    cj_shape abatch = {.rank = am.rank - 2}, bbatch = {.rank = bm.rank - 2}, batch;
    memcpy(abatch.dims, am.dims, sizeof(int64_t) * (size_t)abatch.rank);
    memcpy(bbatch.dims, bm.dims, sizeof(int64_t) * (size_t)bbatch.rank);
    if (!broadcast_shapes(&abatch, &bbatch, &batch))
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc, "batch dimensions could not be broadcast together with shapes %s and %s",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    int64_t m = am.dims[am.rank - 2], nn = bm.dims[bm.rank - 1];
    cj_shape ta = batch, tb = batch, out = batch;
    int r = batch.rank;
    ta.rank = tb.rank = out.rank = r + 2;
    ta.dims[r] = m, ta.dims[r + 1] = ka;
    tb.dims[r] = kb, tb.dims[r + 1] = nn;
    out.dims[r] = m, out.dims[r + 1] = nn;
    /* The squeezed result shape, checked before anything is appended. */
    cj_shape fin = {.rank = 0};
    for (int i = 0; i < r; i++)
        fin.dims[fin.rank++] = batch.dims[i];
    if (a.shape.rank > 1)
        fin.dims[fin.rank++] = m;
    if (b.shape.rank > 1)
        fin.dims[fin.rank++] = nn;
    if (!shape_check(g, "matmul", &ta, loc, err) || !shape_check(g, "matmul", &tb, loc, err) ||
        !shape_check(g, "matmul", &out, loc, err))
        return -1;

    bool weak;
    /* bool @ bool stays bool, as in NumPy: the fuser computes it as "any(a and b)" */
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    int ids[2] = {x, y};
    const cj_shape *mats[2] = {&am, &bm}, *targets[2] = {&ta, &tb};
    for (int i = 0; i < 2; i++) {
        cj_shape own = g->nodes[ids[i]].shape;
        int id = coerce(g, "matmul", ids[i], dt, &own, loc, err);
        if (id < 0)
            return -1;
        id = cj_build_reshape(g, id, mats[i], loc, err);
        if (id < 0)
            return -1;
        id = coerce(g, "matmul", id, dt, targets[i], loc, err);
        if (id < 0)
            return -1;
        ids[i] = id;
    }
    if (out.rank + 1 > CJ_MAX_RANK) {
        /* A matmul's loop nest has one dim more than its result (K), so
         * with the most batch dims it would not fit: the batch dims (equal
         * in both operands now) become one, which row-major order allows. */
        int64_t nbatch = cj_shape_numel(&batch);
        cj_shape flat[2] = {{.rank = 3, .dims = {nbatch, m, ka}}, {.rank = 3, .dims = {nbatch, kb, nn}}};
        for (int i = 0; i < 2; i++)
            if ((ids[i] = cj_build_reshape(g, ids[i], &flat[i], loc, err)) < 0)
                return -1;
        out = (cj_shape){.rank = 3, .dims = {nbatch, m, nn}};
    }
    int mm = emit(g, CJ_OP_MATMUL, dt, weak, &out, ids, 2, NULL, loc, err);
    if (mm < 0)
        return -1;
    return cj_build_reshape(g, mm, &fin, loc, err);
}

/* Appends an identity of x tagged with `name` (copied into the arena), for
 * the name-based checkpoint policies.  Returns the node id. */
int cj_build_name(cj_graph *g, int x, const char *name, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "name: graph is NULL"), -1;
    CHECK_ID(g, x, "name", loc, err);
    if (name == NULL)
        return fail(g, err, CJ_ERR_INTERNAL, "name", loc, "name is NULL");
    cj_node n = g->nodes[x];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.name = name; /* push_node copies it into the arena */
    return emit(g, CJ_OP_NAME, n.dtype, n.weak, &n.shape, &x, 1, &a, loc, err);
}

/* ---- text ----------------------------------------------------------------- */

/* A growing malloc'd string; `failed` sticks once memory runs out. */
typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    if (sb->failed)
        return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            sb->failed = true;
            return;
        }
        if ((size_t)k < room) {
            sb->len += (size_t)k;
            return;
        }
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap - sb->len <= (size_t)k)
            cap *= 2;
        char *p = realloc(sb->buf, cap);
        if (p == NULL) {
            sb->failed = true;
            return;
        }
        sb->buf = p;
        sb->cap = cap;
    }
}

/* The shortest decimal that reads back as the same value of the dtype,
 * Python style ("2.5", "1.0", "1e+20", "nan", "-inf"). */
static void format_float(double v, bool single, char *buf, size_t size)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v)
            break;
    }
    if (strpbrk(buf, ".e") == NULL && strlen(buf) + 3 <= size)
        strcat(buf, ".0");
}

static void sb_ids(strbuf *sb, const cj_node *n)
{
    for (int i = 0; i < n->ninputs; i++)
        sb_printf(sb, "%s%%%d", i ? ", " : "", n->inputs[i]);
}

static void sb_list64(strbuf *sb, const char *label, const int64_t *v, int n)
{
    sb_printf(sb, ", %s=[", label);
    for (int i = 0; i < n; i++)
        sb_printf(sb, "%s%lld", i ? "," : "", (long long)v[i]);
    sb_printf(sb, "]");
}

/* Writes `op(args, attrs)` for one node. */
static void sb_node_body(strbuf *sb, const cj_node *n)
{
    const char *name = cj_op_name(n->op);
    if (n->op == CJ_OP_PARAM || n->op == CJ_OP_ARRAY) {
        sb_printf(sb, "%s[%d]", name, n->attrs.index);
        return;
    }
    if (n->op == CJ_OP_CONSTANT) {
        if (is_float(n->dtype)) {
            char v[64];
            format_float(n->attrs.fvalue, n->dtype == CJ_FLOAT32, v, sizeof v);
            sb_printf(sb, "constant(%s)", v);
        } else if (n->dtype == CJ_BOOL) {
            sb_printf(sb, "constant(%s)", n->attrs.ivalue ? "True" : "False");
        } else {
            sb_printf(sb, "constant(%lld)", (long long)n->attrs.ivalue);
        }
        return;
    }
    if (n->op == CJ_OP_IOTA) {
        sb_printf(sb, "iota(axis=%d)", n->attrs.axis);
        return;
    }
    sb_printf(sb, "%s(", name);
    sb_ids(sb, n);
    unsigned attrs = cj_op_attrs(n->op); /* printed in this order */
    if (attrs & CJ_ATTR_AXIS)
        sb_printf(sb, ", axis=%d", n->attrs.axis);
    if (attrs & CJ_ATTR_AXES) {
        sb_printf(sb, ", axes=[");
        int k = 0;
        for (int d = 0; d < 32; d++)
            if (n->attrs.axes & (1u << d))
                sb_printf(sb, "%s%d", k++ ? "," : "", d);
        sb_printf(sb, "]");
    }
    if (attrs & CJ_ATTR_PERM) {
        sb_printf(sb, ", perm=[");
        for (int d = 0; d < n->shape.rank; d++)
            sb_printf(sb, "%s%d", d ? "," : "", n->attrs.perm[d]);
        sb_printf(sb, "]");
    }
    if (attrs & CJ_ATTR_START)
        sb_list64(sb, "start", n->attrs.start, n->shape.rank);
    if (attrs & CJ_ATTR_STEP)
        sb_list64(sb, "step", n->attrs.step, n->shape.rank);
    if (attrs & CJ_ATTR_NAME) {
        /* quoted, with quotes, backslashes and control characters escaped */
        sb_printf(sb, ", name=\"");
        for (const unsigned char *p = (const unsigned char *)(n->attrs.name ? n->attrs.name : ""); *p; p++) {
            if (*p == '"' || *p == '\\')
                sb_printf(sb, "\\%c", *p);
            else if (*p < 0x20 || *p == 0x7f)
                sb_printf(sb, "\\x%02x", *p);
            else
                sb_printf(sb, "%c", *p);
        }
        sb_printf(sb, "\"");
    }
    sb_printf(sb, ")");
}

/* Returns the graph as text, one node a line
 *   %3 = add(%1, %2) : float32[4,5]  # model.py:12
 * then "return %5, %7".  The caller frees the string; NULL if out of memory. */
char *cj_graph_to_text(const cj_graph *g)
{
    strbuf sb = {0};
    sb_printf(&sb, "%s", "");
    if (g == NULL)
        return sb.buf;
    for (int id = 0; id < g->nnodes; id++) {
        const cj_node *n = &g->nodes[id];
        sb_printf(&sb, "%%%d = ", id);
        sb_node_body(&sb, n);
        sb_printf(&sb, " : %s[", cj_dtype_name(n->dtype));
        for (int d = 0; d < n->shape.rank; d++)
            sb_printf(&sb, "%s%lld", d ? "," : "", (long long)n->shape.dims[d]);
        sb_printf(&sb, "]%s%s", n->weak ? " weak" : "", n->remat ? " recomputed" : "");
        if (n->loc >= 0)
            sb_printf(&sb, "  # %s", cj_graph_loc_str(g, n->loc));
        sb_printf(&sb, "\n");
    }
    sb_printf(&sb, "return");
    for (int i = 0; i < g->noutputs; i++)
        sb_printf(&sb, "%s %%%d", i ? "," : "", g->outputs[i]);
    sb_printf(&sb, "\n");
    if (sb.failed) {
        free(sb.buf);
        return NULL;
    }
    return sb.buf;
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
