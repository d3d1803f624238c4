/* simplify.h - graph clean-up before fusion. */
#ifndef CJ_SIMPLIFY_H
#define CJ_SIMPLIFY_H

#include "graph.h"

/* Returns a new graph (owned by the caller) with the dead nodes of `g`
 * dropped and, when `cse` is true, identical nodes merged; NULL with err
 * set on failure.  Parameters and closed-over arrays always stay. */
cj_graph *cj_simplify_run(const cj_graph *g, bool cse, cj_error *err);

#endif
