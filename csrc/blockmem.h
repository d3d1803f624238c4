/* blockmem.h - group-local temporaries held one block of rows per thread
 * (blockmem.c); memplan.c marks them, drivers.c and runtime.c run them. */
#ifndef CJ_BLOCKMEM_H
#define CJ_BLOCKMEM_H

#include "kernel.h"

/* Groups of fewer points than this (their stages' loop boxes, summed) run
 * on one thread (runtime.c), so their block storage has one block. */
#define CJ_PARALLEL_MIN_POINTS ((int64_t)1 << 16)

/* The points of group g's stages, summed: what decides whether it is split
 * across threads. */
int64_t cj_group_points(const cj_plan *p, const cj_group *g);

/* Drops every buffer's block storage and every group's blocks. */
void cj_block_storage_clear(cj_plan *p);

/* Gives block storage to the temporaries of p (placed by liveness already,
 * alias_of final) that one group of two or more stages writes and reads and
 * nothing else touches, when the plan wants it (p->threads > 0 and a
 * donated argument) and it takes fewer bytes than the array.  A group led
 * by a BLAS gemm g then runs blocks of gemm_scale[g] (NULL: 1) times its
 * smallest block (see blockmem.c).  Returns how many gemm-led groups got
 * block storage. */
int cj_block_storage_mark(cj_plan *p, const int64_t *gemm_scale);

/* A block of at most this many bytes (one thread's) lives in the frame of
 * the group's driver, on the running thread's stack, while the blocks of a
 * group's buffers there add up to at most CJ_BLOCK_STACK_GROUP. */
#define CJ_BLOCK_STACK_MAX 4096
#define CJ_BLOCK_STACK_GROUP 16384

/* Bytes from one thread's block of buffer b (in group g) to the next. */
int64_t cj_block_stride(const cj_plan *p, const cj_group *g, const cj_buffer *b);

#endif
