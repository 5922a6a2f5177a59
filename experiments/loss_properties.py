"""Prints, for every loss in noisy_jax.core.losses, whether it is symmetric and bounded (numerical check).

python -m experiments.loss_properties [--num_classes=10] [--num_samples=512] [--seed=0]
"""

from absl import app
from absl import flags

from noisy_jax.core import loss_properties

_NUM_CLASSES = flags.DEFINE_integer("num_classes", 10, "C, the number of classes.")
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 512, "Random logit vectors per logit scale.")
_SEED = flags.DEFINE_integer("seed", 0, "PRNG seed of the random logits.")


def main(argv):
  del argv
  results = loss_properties.check_all(num_classes=_NUM_CLASSES.value, num_samples=_NUM_SAMPLES.value, seed=_SEED.value)
  print(
    f"C = {_NUM_CLASSES.value}, {_NUM_SAMPLES.value} random logit vectors at scales "
    f"{loss_properties.DEFAULT_SCALES}, default hyper-parameters"
  )
  print(loss_properties.format_table(results))


if __name__ == "__main__":
  app.run(main)
