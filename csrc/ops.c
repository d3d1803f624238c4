/* ops.c - the op table (ops.def) and its accessors: every fact about an
 * op that a pass asks for (name, kind, arity, flags, cost, reduction
 * identity, attributes), and the data of the elementwise unary records
 * (ops_unary.def: cj_unary). */
#include "graph_priv.h"

#include <math.h>
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
    const char *doc;
} op_info[CJ_NUM_OPS] = {
#define OP(name, kind, text, arity, flags, cost, identity, attrs, doc) \
    [CJ_OP_##name] = {text, CJ_OPKIND_##kind, arity, flags, cost, CJ_IDENTITY_##identity, attrs, doc},
#include "ops.def"
#undef OP
};

/* ---- the elementwise unary records (ops_unary.def) ------------------- */

/* the dtype column as (rule, test value, bool message) */
#define UDT_FLOAT CJ_UDT_FLOAT, 0, NULL
#define UDT_SAME CJ_UDT_SAME, 0, NULL
#define UDT_NOBOOL(message) CJ_UDT_NOBOOL, 0, message
#define UDT_ROUND CJ_UDT_ROUND, 0, NULL
#define UDT_TEST(value) CJ_UDT_TEST, value, NULL
#define UDT_LOGIC CJ_UDT_LOGIC, 0, NULL
#define UDT_BITS CJ_UDT_BITS, 0, NULL

/* The forward values a derivative reads, computed from its expression by
 * the compiler: every builder below an or of what its operands read. */
#define READS_D(e) (e)
#define READS_ZERO 0
#define G 0
#define X CJ_VJP_READS_X
#define OUT CJ_VJP_READS_OUT
#define K(v) 0
#define ADD(a, b) ((a) | (b))
#define SUB(a, b) ((a) | (b))
#define MUL(a, b) ((a) | (b))
#define DIV(a, b) ((a) | (b))
#define NEG(a) (a)
#define UN(op, a) (a)
#define HAS_D(...) true
#define HAS_ZERO false

static const cj_unary_info records[CJ_NUM_OPS] = {
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) \
    [CJ_OP_##NAME] = {UDT_##dtypes, HAS_##derivative, READS_##derivative, numpy, lax, doc},
#include "ops_unary.def"
#undef UNARY
};
#undef G
#undef X
#undef OUT
#undef K
#undef ADD
#undef SUB
#undef MUL
#undef DIV
#undef NEG
#undef UN

/* See graph.h.  Every record has a doc; other ops' entries are zeros. */
const cj_unary_info *cj_unary(cj_op op) { return op_valid(op) && records[op].doc ? &records[op] : NULL; }

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

const char *cj_op_doc(cj_op op)
{
    return op_valid(op) ? op_info[op].doc : "";
}

/* See graph.h. */
const char *cj_opkind_name(cj_opkind kind)
{
    switch (kind) {
    case CJ_OPKIND_SOURCE: return "source";
    case CJ_OPKIND_UNARY: return "unary";
    case CJ_OPKIND_BINARY: return "binary";
    case CJ_OPKIND_COMPARE: return "compare";
    case CJ_OPKIND_SELECT: return "select";
    case CJ_OPKIND_TERNARY: return "ternary";
    case CJ_OPKIND_CAST: return "cast";
    case CJ_OPKIND_MOVE: return "move";
    case CJ_OPKIND_CONCAT: return "concat";
    case CJ_OPKIND_REDUCE: return "reduce";
    case CJ_OPKIND_MATMUL: return "matmul";
    case CJ_OPKIND_GATHER: return "gather";
    case CJ_OPKIND_SCATTER: return "scatter";
    case CJ_OPKIND_SORT: return "sort";
    case CJ_OPKIND_LINALG: return "linalg";
    case CJ_OPKIND_REGION: return "region";
    }
    return "?";
}

/* See graph.h. */
bool cj_reduce_identity(cj_op op, cj_dtype dt, double *fvalue, int64_t *ivalue)
{
    int64_t lowest, highest;
    cj_dtype_int_range(dt, &lowest, &highest);
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
        *ivalue = lowest;
        return true;
    case CJ_IDENTITY_HIGHEST:
        *fvalue = INFINITY;
        *ivalue = highest;
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
