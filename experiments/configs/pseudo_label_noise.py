"""Pseudo-label noise (Joint Optimization's third setting) on mnist5k, and the default methods on it.

40% of the training examples take the class of their k-means cluster (10 clusters on the top 50 principal
components of the standardised pixels), clusters matched to classes by the Hungarian assignment; the paper used
ImageNet features on CIFAR-10. The noise is structured: look-alike digits share the same wrong label. Prints the
pseudo-labels' accuracy and realised flip rate, then the comparison of CE, GCE, truncated Lq, Joint Optimization
and EL with the default settings.

  python -m experiments.train --config=experiments/configs/pseudo_label_noise.py --workdir=workdirs/pseudo_labels
"""

from experiments.configs import default


def get_config():
  config = default.get_config()
  config.title = "mnist5k, 40% pseudo-label noise (k-means on PCA features)"
  config.shared.noise.type = "pseudo_labels"
  config.shared.noise.rate = 0.4
  config.shared.noise.num_components = 50
  return config
