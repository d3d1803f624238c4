"""cjit.lax: jax.lax's names.

Control flow that stays in the graph (`scan`, `while_loop`, `fori_loop`,
`cond`, `switch`, `select`, `stop_gradient`: _control.py) and jax.lax's
operation names (elementwise, shapes, reductions, dot_general, map,
associative_scan, complex parts: _lax_ops.py), gathered for users; cjit's
own modules import from those two."""
from ._control import *  # noqa: F401,F403
from ._control import __all__ as _control_all
from ._lax_ops import *  # noqa: F401,F403
from ._lax_ops import __all__ as _ops_all

__all__ = list(_control_all) + list(_ops_all)
