"""cjit.numpy.einsum: Einstein summation lowered, at trace time, to the
existing primitives.

Each operand first loses its repeated subscripts (a diagonal, read with a
strided slice) and the subscripts that appear nowhere else (a sum).  The
operands are then contracted two at a time, the pair chosen greedily as the
one whose result is smallest (the contraction path, fixed when the function
is traced): a pair becomes one batched matmul, (batch, free_a, summed) @
(batch, summed, free_b), after a transpose and reshape of each side.  The
last operand is summed over what the output does not keep and transposed
into the output's order.
"""
from __future__ import annotations

import string

from ._complex_dispatch import complex_aware
from ._core import _common, _error, _op, _operand
from ._linalg import _prod, _rs, _t, diagonal, matmul
from ._elementwise import astype
from ._reductions import sum as sum_

__all__ = ["einsum", "einsum_path"]


def _parse(subscripts, shapes):
    """(input subscripts per operand, output subscripts) with '...' replaced
    by unused letters."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
        explicit = True
    else:
        lhs, out, explicit = s, None, False
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"cjit.numpy.einsum: {len(ins)} operand subscripts for "
                         f"{len(shapes)} operands")
    used = set(c for c in s if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    ell_rank = 0
    for sub, shp in zip(ins, shapes):
        if "..." in sub:
            ell_rank = max(ell_rank, len(shp) - (len(sub) - 3))
    ell = "".join(spare[:ell_rank])
    fixed = []
    for sub, shp in zip(ins, shapes):
        if "..." in sub:
            k = len(shp) - (len(sub) - 3)
            sub = sub.replace("...", ell[ell_rank - k:] if k else "")
        if len(sub) != len(shp) or not all(c.isalpha() for c in sub):
            raise ValueError(f"cjit.numpy.einsum: subscripts {sub!r} do not fit an operand of "
                             f"shape {tuple(shp)}")
        fixed.append(sub)
    if explicit:
        out = out.replace("...", ell)
        for c in out:
            if not any(c in f for f in fixed):
                raise ValueError(f"cjit.numpy.einsum: output subscript {c!r} is in no input")
    else:
        counts = {}
        for f in fixed:
            for c in f:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return fixed, out


def _take_diagonals(x, sub):
    """x with each repeated subscript reduced to its diagonal."""
    while True:
        dup = next((c for c in sub if sub.count(c) > 1), None)
        if dup is None:
            return x, sub
        i = sub.index(dup)
        j = sub.index(dup, i + 1)
        x = diagonal._cjit_impl(x, 0, i, j)   # the diagonal becomes the last axis
        sub = "".join(c for k, c in enumerate(sub) if k not in (i, j)) + dup


def _sum_out(x, sub, keep):
    axes = tuple(i for i, c in enumerate(sub) if c not in keep)
    if not axes:
        return x, sub
    x = sum_._cjit_impl(x, axis=axes)
    return x, "".join(c for c in sub if c in keep)


def _broadcast_sizes(ops):
    size = {}
    for x, sub in ops:
        for c, d in zip(sub, x.shape):
            if size.get(c, 1) == 1:
                size[c] = d
            elif d not in (1, size[c]):
                raise _error(ValueError, "einsum", f"subscript {c!r} has sizes {size[c]} and "
                             f"{d}", *[o for o, _ in ops])
    return size


def _expand(x, sub, size):
    shape = tuple(size[c] for c in sub)
    if tuple(x.shape) != shape:
        x = x.trace.apply("broadcast", x, shape=shape)
    return x


def _contract(a, sa, b, sb, keep, size):
    """One pairwise contraction as a batched matmul."""
    batch = [c for c in sa if c in sb and c in keep]
    summed = [c for c in sa if c in sb and c not in keep]
    fa = [c for c in sa if c not in sb]
    fb = [c for c in sb if c not in sa]
    a = _expand(a, sa, size)
    b = _expand(b, sb, size)
    a = _t(a, [sa.index(c) for c in batch + fa + summed])
    b = _t(b, [sb.index(c) for c in batch + summed + fb])
    nb, nfa, nfb = (_prod(size[c] for c in g) for g in (batch, fa, fb))
    ns = _prod(size[c] for c in summed)
    a = _rs(a, (nb, nfa, ns))
    b = _rs(b, (nb, ns, nfb))
    r = matmul._cjit_impl(a, b)
    sub = "".join(batch + fa + fb)
    return _rs(r, tuple(size[c] for c in sub)), sub


@_op(seq=("operands",))
def _einsum(subscripts, operands, optimize):
    xs = _common([_operand(o, "einsum") for o in operands], "einsum")
    subs, out = _parse(subscripts, [x.shape for x in xs])
    ops = []
    for x, sub in zip(xs, subs):
        x, sub = _take_diagonals(x, sub)
        ops.append((x, sub))
    size = _broadcast_sizes(ops)

    def needed(skip):
        s = set(out)
        for k, (_, sb) in enumerate(ops):
            if k not in skip:
                s.update(sb)
        return s

    # sum each operand's private subscripts first
    ops = [_sum_out(x, sub, needed({k})) for k, (x, sub) in enumerate(ops)]
    while len(ops) > 1:
        best = None
        for i in range(len(ops)):
            for j in range(i + 1, len(ops)):
                keep = needed({i, j})
                res = set(ops[i][1]) | set(ops[j][1])
                cost = _prod(size[c] for c in res if c in keep)
                if best is None or cost < best[0]:
                    best = (cost, i, j, keep)
        _, i, j, keep = best
        (a, sa), (b, sb) = ops[i], ops[j]
        r = _contract(a, sa, b, sb, keep, size)
        ops = [o for k, o in enumerate(ops) if k not in (i, j)] + [r]
    x, sub = ops[0]
    x, sub = _sum_out(x, sub, set(out))
    x = _expand(x, sub, size)
    return _t(x, [sub.index(c) for c in out])


def einsum(subscripts, *operands, out=None, optimize=False, dtype=None, **kwargs):
    """NumPy einsum with explicit ('ij,jk->ik') or implicit subscripts and
    '...'; lowered to diagonals, sums and batched matmuls (see the module's
    note).  optimize= is accepted; the greedy path is always used."""
    if out is not None:
        raise TypeError("cjit.numpy.einsum: out= is not supported")
    if not isinstance(subscripts, str):
        raise NotImplementedError("cjit.numpy.einsum: only the subscripts-string form is "
                                  "supported")
    r = _einsum(subscripts, list(operands), bool(optimize))
    if dtype is not None:
        r = astype(r, dtype)
    return r


def einsum_path(subscripts, *operands, optimize="greedy"):
    """NumPy's einsum_path, answered by NumPy (the path cjit takes is its own
    greedy one)."""
    import numpy as np
    return np.einsum_path(subscripts, *[np.empty(np.shape(o)) for o in operands],
                          optimize=optimize)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
