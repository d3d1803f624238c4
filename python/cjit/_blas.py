"""The BLAS library that runs matmuls (csrc/blas.c), set up at import.

cjit prefers the OpenBLAS of the scipy-openblas32 wheel (a current release,
which knows today's processors) to the system's; C cannot find a wheel, so
this hands it the path.  Then the library is loaded, so that a library that
did not recognize the processor is reported at import.
"""
import importlib.util
import os

from . import _cjit


def wheel_library():
    """The OpenBLAS file of the scipy-openblas32 wheel, or None if it is not
    installed.  Looked up where the package's get_lib_dir() and
    get_library(fullname=True) look, without importing it: its import reads
    package metadata, which costs more than importing cjit."""
    try:
        spec = importlib.util.find_spec("scipy_openblas32")
    except (ImportError, ValueError):
        return None
    for pkg_dir in (spec.submodule_search_locations or []) if spec else []:
        lib_dir = os.path.join(pkg_dir, "lib")
        try:
            names = sorted(os.listdir(lib_dir))
        except OSError:
            continue
        for name in names:
            if name.startswith("libscipy_openblas") and name.endswith(".so"):
                return os.path.join(lib_dir, name)
    return None


def setup():
    """Hands the wheel's library to C and loads the BLAS (CJIT_BLAS, read by
    C, still comes first).  Returns the warnings to give."""
    path = wheel_library()
    if path is not None:
        _cjit._set_blas_path(path)
    return _cjit._blas_warnings()
