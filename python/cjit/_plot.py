"""plot_memory: a compiled function's memory timeline as a picture
(matplotlib, imported only when called)."""
from __future__ import annotations

import os

from ._memory import MemoryTimeline

_LAYERS = (("argument_bytes", "arguments", "#4c72b0"), ("output_bytes", "outputs", "#55a868"),
           ("temp_bytes", "temporaries", "#dd8452"), ("gap_bytes", "arena gaps", "#cccccc"))
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def _timeline_of(x, who):
    if isinstance(x, MemoryTimeline):
        return x
    get = getattr(x, "memory_timeline", None)
    if get is None or not callable(get):
        raise TypeError(f"cjit.plot_memory: {who} must be a Compiled (jitted.lower(...).compile()) "
                        f"or a MemoryTimeline, got {type(x).__name__}")
    return get()


def _panels(compiled):
    """[(title, MemoryTimeline)] from a Compiled, a MemoryTimeline, a mapping
    of names to those, or a sequence of (name, that) pairs."""
    if isinstance(compiled, dict):
        items = list(compiled.items())
    elif isinstance(compiled, (list, tuple)):
        items = list(compiled)
        for it in items:
            if not (isinstance(it, tuple) and len(it) == 2):
                raise TypeError("cjit.plot_memory: a sequence must hold (name, Compiled) pairs, "
                                f"got an item of type {type(it).__name__}")
    else:
        return [(None, _timeline_of(compiled, "compiled"))]
    if not items:
        raise ValueError("cjit.plot_memory: nothing to plot (an empty collection)")
    return [(str(name), _timeline_of(c, f"the entry {name!r}")) for name, c in items]


def _buffer_line(b, scale, unit):
    what = f"{b.size / scale:.3g} {unit} {b.kind}"
    if b.dtype is not None and b.shape is not None:
        what += f" {b.dtype}{list(b.shape)}"
    if b.op and b.op not in ("param", "array"):
        what += f" from {b.op}"
    if b.source and b.source != "?":
        what += f" at {_short_source(b.source)}"
    return what


def _short_source(source):
    """'dir/file.py:12' shortened to 'file.py:12' (each of a comma list)."""
    return ", ".join(os.path.basename(s.strip()) for s in source.split(","))


def plot_memory(compiled, path, *, title=None, top=4):
    """Draws the memory timeline of `compiled` into the image file `path`
    (PNG unless the path's suffix names another format matplotlib writes).

    Per kernel in run order, the bytes live while it runs, stacked:
    arguments, outputs, temporaries and arena gaps (arena bytes below the
    highest live temporary that hold no value).  The peak, which equals
    memory_analysis().peak_memory_in_bytes, is marked, with the kernel
    there and the `top` largest buffers live at it.

    `compiled` is a Compiled or a MemoryTimeline, or, to compare schedules,
    a dict of names to those (or a sequence of (name, Compiled) pairs): one
    panel each, stacked, on one scale.  Needs matplotlib; without it, an
    ImportError says how to install it."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as e:
        raise ImportError("cjit.plot_memory needs matplotlib, which is not installed: "
                          "`python -m pip install matplotlib` (Compiled.memory_timeline() gives "
                          "the same figures without it)") from e
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"cjit.plot_memory: top must be an int >= 0, got {top!r}")
    panels = _panels(compiled)
    highest = max(t.peak_bytes for _, t in panels)
    scale, unit = next((s, u) for s, u in _UNITS if highest >= s or s == 1)

    fig = Figure(figsize=(10, 1.2 + 2.8 * len(panels)), constrained_layout=True)
    axes = fig.subplots(len(panels), 1, squeeze=False, sharey=True)[:, 0]
    for ax, (name, tl) in zip(axes, panels):
        # each kernel a step of width 1 centred on its index
        xs = [i + d for i in range(len(tl)) for d in (-0.5, 0.5)]
        base = [0.0] * len(xs)
        for field, label, color in _LAYERS:
            upper = [lo + getattr(tl[i // 2], field) / scale for i, lo in enumerate(base)]
            ax.fill_between(xs, base, upper, color=color, label=label, linewidth=0)
            base = upper
        head = f"{name}: " if name is not None else ""
        ax.set_title(f"{head}peak {tl.peak_bytes / scale:.4g} {unit}, {len(tl)} kernels",
                     fontsize=10, loc="left")
        ax.set_ylabel(unit)
        ax.set_xlim(-0.5, max(len(tl), 1) - 0.5)
        if len(tl) <= 12:
            ax.set_xticks(range(len(tl)))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", alpha=0.3)
        if tl.peak_index is not None:
            k = tl[tl.peak_index]
            y = tl.peak_bytes / scale
            ax.axvline(k.index, color="#c44e52", linewidth=1, linestyle="--")
            ax.plot([k.index], [y], "v", color="#c44e52", markersize=7)
            note = [f"peak at kernel {k.index}: {k.label}"[:90],
                    f"  at {_short_source(k.source)}"[:90]]
            note += ["  " + _buffer_line(b, scale, unit)[:88] for b in tl.peak_live[:top]]
            right = k.index > len(tl) / 2     # the note goes on the other side
            ax.annotate("\n".join(note), xy=(k.index, y), xycoords="data",
                        xytext=(0.02 if right else 0.98, 0.95), textcoords="axes fraction",
                        ha="left" if right else "right", va="top", multialignment="left",
                        fontsize=7,
                        bbox=dict(boxstyle="round", fc="white", ec="#999999", alpha=0.9),
                        arrowprops=dict(arrowstyle="->", color="#c44e52", linewidth=0.8))
    axes[0].legend(loc="lower left", fontsize=7, ncol=4, framealpha=0.9)
    axes[-1].set_xlabel("kernel (run order)")
    axes[0].set_ylim(0, highest / scale * 1.45 if highest else 1)
    if title is not None:
        fig.suptitle(str(title), fontsize=11)
    fig.savefig(os.fspath(path), dpi=110)
