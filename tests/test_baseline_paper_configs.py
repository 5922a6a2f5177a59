"""The baselines' paper configs (experiments/configs/{coteaching,elr,sop,disc}_paper.py): values, refusals, smoke runs.

Every variant string is loaded and its hyper-parameters are compared with the values written out here; the comment
above each table names its source (a section of shared/REFERENCE.md, or the original file the config's docstring
cites). Bad strings must raise a ValueError that names the allowed values. One run per family (1 epoch, tiny
networks, 40 mock examples) goes through the trainer under `tfds.testing.mock_data` (random images with the real
TFDS feature specs, nothing downloaded); the shrinking happens here, never in the configs.
"""

import re

from absl import flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np
import pytest
import tensorflow_datasets as tfds

from experiments.configs import coteaching_paper
from experiments.configs import disc_paper
from experiments.configs import elr_paper
from experiments.configs import sop_paper
from noisy_jax import models
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import coteaching
from noisy_jax.methods import registry
from noisy_jax.train import coteaching_adam
from noisy_jax.train import optim

STEPS = 391  # ceil(50,000 / 128): only the epoch boundaries matter to the schedules checked below


def _lr_per_epoch(optimizer_config, num_epochs):
  """The lr of each 0-based epoch, read at the epoch's last step."""
  schedule = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=num_epochs
  )
  return np.array([float(schedule(e * STEPS + STEPS - 1)) for e in range(num_epochs)])


# ---------------------------------------------------------------------------------------------------------------
# Co-teaching / Co-teaching+ (REFERENCE §7)

# REFERENCE §7: the three noise settings of both papers; forget rate tau = the noise rate.
COTEACHING_SETTINGS = {
  "symmetric50": ("symmetric", 0.5),
  "symmetric20": ("symmetric", 0.2),
  "pairflip45": ("pairflip", 0.45),
}
# REFERENCE §7: Adam decay start, Co-teaching 80 (CIFAR-100: 100), Co-teaching+ 80 everywhere;
# Co-teaching+ init_epoch CIFAR-10 20, CIFAR-100 5 (0 = plain Co-teaching has none).
COTEACHING_ROWS = {
  ("cifar10", "coteaching"): (80, 0),
  ("cifar100", "coteaching"): (100, 0),
  ("cifar10", "coteaching_plus"): (80, 20),
  ("cifar100", "coteaching_plus"): (80, 5),
}
COTEACHING_VARIANTS = [
  f"{d},{m},{s}{o}" for (d, m) in COTEACHING_ROWS for s in COTEACHING_SETTINGS for o in ("", ",original")
]


@pytest.mark.parametrize("arg", COTEACHING_VARIANTS)
def test_coteaching_paper_values(arg):
  dataset, method, setting = arg.split(",")[:3]
  original = arg.endswith(",original")
  noise_type, rate = COTEACHING_SETTINGS[setting]
  decay_start, init_epoch = COTEACHING_ROWS[(dataset, method)]
  config = coteaching_paper.get_config(arg)
  # REFERENCE §7: the 9-layer CNN; dropout 0 is what PyTorch 0.3 ran (models/coteaching_cnn.py docstring).
  assert config.model.to_dict() == {"name": "coteaching_cnn", "kwargs": {"dropout_rate": 0.0}, "pretrained": "none"}
  # REFERENCE §7: Adam lr 1e-3, 200 epochs, batch 128, no augmentation, no weight decay (Adam has none here).
  assert config.optimizer.to_dict() == {"name": "coteaching_adam", "learning_rate": 1e-3, "decay_start": decay_start}
  assert config.num_epochs == 200 and stages_lib.total_epochs(config) == 200 and config.batch_size == 128
  assert config.augment.to_dict() == {"crop_padding": 0, "flip": False}
  # Co-teaching main.py: transforms.ToTensor() only, no validation split (config docstring).
  assert config.normalization == "none"
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 0
  assert config.dataset_kwargs.data_dir is None
  # REFERENCE §4 (exact-rate injection) and §7 (settings).
  assert config.noise.to_dict() == {"type": noise_type, "rate": rate, "exact": True, "dataset": ""}
  # REFERENCE §7: tau = noise rate, T_k 10, c 1; the `original` flag = main.py's ramp and loss.py's extra 1/n.
  assert config.method.to_dict() == {
    "name": "coteaching",
    "forget_rate": rate,
    "num_gradual": 10,
    "exponent": 1.0,
    "ramp": "original" if original else "paper",
    "plus": method == "coteaching_plus",
    "init_epoch": init_epoch,
    "normalise_twice": original,
  }
  if method == "coteaching_plus":
    assert init_epoch == coteaching.COTEACHING_PLUS_INIT_EPOCH[dataset]
  built = registry.make(config.method, num_classes=100 if dataset == "cifar100" else 10, num_epochs=config.num_epochs)
  assert built.num_networks == 2


@pytest.mark.parametrize("original", [False, True])
def test_coteaching_paper_schedules(original):
  """The forget-rate ramp and the Adam plan the config produces, against REFERENCE §7 written out."""
  config = coteaching_paper.get_config("cifar100,coteaching,symmetric50" + (",original" if original else ""))
  schedule = coteaching.forget_rate_schedule(
    config.num_epochs,
    config.method.forget_rate,
    num_gradual=config.method.num_gradual,
    exponent=config.method.exponent,
    ramp=config.method.ramp,
  )
  if original:  # main.py: tau everywhere, the first 10 entries linspace(0, tau, 10): tau reached at index 9
    want = np.full(200, 0.5)
    want[:10] = np.arange(10) * 0.5 / 9
  else:  # the paper: tau * min(e / 10, 1), tau from index 10
    want = 0.5 * np.minimum(np.arange(200) / 10, 1.0)
  np.testing.assert_allclose(schedule, want, rtol=0, atol=1e-12)
  # REFERENCE §7: lr 1e-3 until decay_start (CIFAR-100: 100), then 1e-3 (200 - e) / (200 - 100); beta1 0.9 -> 0.1.
  lr, beta1 = coteaching_adam.adam_plan(config.optimizer.learning_rate, config.num_epochs, config.optimizer.decay_start)
  epochs = np.arange(200)
  np.testing.assert_allclose(lr, np.where(epochs < 100, 1e-3, 1e-3 * (200 - epochs) / 100), rtol=1e-12)
  np.testing.assert_array_equal(beta1, np.where(epochs < 100, 0.9, 0.1))


# ---------------------------------------------------------------------------------------------------------------
# ELR (REFERENCE §6)

# REFERENCE §6 (config_cifar10.json / config_cifar10_asym.json / config_cifar100.json):
# row -> (beta, lambda, epochs, lr boundaries or None for the cosine).
ELR_ROWS = {"c10_sym": (0.7, 3.0, 150, None), "c10_asym": (0.9, 1.0, 120, (40, 80)), "c100": (0.9, 7.0, 150, (80, 120))}
# Default noise rates: the configs' "percent" (C10 0.8, C100 0.6); asymmetric 0.4 (the config's stated choice).
ELR_RATES = {("cifar10", "sym"): 0.8, ("cifar100", "sym"): 0.6, ("cifar10", "asym"): 0.4, ("cifar100", "asym"): 0.4}
ELR_VARIANTS = [
  f"{d},{n}" for d in ("cifar10", "cifar100") for n in ("symmetric", "symmetric_include_true", "asymmetric")
] + ["cifar10,symmetric,paper_schedule", "cifar10,symmetric_include_true,paper_schedule"]


@pytest.mark.parametrize("arg", ELR_VARIANTS)
def test_elr_paper_values(arg):
  dataset, noise = arg.split(",")[:2]
  paper_schedule = arg.endswith(",paper_schedule")
  asym = noise == "asymmetric"
  key = "c100" if dataset == "cifar100" else ("c10_asym" if asym else "c10_sym")
  beta, lam, epochs, boundaries = ELR_ROWS[key]
  if paper_schedule:  # REFERENCE §6 [recalled]: the paper's CIFAR-10 schedule, 120 epochs, x0.01 at 40 / 80
    epochs, boundaries = 120, (40, 80)
  config = elr_paper.get_config(arg)
  assert config.method.to_dict() == {"name": "elr", "lam": lam, "beta": beta}
  assert config.num_epochs == epochs and stages_lib.total_epochs(config) == epochs
  # REFERENCE §6: ResNet-34, SGD momentum 0.9, weight decay 1e-3, lr 0.02, batch 128, 45k / 5k split.
  assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
  opt = config.optimizer
  assert (opt.learning_rate, opt.momentum, opt.weight_decay, opt.nesterov) == (0.02, 0.9, 1e-3, False)
  assert config.batch_size == 128
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 5000
  # ELR data_loaders.py: crop 4 + flip, per-channel normalisation.
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.noise.to_dict() == {
    "type": noise,
    "rate": ELR_RATES[(dataset, "asym" if asym else "sym")],
    "exact": True,
    "dataset": dataset if asym else "",
  }
  if boundaries is None:
    assert (opt.lr_schedule, opt.cosine_epochs, opt.lr_min) == ("cosine", 10, 1e-3)
  else:  # MultiStepLR(gamma 0.01)
    assert opt.get("lr_schedule", "piecewise") == "piecewise"
    assert tuple(opt.lr_boundaries) == boundaries and opt.lr_decay == 0.01
    lr = _lr_per_epoch(opt, epochs)
    want = 0.02 * 0.01 ** np.searchsorted(boundaries, np.arange(epochs), side="right")
    np.testing.assert_allclose(lr, want, rtol=1e-6)
  registry.make(config.method, num_classes=100 if dataset == "cifar100" else 10)


def test_elr_paper_cosine_against_warm_restarts():
  """CosineAnnealingWarmRestarts(T_0 10, eta_min 1e-3) stepped per epoch (REFERENCE §6; ELR trainer.py): the lr of
  epoch e is 1e-3 + (0.02 - 1e-3)(1 + cos(pi (e mod 10) / 10)) / 2. The config's cosine equals it where
  e mod 20 < 10 (the last ten epochs included) and mirrors it on the other epochs (the stated deviation)."""
  config = elr_paper.get_config("cifar10,symmetric")
  lr = _lr_per_epoch(config.optimizer, config.num_epochs)
  e = np.arange(150)
  restarts = 1e-3 + (0.02 - 1e-3) * (1 + np.cos(np.pi * (e % 10) / 10)) / 2
  same = e % 20 < 10
  np.testing.assert_allclose(lr[same], restarts[same], rtol=1e-5)
  rising = 1e-3 + (0.02 - 1e-3) * (1 - np.cos(np.pi * (e % 10) / 10)) / 2  # back up to 0.02 along the cosine
  np.testing.assert_allclose(lr[~same], rising[~same], rtol=1e-5)
  assert same[140:].all()


# ---------------------------------------------------------------------------------------------------------------
# SOP (REFERENCE §9)

# REFERENCE §9 / README@4d991ce: (lr_u, lr_v, rate); symmetric lr_u 1 lr_v 10 at 50%, asymmetric 0.1 / 100 at 40%,
# the paper's asymmetric lr_u 1.
SOP_VARIANTS = {
  "symmetric": (1.0, 10.0, 0.5),
  "symmetric_include_true": (1.0, 10.0, 0.5),
  "asymmetric": (0.1, 100.0, 0.4),
  "asymmetric,paper_lr_u": (1.0, 100.0, 0.4),
  "symmetric,plus": (1.0, 10.0, 0.5),
  "asymmetric,paper_lr_u,plus": (1.0, 100.0, 0.4),
}


@pytest.mark.parametrize("arg", sorted(SOP_VARIANTS))
def test_sop_paper_values(arg):
  lr_u, lr_v, rate = SOP_VARIANTS[arg]
  noise = arg.split(",")[0]
  config = sop_paper.get_config(arg)
  # REFERENCE §9: init std 1e-8; SOP+ (config_cifar100.json): ratio_consistency 0.9, ratio_balance 0.1.
  plus = arg.endswith(",plus")
  ratios = {"ratio_consistency": 0.9, "ratio_balance": 0.1} if plus else {}
  assert config.method.to_dict() == {"name": "sop", "lr_u": lr_u, "lr_v": lr_v, "init_std": 1e-8, **ratios}
  # REFERENCE §9: CIFAR-100, SGD 0.02 / momentum 0.9 / weight decay 1e-3, batch 128, 300 epochs,
  # CosineAnnealingLR(300, 2e-4) stepped per epoch.
  assert config.dataset == "cifar100" and config.batch_size == 128
  assert config.num_epochs == 300 and stages_lib.total_epochs(config) == 300
  opt = config.optimizer
  assert (opt.learning_rate, opt.momentum, opt.weight_decay, opt.nesterov) == (0.02, 0.9, 1e-3, False)
  assert (opt.lr_schedule, opt.cosine_epochs, opt.lr_min) == ("cosine", 300, 2e-4)
  e = np.arange(300)
  np.testing.assert_allclose(
    _lr_per_epoch(opt, 300), 2e-4 + (0.02 - 2e-4) * (1 + np.cos(np.pi * e / 300)) / 2, rtol=1e-5
  )
  # SOP data_loaders.py / config: crop 4 + flip, per channel, "validation_split": 0; SOP+'s second view:
  # "data_augmentation": autoaug_cifar10 (TF magnitudes), cutout 16.
  strong = {"strong": {"policy": "autoaugment_cifar10_tf", "cutout": 16}} if plus else {}
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True, **strong}
  assert config.normalization == "per_channel"
  assert config.dataset_kwargs.validation_size == 0
  assert config.noise.to_dict() == {
    "type": noise,
    "rate": rate,
    "exact": True,
    "dataset": "cifar100" if noise == "asymmetric" else "",
  }
  assert registry.make(config.method, num_classes=100).strong_view == plus


def preact_resnet18_parameters(num_classes):
  """Parameter count of SOP's model/PreResNet.py PreActResNet18 (and DivideMix's PreResNet.py ResNet18, the same):
  conv stem + BN, 4 stages x 2 PreActBlocks (BN, conv3x3, BN, conv3x3, a 1x1 shortcut where the shape changes), no
  final BN, Linear with bias."""
  total = 27 * 64 + 2 * 64
  c_in = 64
  for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
    for block in range(2):
      s = stride if block == 0 else 1
      total += 2 * c_in + 9 * c_in * width + 2 * width + 9 * width * width
      total += c_in * width if (s != 1 or c_in != width) else 0
      c_in = width
  return total + 512 * num_classes + num_classes


def test_sop_paper_network_is_a_preact_resnet18():
  """Same stages and shortcuts as SOP's PreActResNet18; ours has no stem BN (-128) and a final BN (+1024)."""
  config = sop_paper.get_config()
  model = models.get(config.model.name, num_classes=100, **config.model.kwargs)
  shapes = jax.eval_shape(
    lambda x: model.init(jax.random.PRNGKey(0), x, train=False), jnp.zeros((1, 32, 32, 3), jnp.float32)
  )
  count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes["params"]))
  assert count == preact_resnet18_parameters(100) - 2 * 64 + 2 * 512


# ---------------------------------------------------------------------------------------------------------------
# Refusals and the docstrings' commands

BAD = [
  (coteaching_paper, "cifar10,coteaching", r"DATASET,METHOD,SETTING\[,original\]"),
  (coteaching_paper, "svhn,coteaching,pairflip45", r"'svhn'.*allowed: cifar10, cifar100"),
  (coteaching_paper, "cifar10,coteach,pairflip45", r"'coteach'.*allowed: coteaching, coteaching_plus"),
  (coteaching_paper, "cifar10,coteaching,symmetric40", r"'symmetric40'.*symmetric50, symmetric20, pairflip45"),
  (coteaching_paper, "cifar10,coteaching,pairflip45,orig", r"'orig'.*allowed: original"),
  (elr_paper, "cifar10", r"DATASET,NOISE\[,paper_schedule\]"),
  (elr_paper, "mnist,symmetric", r"'mnist'.*allowed: cifar10, cifar100"),
  (elr_paper, "cifar10,pairflip", r"'pairflip'.*symmetric, symmetric_include_true, asymmetric"),
  (elr_paper, "cifar10,symmetric,cosine", r"'cosine'.*allowed: paper_schedule"),
  (elr_paper, "cifar100,symmetric,paper_schedule", r"paper_schedule.*cifar10 with NOISE symmetric"),
  (elr_paper, "cifar10,asymmetric,paper_schedule", r"paper_schedule.*cifar10 with NOISE symmetric"),
  (sop_paper, "symmetric,plus,plus", r"NOISE\[,paper_lr_u\]\[,plus\]"),
  (sop_paper, "pairflip", r"'pairflip'.*symmetric, symmetric_include_true, asymmetric"),
  (sop_paper, "asymmetric,lr_u", r"'lr_u'.*allowed: paper_lr_u, plus"),
  (sop_paper, "symmetric,paper_lr_u", r"paper_lr_u.*asymmetric only"),
  (sop_paper, "symmetric,asymmetric", r"'asymmetric'.*allowed: paper_lr_u, plus"),
  (disc_paper, "cifar10,symmetric", r"DATASET,NOISE,RATE"),
  (disc_paper, "svhn,symmetric,0.2", r"'svhn'.*allowed: cifar10, cifar100"),
  (disc_paper, "cifar10,ins,0.2", r"'ins'.*allowed: symmetric, asymmetric"),
  (disc_paper, "cifar10,symmetric,1.5", r"RATE '1.5'.*\(0, 1\)"),
]


# ---------------------------------------------------------------------------------------------------------------
# DISC (JackYFL/DISC@a21e910: algorithms/DISC.py DISC.__init__, configs/DISC_CIFAR.py, main.py)

# DISC.__init__ for CIFAR-10 / CIFAR-100: (thresholds' momentum, lamd_h, optimiser) per noise and rate; momentum 0.99
# (main.py) unless asymmetric or at 60% / 80%; Adam above 60%.
DISC_ROWS = {
  "cifar10,symmetric,0.2": (0.99, 1.0, "sgd", "symmetric_include_true"),
  "cifar10,symmetric,0.4": (0.99, 1.0, "sgd", "symmetric_include_true"),
  "cifar10,symmetric,0.6": (0.95, 0.2, "sgd", "symmetric_include_true"),
  "cifar10,symmetric,0.8": (0.95, 0.2, "coteaching_adam", "symmetric_include_true"),
  "cifar10,asymmetric,0.4": (0.95, 1.0, "sgd", "asymmetric"),
  "cifar100,symmetric,0.2": (0.99, 1.0, "sgd", "symmetric_include_true"),
  "cifar100,symmetric,0.8": (0.95, 0.2, "coteaching_adam", "symmetric_include_true"),
  "cifar100,asymmetric,0.4": (0.95, 1.0, "sgd", "pairflip"),
}


@pytest.mark.parametrize("arg", list(DISC_ROWS))
def test_disc_paper_values(arg):
  momentum, lamd_h, optimizer, noise = DISC_ROWS[arg]
  config = disc_paper.get_config(arg)
  assert config.method.to_dict() == {
    "name": "disc",
    "start_epoch": 20,
    "momentum": momentum,
    "lamd_h": lamd_h,
    "mixup_alpha": 5.0,
  }
  assert (config.noise.type, config.noise.rate, config.noise.exact) == (noise, float(arg.split(",")[2]), True)
  assert (config.model.name, config.num_epochs, config.batch_size) == ("resnet18", 200, 128)
  assert (config.augment.crop_padding, config.augment.flip) == (4, True)
  # the original's own pool, RandAugmentwogeo(n=2, m=5 / 10) with its CutoutAbs built in
  magnitude = 10 if arg.startswith("cifar100") else 5
  assert config.augment.strong.to_dict() == {
    "policy": "disc_randaugment",
    "num_ops": 2,
    "magnitude": magnitude,
    "cutout": 0,
  }
  assert config.dataset_kwargs.validation_size == 0
  if optimizer == "sgd":  # SGD lr 0.1, no momentum, weight decay 1e-3, x0.1 at 80 and 160 (MultiStepLR)
    lrs = _lr_per_epoch(config.optimizer, 200)
    np.testing.assert_allclose(lrs[[0, 79, 80, 159, 160, 199]], [0.1, 0.1, 0.01, 0.01, 0.001, 0.001], rtol=1e-6)
    assert (config.optimizer.momentum, config.optimizer.weight_decay) == (0.0, 1e-3)
  else:  # Adam lr 0.001, decayed linearly from epoch 120 (alpha_plan)
    assert config.optimizer.to_dict() == {"name": "coteaching_adam", "learning_rate": 0.001, "decay_start": 120}
  registry.make(config.method, num_classes=100 if arg.startswith("cifar100") else 10, num_examples=50_000)


@pytest.mark.parametrize("module,arg,message", BAD, ids=[f"{m.__name__.split('.')[-1]}:{a}" for m, a, _ in BAD])
def test_bad_strings_name_the_allowed_values(module, arg, message):
  with pytest.raises(ValueError, match=message):
    module.get_config(arg)


@pytest.mark.parametrize("module", [coteaching_paper, elr_paper, sop_paper, disc_paper])
def test_docstring_commands_and_defaults_load(module):
  found = re.findall(r"--config=experiments/configs/(\w+)\.py:([\w,.]+)", module.__doc__)
  assert found and all(name == module.__name__.split(".")[-1] for name, _ in found)
  for _, arg in found:
    module.get_config(arg)
  assert module.get_config().to_dict() == module.get_config(module.DEFAULT).to_dict()


def test_flag_path_locked_config():
  """experiments/train.py's path: the whole string after ':' (commas included) reaches get_config, and the locked
  config takes the docstrings' overrides."""
  argv = [
    "prog",
    "--config=experiments/configs/coteaching_paper.py:cifar100,coteaching_plus,symmetric20,original",
    "--config.noise.exact=False",
    "--config.dataset_kwargs.data_dir=/data/tfds",
  ]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, lock_config=True, sys_argv=argv)
  flag_values(argv)
  config = flag_values.config
  assert (config.dataset, config.method.plus, config.method.ramp, config.method.init_epoch) == (
    "cifar100",
    True,
    "original",
    5,
  )
  assert config.noise.exact is False and config.dataset_kwargs.data_dir == "/data/tfds"


# ---------------------------------------------------------------------------------------------------------------
# Smoke runs under the TFDS mock: one per family, 1 epoch, tiny networks (overrides here, never in the configs).


@pytest.fixture
def mock_tfds():
  with tfds.testing.mock_data(num_examples=40):
    yield


def _tiny(config, model_kwargs):
  """1 epoch of at most 2 steps of 32 on 40 mock examples (8 of them validation when the config has a split)."""
  config.num_epochs = 1
  config.batch_size = 32
  config.num_devices = 1
  config.checkpoint_every = 0
  if config.dataset_kwargs.validation_size:
    config.dataset_kwargs.validation_size = 8
  config.model.kwargs = model_kwargs
  return config


def _check(summary, method):
  assert summary["method"] == method
  assert [r["stage"] for r in summary["history"]] == ["stage1"]
  assert np.isfinite(summary["history"][0]["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0


def test_smoke_coteaching_plus_original(mock_tfds):
  """Two Co-teaching CNNs (nine convolutions, tiny widths) on 32x32 mock CIFAR-100 with the original's ramp and
  loss; init_epoch 0 so the single epoch runs the disagreement phase."""
  config = _tiny(
    coteaching_paper.get_config("cifar100,coteaching_plus,pairflip45,original"),
    {"widths": (4, 4, 4, 8, 8, 8, 8, 8, 4), "dropout_rate": 0.0},
  )
  config.method.init_epoch = 0
  summary = runs.run_single(config)
  _check(summary, "coteaching_plus")
  assert summary["noise"]["type"] == "pairflip"


def test_smoke_elr_cosine(mock_tfds):
  """ResNet-34's class with one block per stage, the cosine schedule, the 45k / 5k split shrunk to 32 / 8."""
  config = _tiny(elr_paper.get_config("cifar10,symmetric_include_true"), {"widths": (4, 8), "blocks_per_stage": (1, 1)})
  summary = runs.run_single(config)
  _check(summary, "elr")
  assert "val_accuracy" in summary["history"][0]


def test_smoke_sop_asymmetric(mock_tfds):
  """SOP+ with the pre-activation ResNet of one block per stage, u / v rows, the strong view (TF AutoAugment +
  Cutout), CIFAR-100 superclass noise, no validation."""
  config = _tiny(sop_paper.get_config("asymmetric,plus"), {"widths": (4, 8), "blocks_per_stage": (1, 1)})
  summary = runs.run_single(config)
  _check(summary, "sop")
  assert "val_accuracy" not in summary["history"][0]
  assert summary["noise"]["type"] == "asymmetric"


def test_smoke_disc_adam(mock_tfds):
  """DISC with ResNet-18's class of one block per stage, both views (DISC's own pool + CutoutAbs), the Adam plan, and no
  warm-up (start_epoch 0 here) so the single epoch runs the mixup passes of the purified rows."""
  config = _tiny(disc_paper.get_config("cifar100,symmetric,0.8"), {"widths": (4, 8), "blocks_per_stage": (1, 1)})
  config.method.start_epoch = 0
  summary = runs.run_single(config)
  _check(summary, "disc")
  assert summary["noise"]["type"] == "symmetric_include_true"
