"""Operators of traced values that forward to cjit.numpy (py_tracer.c), and
the registry through which cjit.numpy gives C those functions."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cjit


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_remainder_operator_both_orders(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64) * 20).astype(dtype)
    y = (rng.standard_normal(64) * 6).astype(dtype)
    y[y == 0] = 3
    f = cjit.jit(lambda x, y: (x % y, 7 % y, x % 3, divmod(x, y)))
    a, b, c, (q, r) = f(x, y)
    tol = dict(rtol=1e-6, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a, x % y, **tol)
    np.testing.assert_allclose(b, dtype(7) % y, **tol)
    np.testing.assert_allclose(c, x % dtype(3), **tol)
    np.testing.assert_allclose(q, x // y, **tol)
    np.testing.assert_allclose(r, x % y, **tol)
    assert a.dtype == (x % y).dtype and q.dtype == (x // y).dtype


def test_remainder_operator_gradient():
    x = np.array([-7.5, -3.2, 2.5, 7.1])
    g = cjit.grad(lambda a: (a % 2.0 * a).sum())(x)
    np.testing.assert_allclose(g, (x % 2.0) + x, rtol=1e-12)


def test_methods_use_the_registered_functions():
    # C never imports cjit.numpy: a function missing from the registry is a
    # clear error naming it, not an AttributeError from an import
    code = textwrap.dedent("""
        import numpy as np, cjit
        from cjit import _cjit
        import cjit.numpy as cnp
        _cjit.register_tracer_functions({"reshape": cnp.reshape})
        try:
            cjit.jit(lambda x: x.sum())(np.ones(3))
        except RuntimeError as e:
            print("ERR", e)
        print(cjit.jit(lambda x: x.flatten())(np.ones((2, 2))).shape)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "registered no 'sum'" in r.stdout
    assert "(4,)" in r.stdout


def test_python_and_c_name_the_same_source_line():
    # errors raised by cjit.numpy (Python) and graph nodes (C) use one
    # definition of "the user's line"
    import cjit.numpy as cnp
    from cjit._trace_state import user_location
    here = user_location()
    assert here.endswith(f"test_tracer_operators.py:{sys._getframe().f_lineno - 1}")
    c = cjit.jit(lambda x: cnp.exp(x)).lower(np.ones(3)).compile()
    line = [ln for ln in c.as_text().splitlines() if "stage 0" in ln][0]
    assert line.split("# ")[1].split(":")[0] == here.split(":")[0]


def test_promotion_has_one_definition():
    # cjit.numpy asks the C layer (graph.c's cj_promote_all), which the graph
    # builders use too; it agrees with NumPy 2 on every mix of strong arrays
    # and weak Python scalars, in any order
    import itertools
    from cjit import _cjit
    dts = [np.dtype(t) for t in ("bool", "int32", "int64", "float32", "float64")]
    scalar_of = {"b": True, "i": 3, "f": 1.5}
    for k in (1, 2, 3):
        for combo in itertools.product([(d, w) for d in dts for w in (False, True)], repeat=k):
            got, weak = _cjit.result_type(combo)
            strong = [np.zeros(1, d) for d, w in combo if not w]
            weak_vals = [scalar_of[d.kind] for d, w in combo if w]
            if strong:
                want = np.result_type(*strong, *weak_vals)
                assert (got, weak) == (want, False), combo
            else:
                assert weak and got.kind == max((d for d, _ in combo), key=lambda d: "bif".index(d.kind)).kind
    # order does not matter: bool, a weak float and float32 give float32
    f32 = np.dtype("float32")
    assert _cjit.result_type([(np.dtype(bool), False), (np.dtype("float64"), True), (f32, False)]) == (f32, False)


def test_promotion_of_dtypes_cjit_does_not_have():
    # byte-swapped and narrow NumPy dtypes promote as NumPy promotes them,
    # to the supported dtype that holds NumPy's result
    from cjit.numpy._core import _as_supported, _result_type
    cases = [(">f8", "float32"), ("<i4", ">f4"), (">u2", "int32"), ("uint32", "int32"),
             ("float16", "float32"), ("float16", "int8"), ("uint64", "bool"),
             ("uint64", "int32"), ("uint64", "uint16"), (">u8", "float32")]
    for a, b in cases:
        got, weak = _result_type((np.dtype(a), False), (np.dtype(b), False))
        want = _as_supported(np.result_type(np.dtype(a), np.dtype(b)))
        assert (got, weak) == (want, False), (a, b, got, want)


def test_ndarray_methods_and_attributes_on_tracers():
    x = np.arange(12.0).reshape(3, 4) - 5
    methods = {
        "ravel": (), "all": (), "any": (), "std": (), "round": (), "copy": (), "conj": (),
        "conjugate": (), "diagonal": (), "cumsum": (1,), "cumprod": (0,),
    }
    for name, args in methods.items():
        got = cjit.jit(lambda a: getattr(a, name)(*args))(x)
        np.testing.assert_array_equal(got, getattr(x, name)(*args), err_msg=name)
    got = cjit.jit(lambda a: (a.swapaxes(0, 1), a.repeat(2, axis=0), a.take(1, axis=1)))(x)
    for g, w in zip(got, (x.swapaxes(0, 1), x.repeat(2, axis=0), x.take(1, axis=1))):
        np.testing.assert_array_equal(g, w)
    got = cjit.jit(lambda a: (a.real, a.imag, a.mT, a.ptp(axis=0)))(x)
    for g, w in zip(got, (x.real, x.imag, x.mT, np.ptp(x, axis=0))):
        np.testing.assert_array_equal(g, w)
    sizes = cjit.jit(lambda a: a * (a.itemsize + a.nbytes))(x.astype(np.float32))
    np.testing.assert_array_equal(sizes, x.astype(np.float32) * (4 + 48))
    with pytest.raises(cjit.errors.ConcretizationError, match="item"):
        cjit.jit(lambda a: a.item())(x)
    with pytest.raises(cjit.errors.ConcretizationError, match="tolist"):
        cjit.jit(lambda a: a.tolist())(x)
