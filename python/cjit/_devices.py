"""Devices: the CPU and CUDA GPUs, device_put, and cjit.Array (an array
in GPU memory)."""
from __future__ import annotations

import numpy as np

from . import _cjit
from . import _tree
from . import _array
from ._dtypes import _SUPPORTED, canonical_dtype, canonicalize_dtype


def _check_device(device, who):
    """The Device that `device` names (None: the CPU).  ValueError for a
    name cjit does not know; RuntimeError, saying why, for a GPU that this
    machine lacks."""
    if device is None:
        return _CPU
    if isinstance(device, Device):
        if device.platform == "cpu":
            return device
        d = f"cuda:{device.id}"
    elif isinstance(device, str):
        d = device.lower()
    else:
        d = None
    if d in ("cpu", "cpu:0"):
        return _CPU
    if d is not None and (d in ("cuda", "gpu") or d.startswith(("cuda:", "gpu:"))):
        ordinal = d.partition(":")[2] or "0"
        if ordinal.isdigit():
            n, why = _cjit.cuda_status()
            if n == 0:
                raise RuntimeError(f"cjit: no CUDA device: {why} ({who}(device={device!r}))")
            if int(ordinal) >= n:
                raise RuntimeError(f"cjit: no CUDA device {d}: this machine has {n} "
                                   f"({who}(device={device!r}))")
            return Device("cuda", int(ordinal))
    raise ValueError(f"cjit: unknown device {device!r}; known devices: 'cpu', 'cuda', 'cuda:N'")


class Device:
    """A device cjit can run on: the CPU, or a CUDA GPU (by ordinal)."""

    __slots__ = ("platform", "id")

    def __init__(self, platform="cpu", id=0):
        self.platform = platform
        self.id = id

    def __repr__(self):
        return f"CpuDevice(id={self.id})" if self.platform == "cpu" else \
            f"CudaDevice(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


_CPU = Device("cpu", 0)
_array.register({"_cpu_device": _CPU})


def devices(backend=None):
    """The devices of `backend` ("cpu" or "cuda"; default: all there are).
    The CPU is always there; CUDA devices when the driver (libcuda.so.1)
    and a GPU are.  devices("cuda") without one is a RuntimeError."""
    n, _ = _cjit.cuda_status()
    gpus = [Device("cuda", i) for i in range(n)]
    if backend is None:
        return [_CPU] + gpus
    dev = _check_device(backend, "devices")
    return [_CPU] if dev.platform == "cpu" else gpus


def device_put(x, device=None):
    """Places x (a pytree) on `device`: its array leaves become cjit.Arrays
    (on the CPU fresh copies; cjit.Arrays already there are kept)."""
    dev = _check_device(device, "device_put")
    if dev.platform == "cpu":
        def put_cpu(a):
            if isinstance(a, _array.Array) and isinstance(a, np.ndarray):
                return a
            h = np.array(a, copy=True, order="C")
            if h.dtype.kind != "c":
                canonical_dtype(h.dtype, "cjit.device_put: dtype")
            if canonicalize_dtype(h.dtype) != h.dtype:       # x64 off: 32 bits, as JAX's
                h = h.astype(canonicalize_dtype(h.dtype))
            return _array.wrap(h)
        return _tree.tree_map(put_cpu, x)

    def put(a):
        if isinstance(a, DeviceArray) and a.device == dev:
            return a
        h = np.asarray(a)
        if h.dtype not in _SUPPORTED:
            h = h.astype(canonical_dtype(h.dtype, "cjit.device_put: dtype"))
        return DeviceArray._wrap(_cjit.cuda_put(h, dev.id), dev)
    return _tree.tree_map(put, x)


class DeviceArray:
    """An array in GPU memory: shape, dtype, device, block_until_ready(),
    and np.asarray(a), which copies it to the host.  Made by
    cjit.device_put(x, "cuda") and returned by functions jitted with
    device="cuda"; not constructed directly.

    Donated to a CPU function (donate_argnums), it is deleted after the
    call, as JAX deletes donated arrays: its device memory is freed, and
    any later use but shape, dtype, device and is_deleted() raises
    RuntimeError."""

    __slots__ = ("_buf", "shape", "dtype", "device", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("cjit.Array is not constructed directly; use "
                        "cjit.device_put(x, 'cuda')")

    @classmethod
    def _wrap(cls, buf, device):
        a = object.__new__(cls)
        a._buf = buf
        a.shape = tuple(buf.shape)
        a.dtype = buf.dtype
        a.device = device
        return a

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self):
        return self.size * np.dtype(self.dtype).itemsize

    def _live_buf(self):
        """The DeviceBuffer; RuntimeError once the array was deleted."""
        if self._buf is None:
            raise RuntimeError(f"cjit.Array has been deleted (shape {self.shape}, dtype "
                               f"{np.dtype(self.dtype).name}): it was donated to a jitted call "
                               f"(donate_argnums) or delete() was called. Use the arrays that "
                               f"call returned")
        return self._buf

    def delete(self):
        """Frees the device memory now; later uses raise RuntimeError."""
        self._buf = None

    def is_deleted(self):
        return self._buf is None

    def block_until_ready(self):
        """Waits until the device has computed this array; returns it."""
        self._live_buf().synchronize()
        return self

    def __array__(self, dtype=None, copy=None):
        h = self._live_buf().to_host()
        return h if dtype is None else h.astype(dtype, copy=False)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d cjit.Array")
        return self.shape[0]

    def __repr__(self):
        if self._buf is None:
            return (f"cjit.Array(<deleted>, shape={self.shape}, dtype={np.dtype(self.dtype).name}, "
                    f"device={self.device})")
        return f"cjit.Array({np.asarray(self)!r}, device={self.device})"


_array.register_virtual(DeviceArray)
