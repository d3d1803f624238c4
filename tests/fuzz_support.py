"""Support for the fuzz tests in test_fuzz.py that draws nothing itself:
memory of every layout for closed-over arrays, memory that a caller does
not own for writing (for donation), ulp distances against a wider
reference, and exact sums.  The generators in test_fuzz.py decide what to
build (so that hypothesis can shrink it); these functions build it."""
import math

import numpy as np


def random_values(rng, shape, dtype):
    """Values of `shape`/`dtype` like test_fuzz.make_input's (floats in
    [-3, 3), small ints, fair bools)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(-9, 10, size=shape).astype(dt)
    return rng.uniform(-3.0, 3.0, size=shape).astype(dt)


# ---------------------------------------------------------------------------
# closed-over arrays of any layout

class LiveView:
    """A view of `shape`/`dtype` over memory of a chosen kind, reached
    through a chain of view transforms, and a way to write new values into
    that memory in place (through the root, never by rebinding).

    memory: "c", "fortran", "byteswapped", "unaligned", "unaligned_byteswapped"
            or "bytearray" (a writable buffer NumPy does not own).
    transforms, outermost first:
      ("transpose", perm)                 view = src.transpose(perm)
      ("slice", [(step, lo_pad, hi_pad), ...])  per axis; a negative step reverses
      ("broadcast", keep, drop_lead)      view = np.broadcast_to(src, shape); src has
                                          1 where keep[i] is False, and drop_lead
                                          fewer leading dimensions
    """

    def __init__(self, shape, dtype, memory, transforms):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.memory, self.transforms = memory, list(transforms)
        # the source shape each transform needs, outermost first
        shapes = [self.shape]
        for t in self.transforms:
            shapes.append(self._source_shape(t, shapes[-1]))
        self.root = self._allocate(shapes[-1])
        view = self.root
        for t, s in zip(reversed(self.transforms), reversed(shapes[:-1])):
            view = self._apply(t, view, s)
        assert view.shape == self.shape, (view.shape, self.shape)
        self.view = view

    @staticmethod
    def _source_shape(t, out):
        kind = t[0]
        if kind == "transpose":
            perm = t[1]
            src = [0] * len(out)
            for i, p in enumerate(perm):
                src[p] = out[i]
            return tuple(src)
        if kind == "slice":
            return tuple(lo + ((n - 1) * abs(step) + 1 if n else 0) + hi
                         for n, (step, lo, hi) in zip(out, t[1]))
        keep, drop = t[1], t[2]
        return tuple(d if k else 1 for d, k in zip(out, keep))[drop:]

    @staticmethod
    def _apply(t, src, out):
        kind = t[0]
        if kind == "transpose":
            return src.transpose(t[1])
        if kind == "slice":
            key, flip = [], []
            for n, (step, lo, hi) in zip(out, t[1]):
                k = abs(step)
                key.append(slice(lo, lo + (n - 1) * k + 1, k) if n else slice(lo, lo))
                flip.append(slice(None, None, -1) if step < 0 else slice(None))
            return src[tuple(key)][tuple(flip)]
        return np.broadcast_to(src, out)

    def _allocate(self, shape):
        dt = self.dtype
        n = math.prod(shape)
        if self.memory == "fortran":
            return np.zeros(shape, dt, order="F")
        if self.memory == "byteswapped":
            return np.zeros(shape, dt.newbyteorder())
        if self.memory in ("unaligned", "unaligned_byteswapped"):
            d = dt.newbyteorder() if self.memory == "unaligned_byteswapped" else dt
            raw = np.zeros(n * d.itemsize + 1, np.uint8)[1:]
            return raw.view(d).reshape(shape)
        if self.memory == "bytearray":
            return np.frombuffer(bytearray(n * dt.itemsize), dt).reshape(shape)
        return np.zeros(shape, dt)

    def refill(self, rng, part=False):
        """New values into the memory behind the view: all of it, or (part)
        a random slab along the root's first axis."""
        if part and self.root.ndim and self.root.shape[0] > 1:
            lo = int(rng.integers(0, self.root.shape[0]))
            hi = int(rng.integers(lo + 1, self.root.shape[0] + 1))
            sub = self.root[lo:hi]
        else:
            sub = self.root
        sub[...] = random_values(rng, sub.shape, self.dtype)

    def describe(self):
        v = self.view
        return (f"{self.memory} memory, transforms {self.transforms}: {v.dtype}{list(v.shape)} "
                f"strides {v.strides} c_contiguous={v.flags.c_contiguous} aligned={v.flags.aligned} "
                f"writeable={v.flags.writeable} = {v.tolist()!r}")


# ---------------------------------------------------------------------------
# donated arguments in memory of every owner

# kind -> (the plan may write into it: it is the caller's own, writable,
#          NumPy-allocated memory, or a view of such)
DONATION_KINDS = {
    "owned": True,             # a fresh array
    "owned_view": True,        # a contiguous view into a bigger owned array
    "owned_strided": True,     # a strided view (cjit copies it for the call)
    "cjit_output": True,       # an array cjit returned
    "readonly": False,         # setflags(write=False)
    "view_of_readonly": False,  # a writable view whose base was frozen later
    "frombuffer_bytes": False,  # np.frombuffer over an immutable bytes object
    "frombuffer_bytearray": False,  # over a bytearray (writable, not NumPy's)
    "memmap_r": False,         # np.memmap of a file, mode "r"
    "memmap_r+": False,        # mode "r+": writable, but the file is not cjit's to change
    "memmap_c": False,         # mode "c": copy-on-write pages of a file
    "npy_mmap_r+": False,      # np.load(..., mmap_mode="r+")
}


class DonatedArg:
    """An argument of kind `kind` holding `values`, with what is needed to
    check afterwards that nothing outside what the call may write changed:
    `root` is the array (or file) behind it, `mask` which of the root's
    elements the argument covers."""

    def __init__(self, kind, values, tmpdir, serial, rng):
        self.kind = kind
        self.file = None
        values = np.ascontiguousarray(values)
        shape, dt = values.shape, values.dtype
        n = values.size
        if kind in ("owned", "readonly", "view_of_readonly", "cjit_output"):
            root = values.copy()
            arg = root
            if kind == "readonly":
                root.setflags(write=False)
            elif kind == "view_of_readonly":
                arg = root[...]
                root.setflags(write=False)     # the view stays writeable
            elif kind == "cjit_output":
                import cjit                    # a block cjit allocated
                root = arg = cjit.jit(lambda v: v)(values)
            mask_of = lambda r: r
        elif kind == "owned_view":
            pad = int(rng.integers(0, 5))
            root = random_values(rng, (n + pad + int(rng.integers(0, 5)),), dt)
            root[pad:pad + n] = values.reshape(-1)
            mask_of = lambda r, pad=pad: r[pad:pad + n].reshape(shape)
            arg = mask_of(root)
        elif kind == "owned_strided":
            step = int(rng.integers(2, 4))
            root = random_values(rng, (n * step,), dt)
            mask_of = lambda r, step=step: r[step - 1::step].reshape(shape)
            arg = mask_of(root)
            arg[...] = values
        elif kind.startswith("frombuffer"):
            data = values.tobytes()
            self.buffer = bytearray(data) if kind.endswith("bytearray") else data
            root = np.frombuffer(self.buffer, dt)
            arg = root.reshape(shape)
            mask_of = lambda r: r.reshape(shape)
        else:
            self.file = tmpdir / f"donated{serial}.{'npy' if kind.startswith('npy') else 'bin'}"
            if kind.startswith("npy"):
                np.save(self.file, values)
                arg = np.load(self.file, mmap_mode="r+")
            else:
                values.tofile(self.file)
                mode = kind.split("_", 1)[1]
                arg = np.memmap(self.file, dtype=dt, mode=mode, shape=shape)   # n > 0: mmap needs bytes
            root = arg
            mask_of = lambda r: r
        self.arg = arg
        self.root = root
        self.mask = np.zeros(root.shape, bool)
        mask_of(self.mask)[...] = True
        self.before = np.array(root, copy=True)
        self.file_bytes = self.file.read_bytes() if self.file is not None else None

    @property
    def writable_by_plan(self):
        """Whether cjit may use the argument's own bytes: the caller's
        writable NumPy memory, and passed as is (contiguous, aligned,
        native), since any other layout is copied before the call."""
        a = self.arg
        return DONATION_KINDS[self.kind] and a.flags.c_contiguous and a.flags.aligned

    @property
    def refused(self):
        """Whether cjit must copy it because its memory is not the caller's
        to hand over (and so warn): the arg reaches the plan as is, but its
        memory may not be written."""
        a = self.arg
        return not DONATION_KINDS[self.kind] and a.flags.c_contiguous and a.flags.aligned

    def changed(self, may_write):
        """Elements of the root that changed where they must not have: all
        of them, or (may_write) those outside the argument."""
        now = np.asarray(self.root)
        same = (now == self.before) | ((now != now) & (self.before != self.before))
        if now.dtype.kind == "f":
            same &= np.signbit(now) == np.signbit(self.before)
        guarded = ~self.mask if may_write else np.ones(now.shape, bool)
        return int(np.sum(guarded & ~same))

    def file_changed(self):
        if self.file is None:
            return False
        if isinstance(self.arg, np.memmap):
            self.arg.flush()
        return self.file.read_bytes() != self.file_bytes

    def close(self):
        if isinstance(self.arg, np.memmap) and self.arg._mmap is not None:
            self.arg._mmap.close()


# ---------------------------------------------------------------------------
# ulps against a wider reference

def wide_dtype(dtype):
    """The precision a reference for `dtype` is computed in: float64 for
    float32; x87 extended (64-bit mantissa) for float64 where NumPy has it,
    else float64 itself."""
    if np.dtype(dtype) == np.float32:
        return np.dtype(np.float64)
    if np.finfo(np.longdouble).nmant >= 63:
        return np.dtype(np.longdouble)
    return np.dtype(np.float64)


def ulp_errors(got, ref, dtype):
    """|got - ref| in ulps of `dtype` at ref, for finite ref (computed in a
    wider type; it may lie beyond dtype's range).  An infinite `got` counts
    as 2**(emax+1), the first value past the largest finite one, so that a
    result that overflows one rounding early is 1 ulp off, not infinitely;
    a reference beyond that counts as that value too (its correct rounding
    is infinite)."""
    fi = np.finfo(dtype)
    wd = ref.dtype
    emax = fi.maxexp - 1
    g = np.asarray(got).astype(wd)
    big = wd.type(2.0) ** (emax + 1)
    g = np.where(np.isinf(g), np.copysign(big, g), g)
    ref = np.clip(ref, -big, big)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.maximum(np.abs(ref), wd.type(fi.tiny))))
        e = np.clip(e, fi.minexp, emax)
        return (np.abs(g - ref) / np.exp2(e - fi.nmant)).astype(np.float64)


# ---------------------------------------------------------------------------
# sums

def exact_sum(values):
    """The exact sum of float values, rounded once to float64."""
    return math.fsum(np.asarray(values, np.float64).ravel().tolist())
