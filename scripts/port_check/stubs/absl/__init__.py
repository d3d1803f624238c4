"""A minimal absl (not installed here) for gaussian_process_regression, which
calls ``jax.config.config_with_absl()`` and ``app.run(main)``: flags are
accepted and ignored, ``app.run`` calls main.  Both runs use it."""
