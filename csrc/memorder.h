/* memorder.h - orders of a plan's groups that lower its memory peak
 * with donated arguments (memorder.c), and what memplan.c and it share. */
#ifndef CJ_MEMORDER_H
#define CJ_MEMORDER_H

#include "kernel.h"

static inline bool cj_is_donated(const cj_plan *p, const cj_buffer *b) {
    return b->kind == CJ_BUF_PARAM && p->donated && p->donated[b->slot];
}

/* May output y live in donated argument x?  Same dtype and shape, as JAX
 * asks of an output that takes a donated buffer, and some bytes. */
static inline bool cj_output_fits_donor(const cj_buffer *y, const cj_buffer *x) {
    if (x->dtype != y->dtype || x->shape.rank != y->shape.rank || y->nbytes == 0) return false;
    for (int d = 0; d < x->shape.rank; d++)
        if (x->shape.dims[d] != y->shape.dims[d]) return false;
    return true;
}

/* Each reorders (or splits) p's groups, kernels with them; memplan.c keeps
 * the result only when the plan's peak is lower.  Each returns 1 when
 * something changed, 0 when not, -1 when out of memory. */
int cj_order_for_donation(cj_plan *p);
int cj_order_last_readers_first(cj_plan *p);
int cj_split_update_groups(cj_plan *p);
/* A group of one stage that reads the result of a gemm-led group, the only
 * group besides it to read it (an optimizer's update reading a weight's
 * gradient), joins that group when group.c named it the group's join
 * partner: it moves up to right after the gemm's group, or else that group
 * moves down to right before it, when nothing in between depends on the one
 * that moves or it on that (nor reads a donated argument the update reads
 * or could write over).  The gradient is then group-local and takes block
 * storage (blockmem.c).  Joins the `which`-th such pair (0 first) in the
 * current order; 1 when it joined, 0 when there is no such pair, -1 when
 * out of memory. */
int cj_order_join_update(cj_plan *p, int which);

#endif
