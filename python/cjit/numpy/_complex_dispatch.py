"""Complex arguments of cjit.numpy's functions: the registry and the wrapper.

Every public function of cjit.numpy (and of cjit.numpy.linalg) is wrapped
where it is defined (`complex_aware`, at the end of its module), so the
function other modules import is the one users call.  A call with no
complex argument (and no complex `dtype=`) goes straight to the real
function; a call with one looks the function's name up in the registry:

- a complex implementation (`impl`): the call goes to it.  Outside a trace
  it runs under an internal jit, as the real functions' eager calls do,
  unless the implementation handles eager calls itself (eager_jit=False);
- `as_is`: the real function takes complex arguments itself (it asks for a
  dtype, or answers outside jit with NumPy's own result);
- nothing: NotImplementedError naming the function.

The registrations are all in _complex_api.py (and _complex_linalg.py for
cjit.numpy.linalg): one entry per function, with every fact about its
complex support.  This module imports no cjit.numpy function, so every
module of cjit.numpy can stand on it.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import _tree
from .._array import Array, as_result
from .._cjit import Tracer
from .._jitted import Jitted
from .._trace_state import current_trace


def is_complex_dtype(dt):
    """Is dt (anything np.dtype takes) a complex dtype?"""
    try:
        return np.dtype(dt).kind == "c"
    except TypeError:
        return False


class _Entry:
    """What the registry knows about one function's complex arguments."""
    __slots__ = ("fn", "eager_jit", "dtype_pos", "dtype_args", "static_array")

    def __init__(self, fn, eager_jit=True, dtype_pos=None, dtype_args=False, static_array=None):
        self.fn = fn                      # the implementation; None: the real function as it is
        self.eager_jit = eager_jit        # outside a trace, run fn under an internal jit
        self.dtype_pos = dtype_pos        # positional index of a dtype parameter (creation)
        self.dtype_args = dtype_args      # its arguments may be dtypes (result_type)
        self.static_array = static_array  # (index, name) of an array parameter made static


_REGISTRY = {}   # public name ('linalg.<name>' in cjit.numpy.linalg) -> _Entry


def impl(*names, eager_jit=True, dtype_pos=None, dtype_args=False, static_array=None):
    """Registers the decorated function as the complex implementation of
    `names`.  eager_jit=False: it handles calls outside a trace itself.
    dtype_pos: the position of the function's dtype parameter (a complex
    dtype passed there makes the call complex).  dtype_args: the function
    takes dtypes as arguments (a complex one makes the call complex).
    static_array: (index, keyword) of a parameter whose concrete array
    value fixes the shape (turned into a list, a static argument)."""
    def deco(f):
        for n in names:
            _REGISTRY[n] = _Entry(f, eager_jit, dtype_pos, dtype_args, static_array)
        return f
    return deco


def as_is(*names):
    """Registers `names` as taking complex arguments as they are."""
    for n in names:
        _REGISTRY[n] = _Entry(None)


def _seq_has_complex(seq, is_c):
    """Whether a (nested) list or tuple holds a complex value."""
    for b in seq:
        if is_c(b):
            return True
        t = type(b)
        if (t is list or t is tuple) and _seq_has_complex(b, is_c):
            return True
    return False


def _any_complex(entry, args, kwargs):
    is_c = _tree.is_complex
    for a in args:
        if is_c(a):
            return True
        t = type(a)
        if (t is list or t is tuple) and _seq_has_complex(a, is_c):
            return True
    for v in kwargs.values():
        if is_c(v):
            return True
    if entry is None:
        dt = kwargs.get("dtype")
    elif entry.dtype_args:
        return any(is_c(a) or (isinstance(a, (type, np.dtype, str)) and is_complex_dtype(a))
                   for a in args)
    else:
        dt = kwargs.get("dtype")
        if dt is None and entry.dtype_pos is not None and len(args) > entry.dtype_pos:
            dt = args[entry.dtype_pos]
    if dt is None:
        return False
    if isinstance(dt, str):
        return dt.startswith("complex")
    return is_complex_dtype(dt)


def has_traced(args, kwargs):
    """Is any argument (or an element of a list or tuple argument) traced?"""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tracer) or _tree.is_complex_tracer(a):
            return True
        if type(a) in (list, tuple) and any(isinstance(b, Tracer) or _tree.is_complex_tracer(b)
                                            for b in a):
            return True
    return False


def _wrap(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        entry = _REGISTRY.get(name)
        if not _any_complex(entry, args, kwargs):
            return as_result(fn(*args, **kwargs), args)
        if entry is None:
            raise NotImplementedError(
                f"cjit.numpy.{name}: complex arguments are not supported yet (complex numbers "
                f"work with arithmetic, the elementwise functions of complex analysis, sums, "
                f"products of matrices, the FFTs, part of linalg and the shape functions; "
                f"docs/API.md lists them)")
        if entry.fn is None:
            return as_result(fn(*args, **kwargs), args)
        if not entry.eager_jit or current_trace() is not None or has_traced(args, kwargs):
            return as_result(entry.fn(*args, **kwargs), args)
        return as_result(eager(name, entry.fn, args, kwargs, entry.static_array), args)
    wrapper._cjit_complex_wrapped = True
    return wrapper


def complex_aware(namespace, names, prefix=""):
    """Wraps the functions `names` of a module's namespace in place (classes
    and other objects are left alone); prefix: 'linalg.' for
    cjit.numpy.linalg, whose registry names carry it."""
    for n in names:
        fn = namespace.get(n)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "_cjit_complex_wrapped",
                                                                      False):
            namespace[n] = _wrap(prefix + n, fn)


# ---------------------------------------------------------------------------
# eager calls: the implementation under an internal jit per static signature

_eager_jits = {}


def _dynamic(v):
    t = type(v)
    if t is np.ndarray or t is Array or isinstance(v, np.generic) or t is complex:
        return True
    return (t is list or t is tuple) and len(v) > 0 and all(
        type(b) is np.ndarray or type(b) is Array or isinstance(b, (np.generic, complex))
        for b in v)


def eager(name, f, args, kwargs, static_array=None):
    """f(*args, **kwargs) on concrete values, compiled: array arguments
    (and lists of them) are the jit's arguments, everything else is static
    and part of the cache key."""
    if static_array is not None:
        pos, kw = static_array
        if len(args) > pos and isinstance(args[pos], np.ndarray):
            args = args[:pos] + (args[pos].tolist(),) + args[pos + 1:]
        if isinstance(kwargs.get(kw), np.ndarray):
            kwargs = dict(kwargs, **{kw: kwargs[kw].tolist()})
    dyn, skel = [], []
    for a in args:
        if _dynamic(a):
            skel.append(("dyn", len(dyn), type(a) is list))
            dyn.append(list(a) if type(a) in (list, tuple) else a)
        else:
            skel.append(("static", a))
    kw = []
    for k in sorted(kwargs):
        v = kwargs[k]
        if _dynamic(v):
            kw.append((k, ("dyn", len(dyn), type(v) is list)))
            dyn.append(list(v) if type(v) in (list, tuple) else v)
        else:
            kw.append((k, ("static", v)))
    key = (name, tuple(skel), tuple(kw))

    def fetch(slot, values):
        return values[slot[1]] if slot[0] == "dyn" else slot[1]

    def run(*values):
        a = [fetch(s, values) for s in skel]
        k = {n: fetch(s, values) for n, s in kw}
        return f(*a, **k)

    try:
        j = _eager_jits.get(key)
    except TypeError:            # an unhashable static argument: no caching
        j, key = None, None
    if j is None:
        j = Jitted(run, _internal=True)
        j._name = f"cjit.numpy.{name}"
        if key is not None:
            if len(_eager_jits) > 512:
                _eager_jits.clear()
            _eager_jits[key] = j
    return j(*dyn)
