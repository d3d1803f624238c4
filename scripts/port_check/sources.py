"""The JAX pages and example programs port_check runs, and where they come from.

PAGES maps a page's short name to its path in the jax-ml/jax repository;
EXAMPLES maps an example's name to (path, commit or None for the pinned one,
skip reason or None).  ``python update_sources.py GITDIR`` copies them from
a jax git directory into pages/ (see pages/README.md).
"""

# The jax-ml/jax commit the copies in pages/ were taken from.
JAX_COMMIT = "cec06d116c05f0d52adfceee3d3b730fdbcb0ce5"
# kernel_lsq.py and gaussian_process_regression.py were removed from examples/
# in c856560f0e; they are read from its parent.
REMOVED_AT = "c856560f0e^"

PAGES = {
    "key-concepts": "docs/key-concepts.md",
    "thinking_in_jax": "docs/notebooks/thinking_in_jax.md",
    "Common_Gotchas_in_JAX": "docs/notebooks/Common_Gotchas_in_JAX.md",
    "control-flow": "docs/control-flow.md",
    "jacobian-vector-products": "docs/jacobian-vector-products.md",
    "autodiff_cookbook": "docs/notebooks/autodiff_cookbook.md",
    "pytrees": "docs/pytrees.md",
    "custom_pytrees": "docs/custom_pytrees.md",
    "stateful-computations": "docs/stateful-computations.md",
    "jit-compilation": "docs/jit-compilation.md",
    "higher-order": "docs/higher-order.md",
    "random-numbers": "docs/random-numbers.md",
    "complex-differentiation": "docs/complex-differentiation.md",
    "vmapped_log_probs": "docs/notebooks/vmapped_log_probs.md",
}

EXAMPLES = {
    "mnist_classifier_fromscratch": ("examples/mnist_classifier_fromscratch.py", None, None),
    "mnist_classifier": ("examples/mnist_classifier.py", None, None),
    "mnist_vae": ("examples/mnist_vae.py", None, None),
    "advi": ("examples/advi.py", None, None),
    "spmd_mnist_classifier_fromscratch": ("examples/spmd_mnist_classifier_fromscratch.py", None, None),
    "differentially_private_sgd": (
        "examples/differentially_private_sgd.py", None,
        "needs dp_accounting (Google's privacy accountant, not installed, not part of JAX)"),
    "onnx2xla": ("examples/onnx2xla.py", None,
                 "needs onnx and downloads a model over the network"),
    "kernel_lsq": ("examples/kernel_lsq.py", REMOVED_AT, None),
    "gaussian_process_regression": ("examples/gaussian_process_regression.py", REMOVED_AT, None),
}
