"""The pure building blocks: losses, noise models, the label table, metrics, augmentation, label issues.

Functions of arrays (jax.numpy), no training loop, no devices; nothing here imports another noisy_jax layer
(only noisy_jax.core itself).
"""
