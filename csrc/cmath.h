/* cmath.h - elementary functions emitted as plain LLVM IR.
 *
 * Calls to libm stop the loop vectorizer, and on NVPTX llvm.exp/llvm.log do
 * not select, so cjit builds its own approximations out of +, *, fma,
 * compares, selects and bit casts.  Every function takes and returns a
 * scalar `float` or `double` (the type of x decides the precision); the
 * vectorizer widens them.  Results are within a few ulp of NumPy's, and
 * nan, +-inf, +-0 and subnormals behave as in C's libm. */
#ifndef CJ_CMATH_H
#define CJ_CMATH_H

#include <stdbool.h>

#include <llvm-c/Core.h>

/* cj_math_<f>(b, x) for every MATH(f) of ops_unary.def's cpu and ptx
 * columns (exp, expm1, log, log1p, tanh, sin, cos, ...). */
#define CJ_MATH_DECLARE_SAME
#define CJ_MATH_DECLARE_MATH(f) LLVMValueRef cj_math_##f(LLVMBuilderRef b, LLVMValueRef x);
#define CJ_MATH_DECLARE_INTRINSIC(name)
#define CJ_MATH_DECLARE_IR(fn)
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) \
    CJ_MATH_DECLARE_##cpu CJ_MATH_DECLARE_##ptx
#include "ops_unary.def"
#undef UNARY
/* x ** y for floats (NumPy/C pow semantics for special values). */
LLVMValueRef cj_math_pow(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);

/* sin and cos call a slow-path helper for huge arguments (Payne-Hanek).
 * By default a module defines its own copy.  After this call, mod only
 * declares the helpers ("cj.math.<sin|cos>.<f32|f64>.big[.v<lanes>]"),
 * and whoever links it defines them once with cj_math_define_helper
 * (jit_cpu.c through mathlib.c), which saves each kernel module their
 * compile time. */
void cj_math_helpers_elsewhere(LLVMModuleRef mod);
/* Defines helper `name` in mod, externally visible; false if name is not one. */
bool cj_math_define_helper(LLVMModuleRef mod, const char *name);

#endif
