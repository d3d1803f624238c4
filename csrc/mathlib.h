/* mathlib.h - cjit's elementary functions as functions that kernels call.
 *
 * cmath.c emits exp, sin, pow, ... inline, which is fastest to run but
 * costs LLVM time per copy: a loop body holding dozens of them (a long
 * chain of sin) took seconds to compile.  Such kernels call these
 * functions instead.  Each is declared in the kernel's module with vector
 * variants (LLVM's "vector-function-abi-variant"), so the loop vectorizer
 * still widens the loop and calls, say, cj_m_sin_f32_v8 on 8 lanes at once;
 * the definitions are compiled once per process, only those some module
 * calls (jit_cpu.c). */
#ifndef CJ_MATHLIB_H
#define CJ_MATHLIB_H

#include <llvm-c/Core.h>

#include "graph.h"

/* op(args) through a call to the library function for op (an elementwise
 * unary op whose cpu column in ops_unary.def is MATH(f): EXP, EXPM1, LOG,
 * LOG1P, TANH, SIN, COS, ...; or POW with two args), declared in the
 * builder's module if it is not yet; args are float or double scalars.
 * NULL for any other op. */
LLVMValueRef cj_mathlib_call(LLVMBuilderRef b, cj_op op, LLVMValueRef *args, int nargs);

/* op(args) emitted inline (cmath.c's polynomial) for the same ops; NULL
 * for any other op.  The one dispatch from a long-math op (CJ_OPF_LONG_MATH
 * in ops.def) to its code. */
LLVMValueRef cj_mathlib_inline(LLVMBuilderRef b, cj_op op, LLVMValueRef *args);

/* Is `name` a function this library defines: one of the above, or a
 * slow-path helper of cmath.c's sin and cos (cj_math_helpers_elsewhere)? */
bool cj_mathlib_provides(const char *name);

/* Defines library function `name` in mod, externally visible; false if it
 * is not one. */
bool cj_mathlib_define(LLVMModuleRef mod, const char *name);

#endif
