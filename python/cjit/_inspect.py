"""cjit.make_jaxpr: JAX's spelling of "show me the traced program".  cjit's
program is its graph, so this is jit(fun).lower(*args).as_text() in an
object that prints it."""
from __future__ import annotations

from ._jitted import jit


class ProgramText:
    """The graph cjit traced for one call, as text (str() or print() it)."""

    def __init__(self, text, lowered):
        self.text = text
        self.lowered = lowered

    def __str__(self):
        return self.text

    __repr__ = __str__


def make_jaxpr(fun, static_argnums=(), **unused):
    """A function of fun's arguments returning the graph cjit traces for
    them (after simplification), as jax.make_jaxpr returns a jaxpr.  The
    text is cjit's, not JAX's jaxpr syntax."""

    def program(*args, **kwargs):
        lowered = jit(fun, static_argnums=static_argnums).lower(*args, **kwargs)
        return ProgramText(lowered.as_text(), lowered)
    return program
