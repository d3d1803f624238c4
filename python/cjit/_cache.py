"""Process-wide bookkeeping: every Jitted, the hit/miss/compile counters,
the LRU bound over all compile caches (set_cache_limits), and the
process-wide cache and memory functions."""
from __future__ import annotations

import threading
import weakref

from . import _cjit


_all_jitted = weakref.WeakSet()
_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "compiles": 0}


def _count(name, n=1):
    with _stats_lock:
        _stats[name] += n


class _Entry:
    __slots__ = ("exe", "out_treedef")

    def __init__(self, exe, out_treedef):
        self.exe = exe
        self.out_treedef = out_treedef


_cache_limits = {"max_entries": 4096, "max_code_bytes": 512 << 20}
_lru_lock = threading.Lock()
_lru = {}              # (id(jitted), key) -> [weakref(jitted), key, code_bytes, hits seen]
_lru_bytes = [0]


def set_cache_limits(max_entries=None, max_code_bytes=None):
    """Bounds the process-wide compile cache; returns the previous limits.

    `max_entries` (default 4096) caps the executables kept over every
    jitted function and eager op together, `max_code_bytes` (default
    512 MiB) the memory they hold (`cache_info()["code_bytes"]`).  When a new
    executable would pass either bound, the least recently used ones are
    evicted: dropped from their function's cache, and their machine code is
    freed as soon as no call is running them.  A later call with an evicted
    signature compiles again.  Arguments left as None keep their value;
    0 means no cached executable survives its next neighbour's compile."""
    with _lru_lock:
        old = dict(_cache_limits)
        for name, v in (("max_entries", max_entries), ("max_code_bytes", max_code_bytes)):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"cjit.set_cache_limits: {name} must be an int >= 0, got {v!r}")
            _cache_limits[name] = v
        _lru_evict(None)
    return old


def _jit_hits(j):
    return j._hits + getattr(j, "_fast_hits", 0)


def _lru_evict(keep):
    """Evicts least recently used entries (never `keep`) until the limits
    hold.  Called with _lru_lock held; touches no Jitted lock.  A Jitted
    whose C fast path served hits since its entries were last looked at
    gets a second chance (those hits never reach Python)."""
    max_n, max_b = _cache_limits["max_entries"], _cache_limits["max_code_bytes"]
    second_chance = len(_lru)
    while _lru and (len(_lru) > max_n or _lru_bytes[0] > max_b):
        rk = next(iter(_lru))
        if rk == keep:
            if len(_lru) == 1:
                break
            _lru[rk] = _lru.pop(rk)
            continue
        rec = _lru.pop(rk)
        j = rec[0]()
        if j is not None and second_chance > 0 and _jit_hits(j) != rec[3]:
            second_chance -= 1
            rec[3] = _jit_hits(j)
            _lru[rk] = rec
            continue
        _lru_bytes[0] -= rec[2]
        if j is not None and dict.pop(j._cache, rec[1], None) is not None:
            fast_clear = getattr(j, "_fast_clear", None)
            if fast_clear is not None:
                fast_clear()      # the C table must not keep the evicted code


class _CacheDict(dict):
    """One Jitted's cache: a dict whose insertions, lookups and clear()
    keep the process-wide LRU (set_cache_limits) up to date."""

    __slots__ = ("_owner",)

    def __init__(self, owner):
        super().__init__()
        self._owner = weakref.ref(owner)

    def __setitem__(self, key, entry):
        dict.__setitem__(self, key, entry)
        owner = self._owner()
        try:
            nbytes = int(entry.exe.code_bytes)
        except Exception:
            nbytes = 0
        rk = (id(owner), key)
        with _lru_lock:
            old = _lru.pop(rk, None)
            if old is not None:
                _lru_bytes[0] -= old[2]
            _lru[rk] = [self._owner, key, nbytes, _jit_hits(owner) if owner else 0]
            _lru_bytes[0] += nbytes
            _lru_evict(rk)

    def get(self, key, default=None):
        entry = dict.get(self, key, default)
        if entry is not default:
            rk = (id(self._owner()), key)
            with _lru_lock:
                rec = _lru.pop(rk, None)
                if rec is not None:
                    _lru[rk] = rec
        return entry

    def clear(self):
        owner_id = id(self._owner())
        with _lru_lock:
            for k in list(self.keys()):
                rec = _lru.pop((owner_id, k), None)
                if rec is not None:
                    _lru_bytes[0] -= rec[2]
        dict.clear(self)


def clear_caches(disk=False):
    """Drops every cached executable (every Jitted, the eager-op kernels);
    their machine code is freed as soon as no running call holds it.
    With disk=True the persistent cache is emptied too (every process's
    entries in the directory CJIT_CACHE_DIR names)."""
    for j in list(_all_jitted):
        j.clear_cache()
    if disk:
        from . import _disk_cache
        _disk_cache.clear()


def cache_info():
    """Process-wide: entries, hits, misses, compiles, code_bytes; and the
    persistent cache: disk_entries and disk_bytes (of every process's
    entries), disk_hits and disk_misses (this process's lookups, made on
    in-process misses only), disk_deleted (unusable entries it deleted)."""
    entries = 0
    code = 0
    for j in list(_all_jitted):
        cache = list(j._cache.values())
        entries += len(cache)
        for e in cache:
            try:
                code += e.exe.code_bytes
            except Exception:
                pass
    with _stats_lock:
        out = {"entries": entries, "hits": _stats["hits"] + _cjit.fast_hits(),
               "misses": _stats["misses"],
               "compiles": _stats["compiles"], "code_bytes": code}
    from . import _disk_cache
    out.update(_disk_cache.info())
    return out


def memory_stats():
    """bytes_in_use and peak_bytes_in_use: the bytes of outputs and arenas
    the runtime holds (and the most it held since reset_peak_memory_stats);
    code_bytes: the memory compiled executables hold (machine code, plans,
    graphs), over every one still alive, cached or not; live_executables:
    how many those are.  Executables dropped from the caches
    (clear_caches, Jitted.clear_cache, the LRU limits) leave both counts
    once nothing holds them (a running call, a Compiled)."""
    s = _cjit.runtime_stats()
    return {"bytes_in_use": int(s["bytes_in_use"]),
            "peak_bytes_in_use": int(s["peak_bytes_in_use"]),
            "code_bytes": int(s["code_bytes"]),
            "live_executables": int(_cjit.Executable.live_count())}


def reset_peak_memory_stats():
    _cjit.reset_peak_memory_stats()
