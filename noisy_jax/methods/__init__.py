"""The training methods of the papers: each one's objective and per-example state (a module per method), the
epoch programs of the two-network methods (built from noisy_jax.train's pieces), and `registry`, which builds a
`train.method.Method` from `config.method`.
"""
