"""cjit.jit: tracing, the compile cache, static arguments, pytrees, closed-over
arrays, inspection (lower / as_text / compile / ShapeDtypeStruct) and the
environment switches of SPEC section 6."""
import functools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

from conftest import assert_close, rand, run_python


def counted(fn):
    """Wraps fn so that every trace (every Python execution) is counted in
    wrapper.traces; the wrapper is what gets jitted."""
    @functools.wraps(fn)  # keeps the signature, so static_argnames can find positions
    def wrapper(*args, **kwargs):
        wrapper.traces += 1
        return fn(*args, **kwargs)
    wrapper.traces = 0
    return wrapper


# ---------------------------------------------------------------------------
# the decorator

def test_decorator_bare():
    @cjit.jit
    def f(x, y):
        return x * y + 1.0

    x, y = rand((3,), "float32", 1), rand((3,), "float32", 2)
    assert_close(f(x, y), x * y + 1.0)


def test_decorator_with_options():
    @cjit.jit(static_argnums=(1,))
    def f(x, n):
        return x * n

    x = rand((3,), "float64", 1)
    assert_close(f(x, 3), x * 3)

    @cjit.jit(static_argnums=1)          # a bare int is accepted as in JAX
    def g(x, n):
        return x + n

    assert_close(g(x, 2), x + 2)


def test_jit_called_as_function():
    f = cjit.jit(lambda x: cnp.exp(x) - 1, static_argnames=())
    x = rand((4,), "float64", 1)
    assert_close(f(x), np.exp(x) - 1, rtol=1e-13)


def test_jitted_keeps_working_across_many_calls():
    f = cjit.jit(lambda x: x + 1)
    for i in range(20):
        x = np.full((2,), i, np.int32)
        assert_close(f(x), x + 1)


# ---------------------------------------------------------------------------
# the cache: tracing happens on misses only

def test_second_call_does_not_trace():
    f = counted(lambda x, y: x * y)
    jf = cjit.jit(f)
    x, y = rand((3, 4), "float32", 1), rand((3, 4), "float32", 2)
    assert_close(jf(x, y), x * y)
    assert f.traces == 1
    x2, y2 = rand((3, 4), "float32", 3), rand((3, 4), "float32", 4)
    assert_close(jf(x2, y2), x2 * y2)      # new values, same signature
    assert f.traces == 1
    ci = jf.cache_info()
    assert (ci["hits"], ci["misses"], ci["entries"]) == (1, 1, 1)


def test_retrace_on_new_shape_dtype_or_weak_type():
    f = counted(lambda x, s: x * s)
    jf = cjit.jit(f)
    x = rand((3,), "float32", 1)
    info = lambda: (jf.cache_info()["hits"], jf.cache_info()["misses"],
                    jf.cache_info()["entries"])

    jf(x, 2.0)
    assert (f.traces, info()) == (1, (0, 1, 1))
    jf(x, 3.0)                               # same weak float: hit
    assert (f.traces, info()) == (1, (1, 1, 1))
    jf(rand((4,), "float32", 2), 2.0)        # new shape
    assert (f.traces, info()) == (2, (1, 2, 2))
    jf(rand((3,), "float64", 3), 2.0)        # new dtype
    assert (f.traces, info()) == (3, (1, 3, 3))
    out = jf(x, np.float32(2.0))             # strong scalar instead of weak
    assert (f.traces, info()) == (4, (1, 4, 4))
    assert_close(out, x * np.float32(2.0))
    out = jf(x, 2)                           # weak int instead of weak float
    assert (f.traces, info()) == (5, (1, 5, 5))
    assert_close(out, x * 2)
    jf(rand((3,), "float32", 4), 5.0)        # back to the first signature
    assert (f.traces, info()) == (5, (2, 5, 5))


def test_noncontiguous_argument_hits_cache():
    f = counted(lambda x: x * 2)
    jf = cjit.jit(f)
    base = rand((6, 6), "float64", 1)
    jf(np.ascontiguousarray(base[:3]))
    out = jf(base[::2])                      # same shape and dtype, strided
    assert f.traces == 1
    assert_close(out, base[::2] * 2)
    out = jf(base[::-2].T[:3].T[:3])
    assert_close(out, base[::-2].T[:3].T[:3] * 2)


def test_cache_info_counts_exact():
    jf = cjit.jit(lambda x: x - 1)
    assert jf.cache_info()["entries"] == 0
    assert jf.cache_info()["hits"] == 0
    assert jf.cache_info()["misses"] == 0
    x = np.arange(3.0)
    for _ in range(5):
        jf(x)
    jf(np.arange(4.0))
    jf(np.arange(4))
    ci = jf.cache_info()
    assert (ci["hits"], ci["misses"], ci["entries"]) == (4, 3, 3)


def test_clear_cache():
    f = counted(lambda x: x + 2)
    jf = cjit.jit(f)
    x = np.arange(3.0)
    jf(x)
    jf(np.arange(5.0))
    assert jf.cache_info()["entries"] == 2
    jf.clear_cache()
    assert jf.cache_info()["entries"] == 0
    assert_close(jf(x), x + 2)
    assert f.traces == 3
    assert jf.cache_info()["entries"] == 1


def test_clear_cache_is_per_function():
    f, g = counted(lambda x: x + 1), counted(lambda x: x + 2)
    jf, jg = cjit.jit(f), cjit.jit(g)
    x = np.arange(3.0)
    jf(x), jg(x)
    jf.clear_cache()
    jf(x), jg(x)
    assert (f.traces, g.traces) == (2, 1)


def test_global_cache_info_keys(fresh_caches):
    info = cjit.cache_info()
    assert isinstance(info, dict)
    for key in ("entries", "hits", "misses", "compiles", "code_bytes"):
        assert key in info, key
        assert isinstance(info[key], int) and info[key] >= 0, (key, info[key])
    before = cjit.cache_info()
    jf = cjit.jit(lambda x: x * 3 + 1)
    jf(np.ones(3))
    after = cjit.cache_info()
    assert after["compiles"] >= before["compiles"] + 1
    assert after["entries"] >= before["entries"] + 1
    assert after["misses"] >= before["misses"] + 1
    assert after["code_bytes"] > 0
    jf(np.ones(3))
    assert cjit.cache_info()["hits"] >= after["hits"] + 1
    assert cjit.cache_info()["compiles"] == after["compiles"]


def test_clear_caches_then_recompile(fresh_caches):
    f = counted(lambda x, y: cnp.exp(x) + y)
    jf = cjit.jit(f)
    x, y = rand((3,), "float64", 1), rand((3,), "float64", 2)
    want = np.exp(x) + y
    assert_close(jf(x, y), want, rtol=1e-13)
    assert_close(cnp.exp(x), np.exp(x), rtol=1e-13)       # an eager kernel too
    assert cjit.cache_info()["entries"] >= 1
    code = cjit.cache_info()["code_bytes"]
    cjit.clear_caches()
    info = cjit.cache_info()
    assert info["entries"] == 0
    assert info["code_bytes"] <= code
    assert jf.cache_info()["entries"] == 0
    compiles = info["compiles"]
    assert_close(jf(x, y), want, rtol=1e-13)              # works again
    assert f.traces == 2
    assert cjit.cache_info()["compiles"] > compiles
    assert_close(cnp.exp(x), np.exp(x), rtol=1e-13)


# ---------------------------------------------------------------------------
# static arguments

def test_static_argnums():
    f = counted(lambda x, n, flag: x * n if flag else x - n)
    jf = cjit.jit(f, static_argnums=(1, 2))
    x = rand((3,), "float32", 1)
    assert_close(jf(x, 2, True), x * 2)
    assert_close(jf(x, 2, True), x * 2)
    assert f.traces == 1
    assert_close(jf(x, 3, True), x * 3)                     # new static value
    assert f.traces == 2
    assert_close(jf(x, 3, False), x - 3)
    assert f.traces == 3
    assert jf.cache_info()["entries"] == 3
    assert jf.cache_info()["hits"] == 1


def test_static_argnums_negative_and_python_control_flow():
    def f(x, n):
        for _ in range(n):           # Python control flow on a static value
            x = x * 2
        return x

    jf = cjit.jit(f, static_argnums=-1)
    x = np.ones(2, np.float32)
    assert_close(jf(x, 3), x * 8)
    assert_close(jf(x, 0), x)


def test_static_argnames():
    f = counted(lambda x, *, mode="add", k=1.0: x + k if mode == "add" else x * k)
    jf = cjit.jit(f, static_argnames=("mode",))
    x = rand((3,), "float64", 1)
    assert_close(jf(x, mode="add"), x + 1.0)
    assert_close(jf(x, mode="add"), x + 1.0)
    assert f.traces == 1
    assert_close(jf(x, mode="mul", k=3.0), x * 3.0)
    assert f.traces == 2
    assert_close(jf(x, mode="mul", k=4.0), x * 4.0)          # k is traced: no retrace
    assert f.traces == 2


def test_static_argnames_given_by_keyword_or_position():
    # as in JAX, a static name also covers the parameter passed by position;
    # `n > 0` would raise ConcretizationError if n were traced.
    f = counted(lambda x, n: x * n if n > 0 else x - n)
    jf = cjit.jit(f, static_argnames="n")
    x = np.arange(3)
    assert_close(jf(x, n=4), x * 4)
    assert_close(jf(x, n=-5), x + 5)
    assert f.traces == 2
    assert_close(jf(x, 3), x * 3)


def test_static_value_that_is_a_tuple():
    jf = cjit.jit(lambda x, shape: cnp.reshape(x, shape), static_argnums=1)
    x = np.arange(6.0)
    assert_close(jf(x, (2, 3)), x.reshape(2, 3))
    assert_close(jf(x, (3, 2)), x.reshape(3, 2))
    assert jf.cache_info()["entries"] == 2


@pytest.mark.parametrize("bad", [[1, 2], {"a": 1}, np.ones(2)], ids=["list", "dict", "ndarray"])
def test_unhashable_static_argument(bad):
    jf = cjit.jit(lambda x, s: x, static_argnums=1)
    with pytest.raises(TypeError):
        jf(np.ones(2), bad)
    assert jf.cache_info()["entries"] == 0
    assert_close(jf(np.ones(2), 1), np.ones(2))


# ---------------------------------------------------------------------------
# pytrees

def test_pytree_dict_in_and_out_sorted_keys():
    def f(p):
        return {"z": p["b"] * 2, "a": p["a"] + 1, "m": p["b"] - p["a"]}

    p = {"b": np.arange(3.0), "a": np.ones(3)}
    out = cjit.jit(f)(p)
    assert isinstance(out, dict)
    assert sorted(out) == ["a", "m", "z"]
    assert list(out) == ["a", "m", "z"]
    assert_close(out["z"], p["b"] * 2)
    assert_close(out["a"], p["a"] + 1)
    assert_close(out["m"], p["b"] - p["a"])


def test_pytree_tuple_list_none_nested():
    def f(t):
        (a, b), lst, none, d = t
        assert none is None
        return [a + b, (lst[0] * 2, None), {"k": (d["x"], [lst[1]])}], None

    a = rand((2,), "float32", 1)
    b = rand((2,), "float32", 2)
    l0 = np.arange(3, dtype=np.int64)
    l1 = np.array(True)
    d = {"x": rand((1, 2), "float64", 3)}
    out = cjit.jit(f)(((a, b), [l0, l1], None, d))
    assert isinstance(out, tuple) and len(out) == 2 and out[1] is None
    first = out[0]
    assert isinstance(first, list) and len(first) == 3
    assert_close(first[0], a + b)
    assert isinstance(first[1], tuple) and first[1][1] is None
    assert_close(first[1][0], l0 * 2)
    assert isinstance(first[2], dict)
    assert_close(first[2]["k"][0], d["x"])
    assert isinstance(first[2]["k"][1], list)
    assert_close(first[2]["k"][1][0], l1)


def test_pytree_structure_change_retraces():
    f = counted(lambda t: t[0] + t[1] if len(t) == 2 else t[0])
    jf = cjit.jit(f)
    x = np.ones(2)
    assert_close(jf((x, x)), x + x)
    assert_close(jf([x, x]), x + x)      # list vs tuple: a different tree
    assert_close(jf((x,)), x)
    assert f.traces == 3


def test_python_scalar_outputs_come_back_as_arrays():
    out = cjit.jit(lambda x: (x * 2, 1.5, 3, True))(np.ones(2, np.float32))
    assert isinstance(out, tuple) and len(out) == 4
    assert_close(out[0], np.full(2, 2.0, np.float32))
    for got, want in zip(out[1:], (1.5, 3, True)):
        assert isinstance(got, np.ndarray), type(got)
        assert got.shape == ()
        assert got.item() == want


def test_python_scalar_arguments():
    f = cjit.jit(lambda a, b, c: (a * 2, b + 1, c))
    a, b, c = f(1.5, 2, True)
    assert isinstance(a, np.ndarray) and float(a) == 3.0
    assert isinstance(b, np.ndarray) and int(b) == 3
    assert isinstance(c, np.ndarray) and bool(c) is True
    a, b, c = f(np.float32(1.5), np.int32(2), np.bool_(False))
    assert a.dtype == np.float32 and b.dtype == np.int32 and c.dtype == np.bool_
    assert float(a) == 3.0 and int(b) == 3 and bool(c) is False


def test_kwargs():
    f = counted(lambda x, y=None, scale=1.0: x * scale if y is None else (x + y) * scale)
    jf = cjit.jit(f)
    x, y = rand((3,), "float64", 1), rand((3,), "float64", 2)
    assert_close(jf(x), x * 1.0)
    assert_close(jf(x, y=y), x + y)
    assert_close(jf(x, y=y, scale=2.0), (x + y) * 2.0)
    assert_close(jf(y=y, x=x, scale=3.0), (x + y) * 3.0)
    assert_close(jf(x, y, 0.5), (x + y) * 0.5)


def test_return_input_unchanged():
    x = rand((3, 4), "int32", 1)
    out = cjit.jit(lambda a: a)(x)
    assert_close(out, x)
    # results are fresh arrays that the caller owns
    assert out is not x
    assert not np.shares_memory(out, x)
    with pytest.raises(TypeError, match="immutable"):
        out[0, 0] = 999
    assert type(out) is cjit.Array and not out.flags.writeable
    a, b = cjit.jit(lambda a, b: (b, a))(x, x[::-1])
    assert_close(a, x[::-1])
    assert_close(b, x)


def test_same_output_twice():
    x = rand((3,), "float32", 1)
    a, b = cjit.jit(lambda v: (v * 2, v * 2))(x)
    assert_close(a, x * 2)
    assert_close(b, x * 2)
    assert not np.shares_memory(a, b)       # two distinct arrays


def test_several_outputs():
    def f(x, y):
        return x + y, x * y, (x @ y.T).sum(), cnp.max(x, axis=1)

    x, y = rand((3, 4), "float64", 1), rand((3, 4), "float64", 2)
    out = cjit.jit(f)(x, y)
    want = (x + y, x * y, (x @ y.T).sum(), np.max(x, axis=1))
    assert isinstance(out, tuple) and len(out) == 4
    for g, w in zip(out, want):
        assert_close(g, w)


def test_zero_size_and_0d_arguments():
    f = cjit.jit(lambda a, b: (a * 2, b + 1, a.sum()))
    a = np.zeros((0, 3), np.float32)
    b = np.array(4.0)
    o1, o2, o3 = f(a, b)
    assert_close(o1, a * 2)
    assert_close(o2, b + 1)
    assert_close(o3, a.sum())


def test_function_without_array_arguments():
    f = cjit.jit(lambda: cnp.arange(4) * 2)
    assert_close(f(), np.arange(4) * 2)


# ---------------------------------------------------------------------------
# closed-over arrays are used by reference

def test_closed_over_array_by_reference():
    w = np.ones(4, np.float32)

    f = counted(lambda x: x * w)
    jf = cjit.jit(f)
    x = rand((4,), "float32", 1)
    assert_close(jf(x), x * w)
    w[:] = 5.0                                 # mutate in place after compiling
    assert_close(jf(x), x * 5.0)
    assert f.traces == 1
    w[1] = -1.0
    assert_close(jf(x), x * np.array([5, -1, 5, 5], np.float32))


def test_closed_over_array_in_reduction_and_matmul():
    # cnp.sum(m), not m.sum(): the method of an ndarray is NumPy's own and
    # runs once, at trace time.
    m = rand((3, 4), "float64", 2)
    jf = cjit.jit(lambda x: (x @ m).sum() + cnp.sum(m) + cnp.max(m, axis=0))
    x = rand((2, 3), "float64", 1)
    assert_close(jf(x), (x @ m).sum() + m.sum() + m.max(axis=0))
    m *= 2
    assert_close(jf(x), (x @ m).sum() + m.sum() + m.max(axis=0))


def test_closed_over_array_used_twice_and_lowered_arrays():
    w = np.arange(3.0)
    jf = cjit.jit(lambda x: x * w + w)
    x = np.ones(3)
    assert_close(jf(x), x * w + w)
    w += 1
    assert_close(jf(x), x * w + w)


def _closed_over_layouts():
    """name -> (view, refill): a (6, 8) float64 view of each layout, and a
    function that writes new values into the memory behind it in place
    (through its base, never by rebinding)."""
    gen = np.random.default_rng(7)
    vals = lambda shape: gen.standard_normal(shape)
    out = {}
    base = vals((6, 8))
    out["contiguous"] = (base, lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    base = vals((8, 6))
    out["transposed"] = (base.T, lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    base = vals((12, 8))
    out["strided"] = (base[::2], lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    base = np.asfortranarray(vals((6, 8)))
    out["fortran"] = (base, lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    base = vals((6, 8))
    out["reversed"] = (base[::-1, ::-1], lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    # native float64 memory that holds big-endian bytes, read through a byte-swapped view
    base = vals((6, 8)).astype(">f8").view(np.float64)
    out["byteswapped_view"] = (base.view(base.dtype.newbyteorder()),
                               lambda b=base: b.__setitem__(Ellipsis,
                                                            vals(b.shape).astype(">f8").view(np.float64)))
    buf = bytearray(vals((6, 8)).astype(">f8").tobytes())
    out["big_endian_buffer"] = (np.ndarray((6, 8), ">f8", buffer=buf),
                                lambda b=buf: b.__setitem__(slice(None), vals((6, 8)).astype(">f8").tobytes()))
    base = vals(8)
    out["broadcast"] = (np.broadcast_to(base, (6, 8)), lambda b=base: b.__setitem__(Ellipsis, vals(b.shape)))
    una = np.zeros(6 * 8 * 8 + 1, np.uint8)[1:].view(np.float64).reshape(6, 8)   # misaligned
    una[...] = vals((6, 8))
    out["unaligned"] = (una, lambda u=una: u.__setitem__(Ellipsis, vals(u.shape)))
    return out


@pytest.mark.parametrize("layout", list(_closed_over_layouts()))
def test_closed_over_array_of_any_layout_is_live(layout):
    # Was: only C-contiguous arrays were read by reference; every other
    # layout was copied once at trace time and later changes were ignored.
    view, refill = _closed_over_layouts()[layout]
    x = np.linspace(-2.0, 2.0, 48).reshape(6, 8)
    f = cjit.jit(lambda x: cnp.sin(x) * view + cnp.sum(view, axis=0))
    g = cjit.grad(lambda x: (cnp.sin(x) * view).sum())
    jg = cjit.jit(g)
    compiled = f.lower(x).compile()
    for _ in range(3):   # the first call, then cached calls (the C fast path)
        want = np.sin(x) * view + view.sum(axis=0)
        assert_close(f(x), want)
        assert_close(compiled(x), want)
        assert_close(g(x), np.cos(x) * view)
        assert_close(jg(x), np.cos(x) * view)
        refill()
    assert f.cache_info()["misses"] == 1   # no retrace: the same code reads the new values


# ---------------------------------------------------------------------------
# one fused kernel

def test_fused_elementwise_chain_is_one_kernel():
    def f(x, y):
        return cnp.tanh(cnp.exp(x * 2.0 + y) - 1.0) * x + cnp.maximum(y, 0.0)

    x = rand((64, 32), "float32", 1)
    y = rand((64, 32), "float32", 2)
    compiled = cjit.jit(f).lower(x, y).compile()
    ma = compiled.memory_analysis()
    assert ma.num_kernels == 1
    want = np.tanh(np.exp(x * 2.0 + y) - 1.0) * x + np.maximum(y, 0.0)
    assert_close(compiled(x, y), want, rtol=2e-5, atol=1e-6)


def test_sum_of_product_is_one_kernel():
    x = rand((1000,), "float64", 1)
    y = rand((1000,), "float64", 2)
    compiled = cjit.jit(lambda a, b: (a * b).sum()).lower(x, y).compile()
    assert compiled.memory_analysis().num_kernels == 1
    assert_close(compiled(x, y), (x * y).sum())


def test_memory_analysis_fields():
    x = rand((16, 8), "float32", 1)
    ma = cjit.jit(lambda a: cnp.exp(a) + 1).lower(x).compile().memory_analysis()
    for field in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                  "temp_size_in_bytes", "peak_memory_in_bytes", "num_kernels", "peak_live"):
        assert hasattr(ma, field), field
    assert ma.num_kernels >= 1


# ---------------------------------------------------------------------------
# inspection: lower, as_text, compile, ShapeDtypeStruct

def test_lower_shape_dtype_struct_as_text_has_ops_and_source_lines():
    def f(x, y):
        a = cnp.exp(x)
        return a * y

    exp_line = f.__code__.co_firstlineno + 1
    mul_line = f.__code__.co_firstlineno + 2
    lowered = cjit.jit(f).lower(cjit.ShapeDtypeStruct((3, 4), np.float32),
                                cjit.ShapeDtypeStruct((4,), np.dtype("float32")))
    text = lowered.as_text()
    assert isinstance(text, str)
    assert "exp" in text
    assert "mul" in text
    assert f"test_jit.py:{exp_line}" in text, text
    assert f"test_jit.py:{mul_line}" in text, text
    lines = [ln for ln in text.splitlines() if "exp" in ln]
    assert any(f":{exp_line}" in ln for ln in lines), text


def test_shape_dtype_struct_attributes():
    s = cjit.ShapeDtypeStruct((2, 3), np.int32)
    assert s.shape == (2, 3)
    assert s.dtype == np.int32


def test_lower_does_not_run_and_compile_runs_later():
    f = counted(lambda x: x + 1)
    jf = cjit.jit(f)
    lowered = jf.lower(np.zeros(3, np.int64))
    assert f.traces == 1
    compiled = lowered.compile()
    assert_close(compiled(np.arange(3)), np.arange(3) + 1)
    assert_close(compiled(np.arange(3)[::-1]), np.arange(3)[::-1] + 1)


def test_lower_with_pytree():
    jf = cjit.jit(lambda p: {"out": p["w"] * 3, "n": p["v"].sum()})
    compiled = jf.lower({"w": cjit.ShapeDtypeStruct((2,), np.float64),
                         "v": cjit.ShapeDtypeStruct((2, 2), np.int32)}).compile()
    out = compiled({"w": np.ones(2), "v": np.ones((2, 2), np.int32)})
    assert_close(out["out"], np.full(2, 3.0))
    assert_close(out["n"], np.ones((2, 2), np.int32).sum())


@pytest.mark.parametrize("bad", [np.zeros(4, np.float32), np.zeros(3, np.float64),
                                 np.zeros((3, 1), np.float32), np.zeros((), np.float32)],
                         ids=["shape", "dtype", "rank", "0d"])
def test_compiled_with_mismatched_arguments(bad):
    compiled = cjit.jit(lambda x: x * 2).lower(cjit.ShapeDtypeStruct((3,), np.float32)).compile()
    with pytest.raises(TypeError):
        compiled(bad)
    assert_close(compiled(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))


def test_compiled_with_wrong_number_of_arguments():
    compiled = cjit.jit(lambda x, y: x + y).lower(np.ones(2), np.ones(2)).compile()
    with pytest.raises(TypeError):
        compiled(np.ones(2))
    with pytest.raises(TypeError):
        compiled(np.ones(2), np.ones(2), np.ones(2))


def test_cost_analysis():
    x = rand((1000,), "float32", 1)
    y = rand((1000,), "float32", 2)
    cost = cjit.jit(lambda a, b: a * b + a).lower(x, y).compile().cost_analysis()
    assert isinstance(cost, dict)
    assert "flops" in cost and "bytes_accessed" in cost
    assert cost["flops"] >= 1000
    assert cost["bytes_accessed"] >= x.nbytes + y.nbytes


def test_compiled_as_text():
    text = cjit.jit(lambda a: cnp.exp(a).sum()).lower(np.ones((4, 4))).compile().as_text()
    assert isinstance(text, str) and text.strip()


# ---------------------------------------------------------------------------
# environment switches (each in a fresh interpreter, so that it does not matter
# whether cjit reads them at import or at compile time)

ENV_PROG = """
import numpy as np, cjit, cjit.numpy as cnp
calls = []
def f(x, y):
    calls.append(type(x).__name__)
    return cnp.tanh(cnp.exp(x * 2.0 + y) - 1.0) * x + (x @ y.T).sum() + cnp.max(y, axis=1, keepdims=True)
x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
y = np.linspace(0, 2, 12, dtype=np.float32).reshape(3, 4)
jf = cjit.jit(f)
a = jf(x, y); b = jf(x + 1, y)
want_a = np.tanh(np.exp(x * 2.0 + y) - 1.0) * x + (x @ y.T).sum() + np.max(y, axis=1, keepdims=True)
want_b = np.tanh(np.exp((x + 1) * 2.0 + y) - 1.0) * (x + 1) + ((x + 1) @ y.T).sum() + np.max(y, axis=1, keepdims=True)
assert a.dtype == np.float32 and a.shape == (3, 4), (a.dtype, a.shape)
np.testing.assert_allclose(a, want_a, rtol=2e-5, atol=1e-5)
np.testing.assert_allclose(b, want_b, rtol=2e-5, atol=1e-5)
print("CALLS", len(calls))
"""


def test_env_disable_jit_same_results_and_runs_python_each_call():
    r = run_python(ENV_PROG, {"CJIT_DISABLE_JIT": "1"})
    assert r.returncode == 0, r.stderr
    # op by op: the Python function runs on every call, nothing is cached
    assert "CALLS 2" in r.stdout, r.stdout


def test_env_disable_jit_in_process(monkeypatch):
    monkeypatch.setenv("CJIT_DISABLE_JIT", "1")
    x = rand((3, 4), "float64", 1)
    f = cjit.jit(lambda a: cnp.exp(a).sum(axis=0) * 2)
    assert_close(f(x), np.exp(x).sum(axis=0) * 2, rtol=1e-13)


def test_env_default_traces_once():
    r = run_python(ENV_PROG)
    assert r.returncode == 0, r.stderr
    assert "CALLS 1" in r.stdout, r.stdout


@pytest.mark.parametrize("passes", ["-fuse", "-memplan", "-fuse,-memplan"])
def test_env_passes_off_same_results(passes):
    r = run_python(ENV_PROG, {"CJIT_PASSES": passes})
    assert r.returncode == 0, r.stderr


def test_env_passes_in_process(monkeypatch):
    monkeypatch.setenv("CJIT_PASSES", "-fuse")

    def fresh_function_for_passes(a, b):
        return cnp.tanh(cnp.exp(a * 2.0 + b) - 1.0) * a

    x, y = rand((8, 5), "float32", 1), rand((8, 5), "float32", 2)
    got = cjit.jit(fresh_function_for_passes)(x, y)
    assert_close(got, np.tanh(np.exp(x * 2.0 + y) - 1.0) * x, rtol=2e-5, atol=1e-6)


def test_env_passes_fuse_off_really_turns_fusion_off():
    prog = """
import numpy as np, cjit, cjit.numpy as cnp
f = cjit.jit(lambda x: cnp.tanh(cnp.exp(x * 2.0) - 1.0))
x = np.linspace(-1, 1, 8, dtype=np.float32)
c = f.lower(x).compile()
np.testing.assert_allclose(c(x), np.tanh(np.exp(x * 2.0) - 1.0), rtol=2e-5, atol=1e-6)
print("KERNELS", c.memory_analysis().num_kernels)
"""
    on = run_python(prog)
    off = run_python(prog, {"CJIT_PASSES": "-fuse"})
    assert on.returncode == 0, on.stderr
    assert off.returncode == 0, off.stderr
    k_on = int(re.search(r"KERNELS (\d+)", on.stdout).group(1))
    k_off = int(re.search(r"KERNELS (\d+)", off.stdout).group(1))
    assert k_on == 1
    assert k_off > 1


def test_env_log_compiles_says_why():
    prog = """
import numpy as np, cjit
def logged_function_name(alpha_arg, beta_arg):
    return alpha_arg + beta_arg
jf = cjit.jit(logged_function_name)
jf(np.ones(3), np.ones(3))
import sys; sys.stderr.write("=====SPLIT=====\\n"); sys.stderr.flush()
jf(np.ones(3), np.ones(3))
sys.stderr.write("=====SPLIT=====\\n"); sys.stderr.flush()
jf(np.ones(3), np.ones(3, np.float32))
"""
    r = run_python(prog, {"CJIT_LOG_COMPILES": "1"})
    assert r.returncode == 0, r.stderr
    first, hit, second = r.stderr.split("=====SPLIT=====\n")
    assert "logged_function_name" in first, first
    assert hit.strip() == "", hit                  # a cache hit logs nothing
    assert "logged_function_name" in second, second
    # which argument changed: by name or by position
    assert re.search(r"beta_arg|arg(ument)?s?\s*\[?1\]?", second, re.I), second


def test_env_log_compiles_in_process(monkeypatch, capfd):
    monkeypatch.setenv("CJIT_LOG_COMPILES", "1")

    def another_logged_fn(x):
        return x * 2

    jf = cjit.jit(another_logged_fn)
    jf(np.ones(2))
    jf(np.ones(5))
    err = capfd.readouterr().err
    assert "another_logged_fn" in err


def test_env_unset_logs_nothing():
    prog = """
import numpy as np, cjit
cjit.jit(lambda x: x + 1)(np.ones(3))
"""
    r = run_python(prog)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr


# ---------------------------------------------------------------------------
# unsupported arguments

@pytest.mark.parametrize("bad,typename", [
    ("a string", "str"),
    (["a", "b"], "str"),
    (np.ones(3, np.float16), "float16"),
    (np.ones(3, np.clongdouble), "complex256"),
    (np.array([1, "x"], dtype=object), "object"),
    (np.ones(3, np.longdouble), "float128"),
    (object(), "object"),
], ids=["str", "list_of_str", "float16", "complex256", "object_array", "longdouble", "object"])
def test_unsupported_argument_types(bad, typename):
    def takes_weird(good_arg, weird_arg):
        return good_arg + 1

    jf = cjit.jit(takes_weird)
    with pytest.raises(TypeError) as ei:
        jf(np.ones(3), bad)
    msg = str(ei.value)
    assert re.search(r"weird_arg|arg(ument)?s?\s*\[?1\]?", msg), msg
    assert typename in msg, msg
    assert jf.cache_info()["entries"] == 0
    assert_close(jf(np.ones(3), np.ones(3)), np.full(3, 2.0))


def test_unsupported_eager_argument():
    with pytest.raises(TypeError):
        cnp.exp(np.ones(3, np.clongdouble))
    with pytest.raises(TypeError):
        cnp.add(np.ones(3), "x")




def test_cjit_dump_writes_graph_plan_and_ir(tmp_path):
    code = ("import numpy as np, cjit, cjit.numpy as cnp\n"
            "print(cjit.jit(lambda x: cnp.exp(x).sum())(np.ones(4)))\n")
    env = dict(os.environ, CJIT_DUMP=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    graph = [n for n in names if n.endswith(".graph.txt")]
    assert graph and any(n.endswith(".raw.ll") for n in names) and any(n.endswith(".opt.ll") for n in names)
    text = (tmp_path / graph[0]).read_text()
    assert "exp(%0)" in text and "reduce_sum" in text and "kernel 0" in text
    assert "define" in (tmp_path / [n for n in names if n.endswith(".opt.ll")][0]).read_text()
