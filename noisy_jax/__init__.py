"""noisy_jax: learning with noisy labels in JAX/Flax.

Submodules are imported on demand (``from noisy_jax import losses``) so that the
pure losses never pull in data or training dependencies.
"""

__version__ = "0.1.0"
