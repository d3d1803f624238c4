/* plan_io.h - a graph and a plan as bytes, and back (the disk cache).
 *
 * The bytes are a stream of integers (zigzag LEB128 varints), doubles
 * (their 8 bytes, little-endian) and strings (a length, then the bytes).
 * Reading checks every count, index and enum against what it has read so
 * far: a truncated or corrupted stream gives an error, never a plan whose
 * kernels would touch memory out of bounds.  The graph's bytes are also its
 * identity: cj_graph_write writes every field that compiling reads,
 * constants bit for bit, so two graphs with the same bytes compile to the
 * same code (the disk cache key hashes them). */
#ifndef CJ_PLAN_IO_H
#define CJ_PLAN_IO_H

#include "kernel.h"

typedef struct {
    uint8_t *data;      /* malloc'd */
    size_t len, cap;
    bool oom;           /* a write failed: data is incomplete */
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

/* Every field of g: nodes, regions, outputs, remat marks, and how many
 * source locations there are, but not their text ("file.py:12"), which
 * changes no code: a function called from another line, or a file with
 * lines added above it, keeps its cache entry. */
void cj_graph_write(cj_wbuf *w, const cj_graph *g);
/* A new graph from cj_graph_write's bytes, each node validated as
 * cj_graph_append does, whose location texts are those of `locs_from`
 * (the graph it was made from, or one that only differs in them); NULL
 * with err set when the bytes are bad or the location counts differ. */
cj_graph *cj_graph_read(cj_rbuf *r, const cj_graph *locs_from, cj_error *err);

/* The plan's kernels, buffers, groups and memory figures (not the graph). */
void cj_plan_write(cj_wbuf *w, const cj_plan *p);
/* Reads a plan over graph g (borrowed).  On failure *p is empty. */
cj_status cj_plan_read(cj_rbuf *r, const cj_graph *g, cj_plan *p, cj_error *err);

#endif
