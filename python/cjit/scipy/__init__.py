"""cjit.scipy: SciPy's functions on traced values (as jax.scipy)."""
from . import special  # noqa: F401
from . import stats  # noqa: F401
from . import linalg  # noqa: F401

__all__ = ["special", "stats", "linalg"]
