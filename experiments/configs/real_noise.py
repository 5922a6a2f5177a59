"""What clothing1m_paper.py and webvision_paper.py share: the methods they can run on data with real label noise.

  method = parse(arg, "clothing1m_paper")             # 'joint_optimization' (default), 'ce' or 'gce'
  config.method = method_config(method, jo_begin=5)   # the method's settings; JO relabels from `jo_begin`

Joint Optimization takes the original code's constants (../shared/REFERENCE.md §2); its `begin` is each config's
choice (about 35% of the epochs, as the original code's 70 of 200). GCE takes the paper's q (REFERENCE §1).
"""

METHODS = ("joint_optimization", "ce", "gce")
DEFAULT = "joint_optimization"
JO_ALPHA, JO_BETA = 1.0, 0.5  # the original code's defaults
JO_HISTORY_LENGTH = 10  # the original code
GCE_Q = 0.7  # REFERENCE §1


def parse(arg: str | None, config_name: str) -> str:
  """The method named by the config string (`--config=...py:METHOD`); ValueError naming the allowed ones."""
  method = (arg or DEFAULT).strip()
  if method not in METHODS:
    raise ValueError(f"{config_name} config string {arg!r} must be a METHOD, one of {', '.join(METHODS)}.")
  return method


def method_config(method: str, *, jo_begin: int) -> dict:
  """The config.method dict of `method` (one of METHODS)."""
  if method == "joint_optimization":
    return {
      "name": "joint_optimization",
      "alpha": JO_ALPHA,
      "beta": JO_BETA,
      "prior": "uniform",
      "begin": jo_begin,
      "history_length": JO_HISTORY_LENGTH,
      "relabel": "soft",
      "stage2": True,
    }
  if method == "gce":
    return {"name": "loss", "loss": "generalized_cross_entropy", "loss_kwargs": {"q": GCE_Q}}
  return {"name": "loss", "loss": "cross_entropy", "loss_kwargs": {}}


def get_config(
  method: str,
  *,
  dataset: str,
  dataset_kwargs: dict,
  model: str,
  batch_size: int,
  num_epochs: int,
  learning_rate: float,
  weight_decay: float,
  momentum: float,
  lr_boundaries,
  jo_begin: int,
  pretrained: str,
):
  """A run on data with real label noise (noise type 'none': labels as given), per-channel normalisation, flips;
  the network `model` (BatchNorm statistics trained: kwargs freeze_batch_norm False, there to be overridden) starts
  from `pretrained` (config.model.pretrained: 'none', a path, or noisy_jax.experiment.pretrained.REQUIRED) and
  trains at one learning rate (optimizer.backbone_lr_scale 1.0).

  Joint Optimization trains stage 1 at the recipe's constant learning rate and stage 2 (a fresh network on the
  relabelled targets) with the whole recipe, its lr steps included (REFERENCE §2); other methods take the recipe.
  """
  from ml_collections import ConfigDict  # pylint: disable=g-import-not-at-top

  from experiments.configs import base  # pylint: disable=g-import-not-at-top

  config = base.get_shared()
  config.dataset = dataset
  config.dataset_kwargs = ConfigDict(dataset_kwargs)
  config.noise = ConfigDict({"type": "none", "rate": 0.0, "exact": True, "dataset": ""})
  config.normalization = "per_channel"
  config.augment = ConfigDict({"crop_padding": 0, "flip": True})
  config.model = ConfigDict({"name": model, "kwargs": {"freeze_batch_norm": False}, "pretrained": pretrained})
  config.batch_size = batch_size
  config.method = method_config(method, jo_begin=jo_begin)
  config.num_epochs = num_epochs
  recipe = base.optimizer(learning_rate, weight_decay=weight_decay, lr_boundaries=lr_boundaries, momentum=momentum)
  if method == "joint_optimization":
    config.optimizer = base.optimizer(learning_rate, weight_decay=weight_decay, lr_boundaries=(), momentum=momentum)
    config.stage2 = {"num_epochs": num_epochs, "optimizer": recipe.to_dict()}
  else:
    config.optimizer = recipe
  return config
