"""The import swap: ``jax`` and ``jax.*`` resolve to ``cjit`` and ``cjit.*``.

``install()`` puts a finder first on ``sys.meta_path``.  ``import jax.numpy as
jnp`` then binds ``cjit.numpy``, ``from jax import grad`` reads ``cjit.grad``
and ``jax.lax.scan`` reads ``cjit.lax.scan``: the program's text is not
changed.  A ``jax`` submodule cjit lacks raises ``ModuleNotFoundError`` naming
both modules, and the real ``jax``/``jaxlib`` (installed in the same venv for
the reference run) can never be imported by mistake.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

_SWAPPED = ("jax", "jaxlib")


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target
        self._spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module):
        # The import system stamped the alias's spec on the module; cjit's
        # own modules keep their real one.
        if self._spec is not None:
            module.__spec__ = self._spec


class JaxToCjit(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        root = fullname.split(".", 1)[0]
        if root not in _SWAPPED:
            return None
        if root == "jaxlib":
            raise ModuleNotFoundError(
                f"No module named '{fullname}' (cjit port: jaxlib has no counterpart)",
                name=fullname)
        real = "cjit" + fullname[len("jax"):]
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named '{fullname}' (cjit port: no module {real})", name=fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real),
                                              is_package=found.submodule_search_locations is not None)


def install():
    for name in list(sys.modules):
        if name.split(".", 1)[0] in _SWAPPED:
            raise RuntimeError(f"{name} was imported before the swap")
    sys.meta_path.insert(0, JaxToCjit())
