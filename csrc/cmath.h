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

LLVMValueRef cj_math_exp(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_expm1(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_log(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_log1p(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_tanh(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_sin(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef cj_math_cos(LLVMBuilderRef b, LLVMValueRef x);
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
