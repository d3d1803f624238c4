"""What a compiled function's memory plan says: MemoryAnalysis (the sizes
and the buffers live at the peak) and MemoryTimeline (the bytes live at
each kernel in run order, and what each allocates and frees).  Both read
the plan that runs, so their figures are exact, not estimates."""
from __future__ import annotations

from collections import namedtuple


# One buffer of a plan.  id: its index in the plan; alias_of: the id of the
# buffer whose bytes it lives in (an in-place update, a value computed
# straight into an output, a temporary in a donated argument), else None.
_BufferInfo = namedtuple("BufferInfo", "size op source shape dtype kind id alias_of")
_BufferInfo.__new__.__defaults__ = (None,) * len(_BufferInfo._fields)


class MemoryAnalysis:
    """The memory plan of a compiled function, in bytes (exact, not an
    estimate).  `peak_live` lists the buffers live at the peak."""

    _FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "peak_memory_in_bytes", "num_kernels")

    def __init__(self, d):
        for f in self._FIELDS:
            setattr(self, f, int(d.get(f, 0)))
        live = []
        for b in d.get("peak_live", ()) or ():
            if isinstance(b, dict):
                live.append(_BufferInfo(**{k: b.get(k) for k in _BufferInfo._fields}))
            else:
                live.append(b)
        self.peak_live = live
        self._raw = d

    def __getitem__(self, name):
        return getattr(self, name)

    def __repr__(self):
        lines = ["MemoryAnalysis("]
        for f in self._FIELDS:
            lines.append(f"  {f}={getattr(self, f)},")
        if self.peak_live:
            lines.append("  peak_live=[")
            for b in self.peak_live:
                desc = f"{b.size} bytes"
                if b.dtype is not None and b.shape is not None:
                    dt = getattr(b.dtype, "name", b.dtype)
                    desc += f" {dt}{list(b.shape)}"
                if b.kind:
                    desc += f" {b.kind}"
                if b.op:
                    desc += f" from {b.op}"
                if b.source:
                    desc += f" at {b.source}"
                lines.append(f"    {desc},")
            lines.append("  ],")
        else:
            lines.append("  peak_live=[],")
        lines.append(")")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# the timeline

# memplan.c places temporaries in the arena at multiples of CJ_ARENA_ALIGN,
# each taking its size rounded up to it.
_ARENA_ALIGN = 64


def _aligned(n):
    return (n + _ARENA_ALIGN - 1) // _ARENA_ALIGN * _ARENA_ALIGN


KernelMemory = namedtuple("KernelMemory", "index label source stages argument_bytes output_bytes "
                          "temp_bytes gap_bytes live_bytes allocates frees")
KernelMemory.__doc__ = """The memory of one kernel (one group of fused stages) of a plan.

index         its place in run order
label         the ops it runs ("tanh+mul", stages joined by " | ")
source        the user's source lines of the values it computes
stages        [(label, source)] per stage
argument_bytes, output_bytes, temp_bytes
              bytes live while it runs: arguments and closed-over arrays,
              outputs (both held for the whole call), temporaries live now
gap_bytes     arena bytes below the highest live temporary that hold no live
              value (alignment, holes the placement left)
live_bytes    the sum of the four
allocates     temporaries it writes first (BufferInfo), largest first
frees         temporaries it reads last, largest first
A temporary whose alias_of is set lives in another buffer's bytes and adds
nothing to the sums."""


class MemoryTimeline:
    """Bytes live at each kernel of a compiled function, in run order
    (Compiled.memory_timeline()).  A sequence of KernelMemory; `peak_bytes`
    is its largest live_bytes and equals memory_analysis()'s
    peak_memory_in_bytes; `peak_index` is the kernel where it is reached
    (the one with the most temp_bytes if several are, then the first) and
    `peak_live` the buffers live there, largest first."""

    def __init__(self, steps, peak_bytes, peak_index, peak_live):
        self.steps = steps
        self.peak_bytes = peak_bytes
        self.peak_index = peak_index
        self.peak_live = peak_live

    def __len__(self):
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __getitem__(self, i):
        return self.steps[i]

    def as_text(self):
        """One line per kernel: live bytes by kind, the kernel, what it
        allocates and frees."""
        lines = [f"{'kernel':>6} {'live':>12} {'arguments':>12} {'outputs':>12} {'temps':>12} "
                 f"{'gaps':>8}  ops at source; +allocated -freed"]
        for s in self.steps:
            mark = "*" if s.index == self.peak_index else " "
            lines.append(f"{s.index:>5}{mark} {s.live_bytes:>12,} {s.argument_bytes:>12,} "
                         f"{s.output_bytes:>12,} {s.temp_bytes:>12,} {s.gap_bytes:>8,}  "
                         f"{s.label} at {s.source}")
            for sign, bufs in (("+", s.allocates), ("-", s.frees)):
                for b in bufs:
                    lines.append(f"{'':>27}{sign}{_describe(b)}")
        lines.append(f"peak {self.peak_bytes:,} bytes at kernel {self.peak_index} (*)")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<cjit.MemoryTimeline {len(self.steps)} kernels, peak {self.peak_bytes:,} bytes "
                f"at kernel {self.peak_index}>")


def _describe(b):
    desc = f"{b.size:,} bytes"
    if b.dtype is not None and b.shape is not None:
        desc += f" {getattr(b.dtype, 'name', b.dtype)}{list(b.shape)}"
    if b.kind:
        desc += f" {b.kind}"
    if b.op:
        desc += f" from {b.op}"
    if b.source:
        desc += f" at {b.source}"
    if b.alias_of is not None:
        desc += f" (in buffer {b.alias_of}'s bytes)"
    return desc


def _largest_first(bufs):
    return sorted(bufs, key=lambda b: (-b.size, b.id))


def memory_timeline(exe):
    """The MemoryTimeline of an executable (cjit._cjit.Executable, or one
    with its memory_plan() and memory_analysis())."""
    plan = exe.memory_plan()
    fields = _BufferInfo._fields
    bufs = [_BufferInfo(**{k: b.get(k) for k in fields}) for b in plan["buffers"]]
    raw = plan["buffers"]
    # Arguments and outputs are held for the whole call; a buffer living in
    # another's bytes adds nothing (an output written into a donated
    # argument, a value computed straight into an output).
    held = [b for b in bufs if b.kind != "temp" and b.alias_of is None]
    argument_bytes = sum(b.size for b in held if b.kind in ("param", "array"))
    output_bytes = sum(b.size for b in held if b.kind == "output")
    temps = [(b, raw[b.id]) for b in bufs if b.kind == "temp"]
    owners = [(b, r) for b, r in temps if b.alias_of is None and r["first_use"] >= 0]
    steps = []
    for g, stages in enumerate(plan["groups"]):
        live = [(b, r) for b, r in owners if r["first_use"] <= g <= r["last_use"]]
        temp_bytes = sum(b.size for b, _ in live)
        top = max((r["offset"] + _aligned(b.size) for b, r in live), default=0)
        gap_bytes = top - temp_bytes
        sources = []
        for _, src in stages:
            if src not in sources:
                sources.append(src)
        steps.append(KernelMemory(
            index=g, label=" | ".join(lab for lab, _ in stages), source=", ".join(sources),
            stages=[tuple(s) for s in stages], argument_bytes=argument_bytes,
            output_bytes=output_bytes, temp_bytes=temp_bytes, gap_bytes=gap_bytes,
            live_bytes=argument_bytes + output_bytes + top,
            allocates=_largest_first(b for b, r in temps if r["first_use"] == g),
            frees=_largest_first(b for b, r in temps if r["last_use"] == g)))
    if steps:
        # where the most bytes are live; among such kernels, where most of
        # them hold values (a small temporary placed high in the arena can
        # make a quiet kernel reach the same height), then the first
        top = max(steps, key=lambda s: (s.live_bytes, s.temp_bytes, -s.index))
        peak, peak_index = top.live_bytes, top.index
        live = held + [b for b, r in owners if r["first_use"] <= peak_index <= r["last_use"]]
    else:   # nothing runs: the arguments and outputs are all there is
        peak, peak_index, live = argument_bytes + output_bytes, None, held
    return MemoryTimeline(steps, peak, peak_index, _largest_first(live))
