"""noisy_jax: learning with noisy labels in JAX/Flax.

The package is in layers, each importing only itself and the ones before it (tests/test_layers.py):

  core        losses, noise, label table, metrics, augmentation, label issues: pure functions of arrays
  parallel    mesh, processes, sharded label table, streamed input, XLA options, host memory
  data        datasets and the noisy labels a run trains on
  models      the networks and `models.build`
  train       state, step, epoch program, prediction, `fit`, optimisers, two networks, checkpoints
  methods     each method's building blocks and epoch program, and the registry (`config.method` -> Method)
  experiment  runs, comparisons, sweeps, reporting, export, environment

Nothing is imported here: `from noisy_jax.core import losses` pulls in no data or training dependency.
"""

__version__ = "0.1.0"
