/* graph_text.c - the text form of a graph (cj_graph_to_text): one line
 * per node, as Lowered.as_text and the tests show it. */
#include "graph_priv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text ----------------------------------------------------------------- */

/* A growing malloc'd string; `failed` sticks once memory runs out. */
typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    if (sb->failed)
        return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            sb->failed = true;
            return;
        }
        if ((size_t)k < room) {
            sb->len += (size_t)k;
            return;
        }
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap - sb->len <= (size_t)k)
            cap *= 2;
        char *p = realloc(sb->buf, cap);
        if (p == NULL) {
            sb->failed = true;
            return;
        }
        sb->buf = p;
        sb->cap = cap;
    }
}

/* The shortest decimal that reads back as the same value of the dtype,
 * Python style ("2.5", "1.0", "1e+20", "nan", "-inf"). */
static void format_float(double v, bool single, char *buf, size_t size)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v)
            break;
    }
    if (strpbrk(buf, ".e") == NULL && strlen(buf) + 3 <= size)
        strcat(buf, ".0");
}

static void sb_ids(strbuf *sb, const cj_node *n)
{
    for (int i = 0; i < n->ninputs; i++)
        sb_printf(sb, "%s%%%d", i ? ", " : "", n->inputs[i]);
}

static void sb_list64(strbuf *sb, const char *label, const int64_t *v, int n)
{
    sb_printf(sb, ", %s=[", label);
    for (int i = 0; i < n; i++)
        sb_printf(sb, "%s%lld", i ? "," : "", (long long)v[i]);
    sb_printf(sb, "]");
}

/* Writes `op(args, attrs)` for one node. */
static void sb_node_body(strbuf *sb, const cj_node *n)
{
    const char *name = cj_op_name(n->op);
    if (n->op == CJ_OP_PARAM || n->op == CJ_OP_ARRAY) {
        sb_printf(sb, "%s[%d]", name, n->attrs.index);
        return;
    }
    if (n->op == CJ_OP_CONSTANT) {
        if (is_float(n->dtype)) {
            char v[64];
            format_float(n->attrs.fvalue, n->dtype == CJ_FLOAT32, v, sizeof v);
            sb_printf(sb, "constant(%s)", v);
        } else if (n->dtype == CJ_BOOL) {
            sb_printf(sb, "constant(%s)", n->attrs.ivalue ? "True" : "False");
        } else if (n->dtype == CJ_UINT64) {
            sb_printf(sb, "constant(%llu)", (unsigned long long)n->attrs.ivalue);
        } else {
            sb_printf(sb, "constant(%lld)", (long long)n->attrs.ivalue);
        }
        return;
    }
    if (n->op == CJ_OP_IOTA) {
        sb_printf(sb, "iota(axis=%d)", n->attrs.axis);
        return;
    }
    sb_printf(sb, "%s(", name);
    sb_ids(sb, n);
    unsigned attrs = cj_op_attrs(n->op); /* printed in this order */
    if (attrs & CJ_ATTR_AXIS)
        sb_printf(sb, ", axis=%d", n->attrs.axis);
    if (attrs & CJ_ATTR_AXES) {
        sb_printf(sb, ", axes=[");
        int k = 0;
        for (int d = 0; d < 32; d++)
            if (n->attrs.axes & (1u << d))
                sb_printf(sb, "%s%d", k++ ? "," : "", d);
        sb_printf(sb, "]");
    }
    if (attrs & CJ_ATTR_PERM) {
        sb_printf(sb, ", perm=[");
        for (int d = 0; d < n->shape.rank; d++)
            sb_printf(sb, "%s%d", d ? "," : "", n->attrs.perm[d]);
        sb_printf(sb, "]");
    }
    if (attrs & CJ_ATTR_START)
        sb_list64(sb, "start", n->attrs.start, n->shape.rank);
    if (attrs & CJ_ATTR_STEP)
        sb_list64(sb, "step", n->attrs.step, n->shape.rank);
    if (attrs & CJ_ATTR_NAME) {
        /* quoted, with quotes, backslashes and control characters escaped */
        sb_printf(sb, ", name=\"");
        for (const unsigned char *p = (const unsigned char *)(n->attrs.name ? n->attrs.name : ""); *p; p++) {
            if (*p == '"' || *p == '\\')
                sb_printf(sb, "\\%c", *p);
            else if (*p < 0x20 || *p == 0x7f)
                sb_printf(sb, "\\x%02x", *p);
            else
                sb_printf(sb, "%c", *p);
        }
        sb_printf(sb, "\"");
    }
    sb_printf(sb, ")");
}

/* Returns the graph as text, one node a line
 *   %3 = add(%1, %2) : float32[4,5]  # model.py:12
 * then "return %5, %7".  The caller frees the string; NULL if out of memory. */
char *cj_graph_to_text(const cj_graph *g)
{
    strbuf sb = {0};
    sb_printf(&sb, "%s", "");
    if (g == NULL)
        return sb.buf;
    for (int id = 0; id < g->nnodes; id++) {
        const cj_node *n = &g->nodes[id];
        sb_printf(&sb, "%%%d = ", id);
        sb_node_body(&sb, n);
        sb_printf(&sb, " : %s[", cj_dtype_name(n->dtype));
        for (int d = 0; d < n->shape.rank; d++)
            sb_printf(&sb, "%s%lld", d ? "," : "", (long long)n->shape.dims[d]);
        sb_printf(&sb, "]%s%s", n->weak ? " weak" : "", n->remat ? " recomputed" : "");
        if (n->loc >= 0)
            sb_printf(&sb, "  # %s", cj_graph_loc_str(g, n->loc));
        sb_printf(&sb, "\n");
    }
    sb_printf(&sb, "return");
    for (int i = 0; i < g->noutputs; i++)
        sb_printf(&sb, "%s %%%d", i ? "," : "", g->outputs[i]);
    sb_printf(&sb, "\n");
    if (sb.failed) {
        free(sb.buf);
        return NULL;
    }
    return sb.buf;
}
