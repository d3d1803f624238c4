/* plan_io.h - a graph and a plan as bytes, and back (the disk cache).
 *
 * The bytes are a stream of integers (zigzag LEB128 varints), doubles
 * (their 8 bytes, little-endian) and strings (a length, then the bytes).
 * Reading checks every count, index and enum against what it has read so
 * far: a truncated or corrupted stream gives an error, never a plan whose
 * kernels would touch memory out of bounds.  The graph's bytes are also its
 * identity: cj_graph_write writes every field that compiling reads,
 * constants bit for bit, so two graphs with the same bytes compile to the
 * same code (the disk cache key hashes them).
 *
 * A graph with control flow carries its bodies: the ones its nodes name,
 * each with its counts and its graphs, written (and read) before the nodes
 * that name them, so a region node is checked against its body as it is
 * read.  Bodies inside bodies follow, one level of C recursion per level
 * of nesting (never per node); an entry refuses more than
 * CJ_ENTRY_MAX_DEPTH levels. */
#ifndef CJ_PLAN_IO_H
#define CJ_PLAN_IO_H

#include "kernel.h"

typedef struct {
    uint8_t *data;      /* malloc'd */
    size_t len, cap;
    bool oom;           /* a write failed: data is incomplete */
    bool too_deep;      /* control flow nested past CJ_ENTRY_MAX_DEPTH: not an entry */
} cj_wbuf;

typedef struct {
    const uint8_t *data;
    size_t len, pos;
    bool bad;           /* a read ran past the end or found a value out of range */
} cj_rbuf;

void cj_put_bytes(cj_wbuf *w, const void *p, size_t n);
void cj_put_int(cj_wbuf *w, int64_t v);
void cj_put_f64(cj_wbuf *w, double v);
void cj_put_str(cj_wbuf *w, const char *s);     /* NULL is written as absent */

/* Each read returns 0 / NULL once r->bad is set. */
const uint8_t *cj_get_bytes(cj_rbuf *r, size_t n);
int64_t cj_get_int(cj_rbuf *r, int64_t lo, int64_t hi);   /* bad unless lo <= v <= hi */
double cj_get_f64(cj_rbuf *r);
/* A malloc'd copy (caller frees), or NULL: absent (*absent set) or bad. */
char *cj_get_str(cj_rbuf *r, bool *absent);

#define CJ_ENTRY_MAX_DEPTH 64

/* The source location texts of a traced graph and of its bodies, depth
 * first (a graph's own, then each named body's graphs): what an entry's
 * locations point into, so that a later process shows its own lines.
 * The texts are borrowed from the graph. */
typedef struct {
    const char **texts;
    int n, cap;
    int *by_text;       /* the places, sorted by text */
} cj_loc_pool;
cj_status cj_loc_pool_build(cj_loc_pool *p, const cj_graph *g, cj_error *err);
void cj_loc_pool_free(cj_loc_pool *p);

/* Every field of g: nodes, regions, outputs, remat marks, the bodies its
 * nodes name (recursively), and of each graph how many source locations
 * it has.  pool NULL: the key's form, without the locations' text
 * ("file.py:12"), which changes no code: a function called from another
 * line, or a file with lines added above it, keeps its cache entry.  With
 * a pool (built from the graph the caller compiled): an entry's form, each
 * location named by its place in the pool. */
void cj_graph_write(cj_wbuf *w, const cj_graph *g, const cj_loc_pool *pool);
/* A new graph from cj_graph_write's entry bytes, each node validated as
 * cj_graph_append does and each body by cj_body_finish, its locations'
 * texts taken from `pool` (built from the graph being compiled, whose key
 * is the entry's); NULL with err set when the bytes are bad. */
cj_graph *cj_graph_read(cj_rbuf *r, const cj_loc_pool *pool, cj_error *err);

/* The plan's kernels, buffers, groups and memory figures (not the graph). */
void cj_plan_write(cj_wbuf *w, const cj_plan *p);
/* Reads a plan over graph g (borrowed).  On failure *p is empty. */
cj_status cj_plan_read(cj_rbuf *r, const cj_graph *g, cj_plan *p, cj_error *err);

#endif
