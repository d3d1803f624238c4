"""x.at[...] with every mode, index dtype and kind of index (negative, out
of range, repeated, uint64 of 2**63 and more), lax.dynamic_slice /
dynamic_update_slice starts and lax.switch indices, against NumPy
references written here from JAX's documented rules:

- a signed index below zero counts from the end once; an unsigned one
  never does (a uint64 of 2**63 or more is past the end, not negative);
- .get clamps by default and with mode="clip"; mode="fill" (or "drop")
  gives fill_value (NaN, the dtype's smallest signed or largest unsigned
  integer by default) where the index is out of range;
- the updates drop an index out of range, mode="clip" clamps it;
- .divide is x / (the product of the values at each index), a true
  division; .apply calls func once per occurrence of an index (np.ufunc.at);
- a dynamic slice's start counts from the end when negative, then is
  clamped so that the slice fits;
- switch clamps its index to the branches, batched or not.
"""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax

# ---- regressions --------------------------------------------------------------------


def test_at_divide_of_an_integer_array_is_a_true_division():
    f = cjit.jit(lambda x: x.at[1].divide(2))
    r = f(np.array([4, 5, 6, 7], np.int32))
    want = np.array([4, 5, 6, 7], np.int32) / np.array([1, 2, 1, 1], np.int32)
    assert r.dtype == want.dtype
    np.testing.assert_array_equal(r, [4, 2.5, 6, 7])
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[0].divide(2))(np.array([200, 100], np.uint8)), [100, 100])
    # repeated indices divide by the product; values take x's dtype first (2.5 -> 2), as JAX's
    g = cjit.jit(lambda x: x.at[np.array([1, 1, 2])].divide(np.array([2, 4, 2.5])))
    np.testing.assert_array_equal(g(np.arange(4)), [0, 0.125, 1, 3])


def test_at_get_fill_uses_the_fill_value():
    g = cjit.jit(lambda x, i: x.at[i].get(mode="fill", fill_value=-1))
    np.testing.assert_array_equal(g(np.arange(6), np.array([0, 6, -7, 100, -1])), [0, -1, -1, -1, 5])
    h = cjit.jit(lambda x, i: x.at[i].get(mode="fill"))
    r = h(np.arange(6.0), np.array([0, 6, -7, 100, -1]))
    np.testing.assert_array_equal(r, [0, np.nan, np.nan, np.nan, 5])
    np.testing.assert_array_equal(h(np.arange(6, dtype=np.uint8), np.array([0, 6, -1])), [0, 255, 5])
    np.testing.assert_array_equal(h(np.arange(6, dtype=np.int32), np.array([9])), [np.iinfo(np.int32).min])
    # concrete keys out of range follow the explicit mode instead of raising
    x = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[1, 5].get(mode="fill", fill_value=-1))(x), -1)
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[np.array([0, 3]), 1:3].get(mode="fill", fill_value=-1))(x),
                                  [[1, 2], [-1, -1]])


def test_at_apply_runs_once_per_occurrence():
    want = np.arange(6.0)
    np.sin.at(want, np.array([1, 1, 2]))
    f = cjit.jit(lambda x: x.at[np.array([1, 1, 2])].apply(cnp.sin))
    np.testing.assert_allclose(f(np.arange(6.0)), want, rtol=1e-15)
    t = cjit.jit(lambda x, i: x.at[i].apply(cnp.sin))
    np.testing.assert_allclose(t(np.arange(6.0), np.array([1, 1, 2])), want, rtol=1e-15)
    many = np.array([3] * 9 + [0])   # past the unrolled count: a loop
    want = np.arange(6.0)
    np.sin.at(want, many)
    np.testing.assert_allclose(cjit.jit(lambda x: x.at[many].apply(cnp.sin))(np.arange(6.0)), want, rtol=1e-14)
    # a concrete key stays reverse-differentiable: d sin(sin(x)) = cos(sin x) cos x
    g = cjit.grad(lambda x: x.at[np.array([1, 1])].apply(cnp.sin).sum())(np.arange(3.0))
    np.testing.assert_allclose(g, [1, np.cos(np.sin(1.0)) * np.cos(1.0), 1], rtol=1e-14)


def test_uint64_index_past_2_63_is_clamped_to_the_last_element():
    z = cjit.jit(lambda x, i: x[i])
    x = np.arange(6.0)
    assert z(x, np.uint64(2**63)) == 5
    np.testing.assert_array_equal(z(x, np.array([2**63, 2**64 - 1, 3], np.uint64)), [5, 5, 3])
    np.testing.assert_array_equal(cjit.jit(lambda x, i: lax.dynamic_slice(x, (i,), (2,)))(x, np.uint64(2**63)),
                                  [4, 5])
    np.testing.assert_array_equal(cjit.jit(lambda x, i: x.at[i].get(mode="clip"))(x, np.array([2**63], np.uint64)),
                                  [5])
    m = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(cjit.jit(lambda x, i, j: x[i, j])(m, np.array([2**63], np.uint64),
                                                                        np.array([1], np.uint64)), [9])


def test_dynamic_slice_wraps_negative_starts():
    x = np.arange(10)
    np.testing.assert_array_equal(lax.dynamic_slice(x, (-3,), (3,)), [7, 8, 9])
    np.testing.assert_array_equal(cjit.jit(lambda x: lax.dynamic_slice(x, (-3,), (3,)))(x), [7, 8, 9])
    np.testing.assert_array_equal(cjit.jit(lambda x, i: lax.dynamic_slice(x, (i,), (3,)))(x, -3), [7, 8, 9])
    np.testing.assert_array_equal(cjit.vmap(lambda i: lax.dynamic_slice(x, (i,), (3,)))(np.array([-3, 2])),
                                  [[7, 8, 9], [2, 3, 4]])
    u = cjit.jit(lambda x, i: lax.dynamic_update_slice(x, np.array([-1, -2]), (i,)))
    np.testing.assert_array_equal(u(x, -5), [0, 1, 2, 3, 4, -1, -2, 7, 8, 9])
    np.testing.assert_array_equal(lax.dynamic_update_slice(x, np.array([-1, -2]), (-5,)), u(x, -5))
    with pytest.raises(ValueError, match="allow_negative_indices"):
        lax.dynamic_slice(x, (-3,), (3,), allow_negative_indices=False)


def test_vmapped_switch_clamps_a_negative_index_to_the_first_branch():
    branches = [lambda: 0, lambda: 1, lambda: 2]
    s = cjit.vmap(lambda i: lax.switch(i, branches))
    np.testing.assert_array_equal(s(np.array([-1, 0, 5])), [0, 0, 2])
    assert lax.switch(-1, branches) == 0
    # a wide index is clamped before it is narrowed to int32
    assert cjit.jit(lambda i: lax.switch(i, branches))(np.int64(2**32)) == 2
    assert cjit.jit(lambda i: lax.switch(i, branches))(np.uint64(2**63)) == 2


# ---- NumPy references ----------------------------------------------------------------

def _target(i, n, dtype, clamp):
    """Where index value i (of dtype) lands in a dim of n: an int, or None
    when out of range and not clamped."""
    i = int(i)
    if np.dtype(dtype).kind == "i" and i < 0:
        i += n
    if 0 <= i < n:
        return i
    return min(max(i, 0), n - 1) if clamp else None


def _fill(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return np.nan
    return np.iinfo(dt).min if dt.kind == "i" else np.iinfo(dt).max


def _reference(op, x, form, idx, vals, mode, func):
    """x.at[key].op(vals, mode) by explicit loops over the index entries."""
    x = np.array(x)
    if form == "cols":   # (:, idx) is (idx,) on the transpose
        r = _reference(op, x.T, "rows", idx, None if vals is None else np.swapaxes(vals, 0, 1), mode, func)
        return r.T if op != "get" else np.swapaxes(r, 0, 1)
    if form == "pair":   # (i0, i1): one flat index, in range when both are
        i0, i1 = idx
        n0, n1 = x.shape
        flat = x.reshape(-1)
        clamp = mode == "clip" or (op == "get" and mode not in ("fill", "drop"))
        t = []
        for a, b in zip(i0, i1):
            ta, tb = _target(a, n0, i0.dtype, clamp), _target(b, n1, i1.dtype, clamp)
            t.append(None if ta is None or tb is None else ta * n1 + tb)
        return _apply_targets(op, flat, t, vals, func).reshape(x.shape) if op != "get" else \
            _apply_targets(op, flat, t, vals, func)
    clamp = mode == "clip" or (op == "get" and mode not in ("fill", "drop"))
    t = [_target(i, x.shape[0], idx.dtype, clamp) for i in idx]
    return _apply_targets(op, x, t, vals, func)


def _apply_targets(op, x, t, vals, func):
    if op == "get":
        out = np.empty((len(t),) + x.shape[1:], x.dtype)
        for p, j in enumerate(t):
            out[p] = x[j] if j is not None else _fill(x.dtype)
        return out
    x = x.copy()
    if op == "divide":
        den = np.ones_like(x)
        for p, j in enumerate(t):
            if j is not None:
                den[j] = den[j] * vals[p]
        return x / den
    if op == "set":
        groups = {}
        for p, j in enumerate(t):
            if j is not None:
                groups.setdefault(j, []).append(vals[p])
        for j, vs in groups.items():
            x[j] = np.mean(vs, axis=0) if x.dtype.kind == "f" else np.max(vs, axis=0)
        return x
    for p, j in enumerate(t):
        if j is None:
            continue
        if op == "apply":
            x[j] = func(x[j])
        else:
            x[j] = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[op](x[j], vals[p])
    return x


def _call(op, ref, vals, mode, func):
    if op == "get":
        return ref.get(mode=mode)
    if op == "apply":
        return ref.apply(func, mode=mode)
    return getattr(ref, op)(vals, mode=mode)


_IDX_DTYPES = ["int32", "int64", "uint8", "uint32", "uint64"]


def _index_values(rng, n, dtype, length, allow_oob):
    """A mix of in-range, negative, repeated and (when allowed) out-of-range
    values, each one the index dtype can hold."""
    pool = list(range(n)) + [n - 1] * 2
    if np.dtype(dtype).kind == "i":
        pool += list(range(-n, 0))
        if allow_oob:
            pool += [-n - 1, -100, -(2**31)]
    if allow_oob:
        pool += [n, n + 3, 200]
        if np.dtype(dtype).itemsize >= 4:
            pool += [2**31 - 1]
        if np.dtype(dtype) == np.uint64:
            pool += [2**63, 2**64 - 1, 2**63 + 1]
    vals = [pool[k] for k in rng.integers(0, len(pool), length)]
    if length > 2 and rng.random() < 0.5:
        vals[-1] = vals[0]   # a repeat for sure
    return np.array(vals, dtype=object).astype(dtype)


_OPS = ["get", "set", "add", "mul", "divide", "min", "max", "apply"]


def _one_case(rng):
    op = _OPS[rng.integers(len(_OPS))]
    mode = [None, "clip", "fill", "drop", "promise_in_bounds"][rng.integers(5)]
    xdt = ["int32", "float64", "uint8", "float32", "int64"][rng.integers(5)]
    form = ["flat", "rows", "cols", "pair"][rng.integers(4)]
    traced = rng.random() < 0.6
    idt = _IDX_DTYPES[rng.integers(len(_IDX_DTYPES))]
    shape = (int(rng.integers(1, 6)),) if form == "flat" else (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    x = rng.integers(1, 9, shape).astype(xdt)
    length = int(rng.integers(1, 6))
    oob = mode in ("clip", "fill", "drop") or (traced and mode is None)
    if form == "pair":
        idx = (_index_values(rng, shape[0], idt, length, oob), _index_values(rng, shape[1], idt, length, oob))
        key = idx
        vshape = (length,)
    elif form == "cols":
        idx = _index_values(rng, shape[1], idt, length, oob)
        vshape = (shape[0], length)
    else:
        idx = _index_values(rng, shape[0], idt, length, oob)
        vshape = (length,) + shape[1:]
    vals = rng.integers(1, 4, vshape).astype(xdt)   # nonzero, small: products and means stay exact
    return op, mode, xdt, form, traced, idx, vals, x


def _run_case(op, mode, form, traced, idx, vals, x):
    func = lambda v: v * 2 + 1  # noqa: E731
    def keyed(i):
        return {"flat": lambda: i, "rows": lambda: i, "cols": lambda: (slice(None), i),
                "pair": lambda: (i[0], i[1])}[form]()
    if traced:
        got = cjit.jit(lambda x, i, v: _call(op, x.at[keyed(i)], v, mode, func))(x, idx, vals)
    else:
        got = cjit.jit(lambda x, v: _call(op, x.at[keyed(idx)], v, mode, func))(x, vals)
    want = _reference(op, x, form, idx, vals, mode, func)
    return got, want


def test_generated_at_modes_against_numpy():
    """A seeded sweep over ops x modes x index dtypes x index kinds x key
    forms (traced and concrete): 300 cases."""
    rng = np.random.default_rng(160)
    for n in range(300):
        op, mode, xdt, form, traced, idx, vals, x = _one_case(rng)
        what = f"case {n}: x{x.shape} {xdt}.at[{form} {idx!r}].{op}({vals!r}, mode={mode}), traced={traced}"
        got, want = _run_case(op, mode, form, traced, idx, vals, x)
        got = np.asarray(got)
        assert got.dtype == want.dtype, what
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-6 if want.dtype == np.float32 else 1e-15, err_msg=what)
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("idt", ["int32", "uint64"])
def test_concrete_index_out_of_range_without_a_mode_acts_as_a_traced_one(idt):
    # decision 260: as in JAX, a concrete index is not checked either
    x = np.arange(5.0)
    bad = np.array([1, 7], idt)
    for op in ["get", "add", "set"]:
        concrete = cjit.jit(lambda x: _call(op, x.at[bad], np.ones(2), None, None))(x)
        traced = cjit.jit(lambda x, b: _call(op, x.at[b], np.ones(2), None, None))(x, bad)
        np.testing.assert_array_equal(concrete, traced)
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[bad].get())(x), [1.0, 4.0])
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[bad].set(9.0))(x), [0, 9, 2, 3, 4])
    with pytest.raises(ValueError, match="unknown mode"):
        cjit.jit(lambda x: x.at[1].add(1.0, mode="wrap"))(x)


# ---- dynamic_slice / dynamic_update_slice starts -----------------------------------------

def _start_ref(s, n, k, signed):
    s = int(s)
    if signed and s < 0:
        s += n
    return min(max(s, 0), n - k)


def _start_values(rng, n, dtype):
    dt = np.dtype(dtype)
    pool = [0, 1, n - 1, n, n + 4, 100]
    if dt.kind == "i":
        pool += [-1, -n, -n - 1, -100, -(2**31)]
    if dt == np.uint64:
        pool += [2**63, 2**64 - 1]
    return pool[rng.integers(len(pool))]


def test_generated_dynamic_slice_starts():
    """Static, traced and vmapped starts of every kind, both ops, against
    the rule above: 120 cases."""
    rng = np.random.default_rng(161)
    for n in range(120):
        shape = (int(rng.integers(1, 7)), int(rng.integers(1, 5)))
        sizes = tuple(int(rng.integers(0, d + 1)) for d in shape)
        dt = ["int32", "int64", "uint8", "uint32", "uint64", "python"][rng.integers(6)]
        how = ["static", "traced", "vmap"][rng.integers(3)]
        if dt == "python" and how != "static":
            dt = "int64"
        if how == "static" and dt != "python" and rng.random() < 0.5:
            dt = "python"
        starts = [_start_values(rng, d, "int64" if dt == "python" else dt) for d in shape]
        signed = dt in ("python", "int32", "int64")
        x = rng.integers(-50, 50, shape)
        upd = rng.integers(100, 200, sizes)
        op = ["slice", "update"][rng.integers(2)]
        at = [_start_ref(s, d, k, signed) for s, d, k in zip(starts, shape, sizes)]
        if op == "slice":
            want = x[at[0]:at[0] + sizes[0], at[1]:at[1] + sizes[1]]
            fn = lambda x, s0, s1: lax.dynamic_slice(x, (s0, s1), sizes)  # noqa: E731
        else:
            want = x.copy()
            want[at[0]:at[0] + sizes[0], at[1]:at[1] + sizes[1]] = upd
            fn = lambda x, s0, s1: lax.dynamic_update_slice(x, upd, (s0, s1))  # noqa: E731
        what = f"case {n}: {op} x{shape} starts {starts} ({dt}, {how}) sizes {sizes}"
        if how == "static":
            st = starts if dt == "python" else [np.array(s, dtype=object).astype(dt)[()] for s in starts]
            got = cjit.jit(lambda x: fn(x, *st))(x)
        elif how == "traced":
            st = [np.array(s, dtype=object).astype(dt)[()] for s in starts]
            got = cjit.jit(fn)(x, *st)
        else:   # a batch of two: this start and 0
            st0 = np.array([starts[0], 0], dtype=object).astype(dt)
            got = cjit.vmap(lambda s0: fn(x, s0, np.array(starts[1], dtype=object).astype(dt)[()]))(st0)
            other = _start_ref(0, shape[0], sizes[0], signed)
            if op == "slice":
                want = np.stack([want, x[other:other + sizes[0], at[1]:at[1] + sizes[1]]])
            else:
                w2 = x.copy()
                w2[other:other + sizes[0], at[1]:at[1] + sizes[1]] = upd
                want = np.stack([want, w2])
        np.testing.assert_array_equal(got, want, err_msg=what)


# ---- switch indices ------------------------------------------------------------------

def test_generated_switch_indices():
    """Negative, in-range and too-large indices of several dtypes, with 1 to
    5 branches, unbatched (eager and jit) and batched: 60 cases."""
    rng = np.random.default_rng(162)
    for n in range(60):
        nb = int(rng.integers(1, 6))
        dt = ["int8", "int32", "int64", "uint8", "uint64"][rng.integers(5)]
        pool = list(range(nb)) + [nb, nb + 3, 120]
        if np.dtype(dt).kind == "i":
            pool += [-1, -2, -100]
        if np.dtype(dt).itemsize == 8:
            pool += [2**32, 2**40 + 1] + ([2**63] if dt == "uint64" else [-(2**32)])
        vals = np.array([pool[k] for k in rng.integers(0, len(pool), 4)], dtype=object).astype(dt)
        branches = [(lambda k: lambda x: x * 0 + 10 * k + 1)(k) for k in range(nb)]
        want = np.array([10 * min(max(int(v), 0), nb - 1) + 1 for v in vals])
        what = f"case {n}: {nb} branches, indices {vals!r}"
        x = np.zeros(3, np.int64)
        batched = cjit.vmap(lambda i: lax.switch(i, branches, x))(vals)
        np.testing.assert_array_equal(batched, np.repeat(want[:, None], 3, 1), err_msg=what)
        one = cjit.jit(lambda i: lax.switch(i, branches, x))
        for v, w in zip(vals[:2], want[:2]):
            np.testing.assert_array_equal(one(v), np.full(3, w), err_msg=what)
        assert int(lax.switch(vals[0], branches, x)[0]) == want[0], what



def test_messages_about_indexing_say_what_cjit_has():
    """A float index is refused as NumPy does (an IndexError about the dtype,
    not a claim that gathers are missing); item assignment points to .at."""
    with pytest.raises(IndexError, match="traced float64 value"):
        cjit.jit(lambda x, i: x[i])(np.arange(3.0), np.float64(1.0))

    def assign(x):
        x[0] = 1.0
        return x
    with pytest.raises(TypeError, match=r"x\.at\[index\]\.set"):
        cjit.jit(assign)(np.arange(3.0))
