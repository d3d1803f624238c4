/* codegen_priv.h - the state of one kernel's code generation, shared by
 * the files of the code generator, each using only those listed before it:
 * codegen_expr.c (types, loads, stores, one op and one reduction combine),
 * codegen_loop.c (one loop), codegen_reduce.c (a kernel's loop nest and its
 * reductions), codegen_nvptx.c (the NVPTX kernel) and codegen.c (the CPU
 * kernel and the module entry points).  No other file includes it. */
#ifndef CJ_CODEGEN_PRIV_H
#define CJ_CODEGEN_PRIV_H

#include "codegen.h"

/* Most storages one kernel's alias metadata distinguishes (more: none). */
#define CJ_MAX_SCOPES 32

typedef struct {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const cj_plan *plan;
    const cj_kernel *k;
    cj_target target;
    cj_error *err;
    LLVMValueRef fn;
    LLVMValueRef *buf_ptr;              /* per plan buffer, loaded in the entry block */
    LLVMValueRef *scope, *noalias;      /* per plan buffer: alias metadata for its accesses (CPU) */
    LLVMValueRef *hoisted;              /* per expression of k: its value from before the loop
                                         * nest (emit_invariants), or NULL */
    LLVMValueRef idx[CJ_MAX_RANK];      /* loop counters */
    int unroll_dim, unroll;             /* reduced loop evaluated `unroll` points at a time */
    bool call_math;                     /* elementary functions as calls into mathlib.c, not inline */
    LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, void_t;
} cg;

static inline bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

/* for (i = lo; i < hi; i++) around whatever `body` emits; rotated form. */
typedef struct {
    LLVMBasicBlockRef body, exit;
    LLVMValueRef phi, hi;
    LLVMBasicBlockRef pre;
    LLVMValueRef latch;  /* the back-edge branch, which carries loop metadata */
} loop_state;

/* Unroll-and-jam of a reduced loop that accumulates in memory (matmul's K,
 * with the output row innermost): each innermost iteration adds `unroll`
 * consecutive terms, so the output row is loaded and stored `unroll` times
 * less often.  The CPU's kernels are bound by that traffic. */
#define CJ_UNROLL_REDUCED 4

/* Loops shorter than this get no interleave hint (codegen_loop.c). */
#define CJ_MATH_INTERLEAVE_MIN_TRIP 64

/* codegen_types.c */
LLVMValueRef call_intrinsic(cg *c, const char *name, LLVMTypeRef type, LLVMValueRef *args, unsigned nargs, const char *label);
LLVMValueRef const_of(cg *c, cj_dtype dt, double f, int64_t i);
/* v converted from dtype `from` to `to` (NumPy's astype) */
LLVMValueRef emit_cast(cg *c, LLVMValueRef v, cj_dtype from, cj_dtype to);
LLVMTypeRef mem_type(cg *c, cj_dtype dt);
LLVMTypeRef reg_type(cg *c, cj_dtype dt);
/* codegen_unary.c: an elementwise unary op (its record's cpu or ptx column) on x of dtype dt */
LLVMValueRef emit_unary(cg *c, cj_op op, LLVMValueRef x, cj_dtype dt);
/* codegen_expr.c */
LLVMValueRef emit_exprs(cg *c);
void emit_invariants(cg *c);
LLVMValueRef emit_minmax(cg *c, bool is_max, LLVMValueRef x, LLVMValueRef y, cj_dtype dt);
LLVMValueRef emit_op(cg *c, cj_op op, const LLVMValueRef *args, cj_dtype in_dt, cj_dtype out_dt);
bool emit_stores(cg *c);
LLVMValueRef load_value(cg *c, int buffer, const cj_affine *a);
LLVMMetadataRef self_node(cg *c, LLVMMetadataRef *ops, int nops);
void set_alias_scopes(cg *c, int ki, const cj_kernel *k);
int storage_of(const cj_plan *p, int b);
void store_value(cg *c, int buffer, const cj_affine *a, LLVMValueRef v);
LLVMValueRef reduce_combine(cg *c, cj_op op, LLVMValueRef acc, LLVMValueRef v, cj_dtype dt);
LLVMValueRef reduce_identity(cg *c, cj_op op, cj_dtype dt);
/* codegen_loop.c */
void loop_begin(cg *c, loop_state *L, LLVMValueRef lo, LLVMValueRef hi, const char *name);
void loop_end(cg *c, loop_state *L);
void loop_end_step(cg *c, loop_state *L, int64_t step);
unsigned math_interleave(const cj_kernel *k);
void set_interleave(cg *c, LLVMValueRef latch, unsigned n);
/* codegen_reduce.c */
bool accumulate_value(cg *c, LLVMValueRef v);
bool emit_loops(cg *c, int d, LLVMValueRef start, LLVMValueRef end);
LLVMValueRef emit_pairwise_sum(cg *c, int d);
int pairwise_from(const cg *c, bool trailing);
int unrolled_reduced_dim(const cg *c);
/* codegen_nvptx.c */
bool emit_kernel_nvptx(cg *c, int ki, const char *prefix);

#endif
