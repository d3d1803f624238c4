"""Complex support registered per function in one place
(numpy/_complex_dispatch.py, the entries in _complex_api.py and
_complex_linalg.py): every public function dispatches where it is defined,
each entry's facts (dtype position, the keywords it refuses) hold against
NumPy and the real functions."""
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp


def _public_functions(ns):
    names = getattr(ns, "__all__", None) if ns is not cnp else None
    return {n: f for n, f in vars(ns).items()
            if (n in names if names is not None else not n.startswith("_")) and callable(f)
            and not isinstance(f, type) and getattr(f, "__module__", "").startswith("cjit.numpy")}


def test_public_functions_are_the_defining_modules_complex_aware_functions():
    """cjit.numpy.X is the object its module defines, and it dispatches
    complex arguments: internal modules that import it get the same."""
    for ns, prefix in ((cnp, ""), (cnp.linalg, "linalg.")):
        for name, f in _public_functions(ns).items():
            assert getattr(f, "_cjit_complex_wrapped", False), prefix + name
            assert getattr(sys.modules[f.__module__], name, None) is f, prefix + name


def test_every_registry_entry_names_a_public_function():
    from cjit.numpy import _complex_dispatch
    public = set(_public_functions(cnp)) | {"linalg." + n for n in _public_functions(cnp.linalg)}
    assert set(_complex_dispatch._REGISTRY) <= public


def test_a_function_without_complex_support_says_so():
    with pytest.raises(NotImplementedError, match="cjit.numpy.nanmean: complex"):
        cjit.jit(lambda z: cnp.nanmean(z))(np.ones(3, np.complex64))


_CREATION = [("zeros", lambda dt: ((2, 3), dt)), ("ones", lambda dt: ((3,), dt)),
             ("full", lambda dt: ((2,), 1 - 2j, dt)), ("eye", lambda dt: (3, 4, 1, dt)),
             ("identity", lambda dt: (3, dt)), ("zeros_like", lambda dt: (np.ones(2), dt)),
             ("ones_like", lambda dt: (np.ones((2, 2)), dt)),
             ("full_like", lambda dt: (np.ones(3), 2 + 1j, dt)),
             ("asarray", lambda dt: ([1, 2j], dt)), ("array", lambda dt: ([[1], [2]], dt))]


def test_identity_takes_a_complex_dtype_by_position():
    """Regression: identity(n, complex64) went to eye's implementation with
    the dtype in eye's M (a KeyError)."""
    got = cnp.identity(3, np.complex64)
    np.testing.assert_array_equal(np.asarray(got), np.identity(3, np.complex64))
    assert np.asarray(got).dtype == np.complex64
    got = cjit.jit(lambda: cnp.identity(2, np.complex128))()
    np.testing.assert_array_equal(np.asarray(got), np.identity(2, np.complex128))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(_CREATION), st.sampled_from([np.complex64, np.complex128]),
       st.booleans(), st.booleans())
def test_creation_with_a_complex_dtype_matches_numpy(fn, dt, by_keyword, traced):
    """30 cases per run: each creation function, both complex dtypes, the
    dtype by position or keyword, eager or in jit (the registry's dtype
    position of each function against NumPy's signature)."""
    name, make_args = fn
    args = make_args(dt)
    kwargs = {}
    if by_keyword:
        args, kwargs = args[:-1], {"dtype": args[-1]}
    want = getattr(np, name)(*args, **kwargs)
    f = getattr(cnp, name)
    got = cjit.jit(lambda: f(*args, **kwargs))() if traced else f(*args, **kwargs)
    got = np.asarray(got)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_REDUCTIONS = ["sum", "mean", "var", "std", "prod", "cumsum", "cumprod", "all", "any",
               "count_nonzero", "max", "argmax", "ptp", "nansum"]
_KWARGS = ["where", "out", "initial", "keepdims", "axis", "ddof", "mean", "correction"]


def _kw(name, complex_):
    z = np.array([[1 + 1j, 2 - 1j, 5 + 3j], [-1j, 0.5, 2 + 2j]])
    return {"where": np.array([[True, False, True], [True, True, False]]), "out": np.empty(()),
            "initial": 2, "keepdims": True, "axis": 0, "ddof": 1, "correction": 1,
            "mean": (z.mean(keepdims=True) if complex_ else z.real.mean(keepdims=True))}[name]


def _call(fn, *args, **kwargs):
    try:
        return np.asarray(fn(*args, **kwargs)), None
    except (TypeError, ValueError, NotImplementedError) as e:
        return None, e


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_REDUCTIONS), st.lists(st.sampled_from(_KWARGS), min_size=1, max_size=2,
                                               unique=True))
def test_complex_reductions_treat_keywords_as_the_real_ones(name, keys):
    """40 cases per run: a reduction and one or two of its keywords.  A keyword
    the real function refuses is refused for complex input too (the complex
    var and prod used to drop where=, out=, initial= and mean= and return
    another number); a complex result that comes back is NumPy's."""
    z = np.array([[1 + 1j, 2 - 1j, 5 + 3j], [-1j, 0.5, 2 + 2j]])
    f = getattr(cnp, name)
    _, real_err = _call(f, z.real, **{k: _kw(k, False) for k in keys})
    got, _ = _call(f, z, **{k: _kw(k, True) for k in keys})
    if got is None:
        return                       # refused, or complex not supported: no number given
    assert real_err is None, f"{name}{keys}: the real function refuses ({real_err}), complex gave {got}"
    want, np_err = _call(getattr(np, name), z, **{k: _kw(k, True) for k in keys})
    if np_err is None:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_complex_reductions_refuse_what_the_real_ones_refuse():
    """Regression: the complex prod dropped where= and initial=, var and std
    dropped where=, out= and mean= (another number came back, silently), and
    count_nonzero, all, any and the part-wise functions recursed forever on a
    complex value for another parameter."""
    z = np.array([1 + 1j, 2 - 1j, 5 + 3j, -1j])
    m = np.array([True, True, False, True])
    for call, msg in [(lambda: cnp.prod(z, where=m), "prod: where="),
                      (lambda: cnp.prod(z, initial=2), "prod: initial="),
                      (lambda: cnp.var(z, where=m), "var: where="),
                      (lambda: cnp.std(z, where=m), "var: where="),
                      (lambda: cnp.var(z, mean=np.mean(z)), "var: mean="),
                      (lambda: cnp.var(z, out=np.empty(())), "var: out="),
                      (lambda: cnp.cumsum(z, where=1j), "cumsum: only the array may be complex"),
                      (lambda: cnp.count_nonzero(z, axis=0, keepdims=1j), "count_nonzero: only"),
                      (lambda: cnp.diff(z, prepend=1j), "diff: only the array may be complex")]:
        with pytest.raises(TypeError, match=msg):
            call()
    with pytest.raises(ValueError, match="ddof or correction"):
        cnp.var(z, ddof=1, correction=1)
    np.testing.assert_allclose(np.asarray(cnp.var(z, ddof=1)), np.var(z, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(cnp.prod(z)), np.prod(z), rtol=1e-6)
