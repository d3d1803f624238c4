/* executable.h - what cj_compile produces (private to pipeline.c and runtime.c). */
#ifndef CJ_EXECUTABLE_H
#define CJ_EXECUTABLE_H

#include "codegen.h"
#include "pipeline.h"

struct cj_executable {
    cj_graph *graph;        /* owned copy: names, shapes and source lines */
    cj_plan plan;           /* kernels and buffers */
    cj_kernel_fn *kernels;  /* one per plan kernel */
    cj_kernel_fn *groups;   /* per plan group: its driver, NULL for a group of one */
    cj_jit_code *code;      /* owns the machine code */
    int64_t flops, bytes_accessed;
    int64_t held_bytes;     /* memory it holds (cj_executable_code_bytes), set by cj_compile */
};

#endif
