"""Stand-in for jax's examples package: only its datasets module (offline)."""
