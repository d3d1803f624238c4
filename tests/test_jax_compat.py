"""JAX spellings that ported programs use: make_jaxpr, config, lax.Precision."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp


def test_make_jaxpr_prints_the_traced_graph():
    def f(x, y):
        return cnp.exp(x) @ y

    prog = cjit.make_jaxpr(f)(np.ones((2, 3)), np.ones((3, 4)))
    text = str(prog)
    assert "exp(" in text and "matmul(" in text and "float64[2,4]" in text
    same = cjit.jit(f).lower(np.ones((2, 3)), np.ones((3, 4))).as_text()
    strip = lambda t: [line.split("  #")[0] for line in t.splitlines()]   # source lines differ
    assert strip(text) == strip(same)
    # a static argument is part of the program, not a parameter
    prog = cjit.make_jaxpr(lambda n, x: x * n, static_argnums=0)(3.0, np.ones(2))
    assert "constant(3.0)" in str(prog) and "param[1]" not in str(prog)


def test_precision_is_accepted_and_ignored():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    for p in (None, cjit.lax.Precision.HIGH, cjit.lax.Precision.HIGHEST, "highest"):
        np.testing.assert_array_equal(cjit.jit(lambda x, y: cnp.dot(x, y, precision=p))(a, b), a @ b)


def test_config_options():
    cjit.config.update("jax_enable_x64", True)
    assert cjit.config.jax_enable_x64 is True
    cjit.config.update("jax_enable_x64", False)       # x64 off: 32-bit defaults
    try:
        assert cjit.config.jax_enable_x64 is False
        assert cjit.config.read("jax_enable_x64") is False
        assert cnp.zeros(2).dtype == np.float32
    finally:
        cjit.config.update("jax_enable_x64", True)
    assert cnp.zeros(2).dtype == np.float64
    cjit.config.update("jax_platform_name", "cpu")
    with pytest.raises(ValueError, match="tpu"):
        cjit.config.update("jax_platforms", "tpu")
    with pytest.raises(AttributeError, match="no option 'jax_made_up'"):
        cjit.config.update("jax_made_up", 1)
    cjit.config.config_with_absl()


def test_config_disable_jit_runs_eagerly_in_a_fresh_process():
    code = ("import numpy as np, cjit, cjit.numpy as cnp\n"
            "cjit.config.update('jax_disable_jit', True)\n"
            "seen = []\n"
            "f = cjit.jit(lambda x: seen.append(type(x).__name__) or cnp.sin(x))\n"
            "f(np.ones(2)); f(np.ones(2))\n"
            "print(seen)\n")
    env = dict(os.environ)
    env.pop("CJIT_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    # eager: the function runs on concrete arrays at every call
    assert r.stdout.strip() == "['ndarray', 'ndarray']"
