"""cjit.experimental: the names of jax.experimental that cjit has."""
from ._config import disable_x64, enable_x64

__all__ = ["enable_x64", "disable_x64"]
