"""The epsilon-softmax paper config (experiments/configs/eps_softmax_paper.py): every row's values against the
original code, each epoch's lr against PyTorch's scheduler, the loss against the catalogue's and the code's, the noise
maps, refusals, the docstring's commands, two smoke runs.

The values are written out here from cswjl/eps-softmax at f81685c3f00e4ce77b5da36a183a1cdf60fb6655, each with its
line: config.py (get_eps_softmax :101-129, get_weight_decay_config :169-187), main.py (the training loop),
losses.py, datasets/data_method1/build_dataset.py ("B") and datasets/transformers.py ("T"). The lr of every epoch is
a re-run of main.py:74-75 and :93 (torch SGD + CosineAnnealingLR, stepped after each epoch). Two runs (1 epoch, 40
mock examples, small networks) go through the trainer under `tfds.testing.mock_data` (random images with the real
TFDS feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch
import torch.nn.functional as F

from experiments.configs import eps_softmax_paper
from noisy_jax.core import losses
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(50000 / 128)  # 391 steps an epoch: only the epoch boundaries matter to the schedule
# config.py get_eps_softmax: (dataset, noise, rate) -> (alpha, beta, m).
CODE_HYPER = {
  **{("cifar10", "symmetric", r): (0.01, 5, 1e5) for r in (0.0, 0.2, 0.4, 0.6, 0.8)},  # :104, any rate
  **{("cifar10", "asymmetric", r): (0.02, 5, 1e3) for r in (0.1, 0.2, 0.3, 0.4)},  # :105, any rate
  ("cifar100", "symmetric", 0.0): (0.1, 1, 1e4),  # :110
  ("cifar100", "symmetric", 0.2): (0.05, 1, 1e4),  # :111
  ("cifar100", "symmetric", 0.4): (0.03, 1, 1e4),  # :112
  ("cifar100", "symmetric", 0.6): (0.00125, 1, 1e4),  # :113
  ("cifar100", "symmetric", 0.8): (0.0075, 1, 1e4),  # :114
  ("cifar100", "asymmetric", 0.1): (0.015, 1, 1e2),  # :117
  ("cifar100", "asymmetric", 0.2): (0.007, 1, 1e2),  # :118
  ("cifar100", "asymmetric", 0.3): (0.005, 1, 1e2),  # :119
  ("cifar100", "asymmetric", 0.4): (0.004, 1, 1e2),  # :120
}
CODE_EPS = 1e-8  # losses.py:6
CODE_GAMMA = 0.1  # losses.py:35 EFLandMAE(gamma=0.1); config.py:129 passes none
# main.py:54-63 and config.py:173-178: model, epochs, lr, batch, (L1, L2) weight decay.
CODE_TRAINING = {
  "cifar10": ("apl_cnn", 120, 0.01, 128, (0.0, 1e-4)),  # CNN(type='cifar10')
  "cifar100": ("resnet34", 200, 0.1, 128, (0.0, 1e-5)),  # ResNet34(num_classes=100)
}
ROWS = [(d, n, r, loss) for (d, n, r) in CODE_HYPER for loss in ("ece_mae", "efl_mae")]


def _arg(dataset, noise, rate, loss):
  return f"{dataset},{noise},{rate},{loss}"


@pytest.mark.parametrize("dataset,noise,rate,loss", ROWS, ids=[_arg(*row) for row in ROWS])
def test_every_row_is_the_codes(dataset, noise, rate, loss):
  config = eps_softmax_paper.get_config(_arg(dataset, noise, rate, loss))
  alpha, beta, m = CODE_HYPER[(dataset, noise, rate)]
  kwargs = {"alpha": alpha, "beta": beta, "m": m, "min_prob": CODE_EPS}
  if loss == "efl_mae":
    kwargs.update(gamma=CODE_GAMMA, detach_modulator=True)  # losses.py:75 detaches (1 - p)^gamma
  assert config.method.to_dict() == {"name": "loss", "loss": loss, "loss_kwargs": kwargs}
  model, epochs, lr, batch, (l1, l2) = CODE_TRAINING[dataset]
  assert config.model.to_dict() == {"name": model, "kwargs": {}, "pretrained": "none"}
  assert (config.num_epochs, config.batch_size, tuple(config.seeds)) == (epochs, batch, (0,))  # --trials 1 (:27)
  optimizer = config.optimizer
  # main.py:74 SGD(lr, momentum 0.9, weight_decay L2), :75 cosine T_max = epochs, eta_min 0, :90 clip 5, :85-87 L1.
  assert (optimizer.learning_rate, optimizer.momentum, optimizer.nesterov) == (lr, 0.9, False)
  assert (optimizer.weight_decay, optimizer.l1, optimizer.grad_clip_norm) == (l2, l1, 5.0)
  assert (optimizer.lr_schedule, optimizer.cosine_epochs, optimizer.lr_min, tuple(optimizer.lr_boundaries)) == (
    "cosine",
    0,
    0.0,
    (),
  )
  # T:20-25, 35-37 crop 4 + flip; B:207-230 all 50,000 training images; method1's noise (module docstring).
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 0
  exact = not (dataset == "cifar100" and noise == "asymmetric")  # B:25-47 multiclass_noisify draws per example
  noise_dataset = dataset if noise == "asymmetric" else ""
  assert config.noise.to_dict() == {"type": noise, "rate": rate, "exact": exact, "dataset": noise_dataset}
  registry.make(config.method, num_classes=100 if dataset == "cifar100" else 10)


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
def test_lr_of_every_epoch_is_torchs(dataset):
  config = eps_softmax_paper.get_config(f"{dataset},symmetric,0.4")
  _, epochs, lr, _, _ = CODE_TRAINING[dataset]
  schedule = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(config.optimizer), STEPS, num_epochs=config.num_epochs
  )
  ours = np.array([float(schedule(e * STEPS + s)) for e in range(epochs) for s in (0, STEPS - 1)])
  np.testing.assert_allclose(
    ours, np.repeat(paper_config_checks.torch_cosine_lrs(lr, epochs), 2), rtol=2e-6, atol=1e-12
  )


def _code_loss(logits, target, alpha, beta, m, gamma=None):
  """losses.py's ECEandMAE (gamma None) / EFLandMAE, batch mean: the epsilon-softmax (softmax, + m at the argmax,
  / (m + 1), clamped at eps; :15-18, 67-70), -log or -(1 - p)^gamma log with the factor detached (:75, 83), plus
  beta times MAELoss (scale 2, :144-153)."""
  p = F.softmax(logits, dim=1)
  bumped = (p + m * F.one_hot(torch.argmax(p, dim=1), p.shape[1])) / (m + 1)
  log_q = torch.log(torch.clamp(bumped, min=CODE_EPS)).gather(1, target[:, None])[:, 0]
  main = -log_q if gamma is None else -((1 - log_q.detach().exp()) ** gamma) * log_q
  mae = 2.0 * (1.0 - p.gather(1, target[:, None])[:, 0])
  return (alpha * main + beta * mae).mean()


@pytest.mark.parametrize(
  "arg", ["cifar10,symmetric,0.8", "cifar10,asymmetric,0.2,efl_mae", "cifar100,symmetric,0.6,efl_mae"]
)
def test_the_loss_is_the_catalogues_and_the_codes(arg):
  """The method built from a row: the batch mean of the catalogue loss at the transcribed hyper-parameters, and the
  code's loss in value and gradient (float64), the focal factor detached as losses.py:75 does."""
  dataset, noise, rate_text, *rest = arg.split(",")
  loss = rest[0] if rest else "ece_mae"
  alpha, beta, m = CODE_HYPER[(dataset, noise, float(rate_text))]
  gamma = CODE_GAMMA if loss == "efl_mae" else None
  num_classes = 100 if dataset == "cifar100" else 10
  method = registry.make(eps_softmax_paper.get_config(arg).method, num_classes=num_classes)
  rng = np.random.default_rng(0)
  logits = rng.normal(scale=4.0, size=(16, num_classes))
  target = rng.integers(0, num_classes, size=16)
  target[:4] = np.argmax(logits[:4], axis=1)  # some rows labelled with their argmax
  with jax.enable_x64():
    one_hot = jnp.eye(num_classes, dtype=jnp.float64)[target]

    def ours(z):
      return method.objective(z, one_hot, jnp.ones(16), jnp.ones(16, bool), rows=None)[0]

    value, grad = jax.value_and_grad(ours)(jnp.asarray(logits))
    extra = {} if gamma is None else {"gamma": gamma, "detach_modulator": True}
    catalogue = losses.get(loss)(jnp.asarray(logits), one_hot, alpha=alpha, beta=beta, m=m, min_prob=CODE_EPS, **extra)
    np.testing.assert_allclose(float(value), float(jnp.mean(catalogue)), rtol=1e-12)
  t_logits = torch.tensor(logits, requires_grad=True)
  reference = _code_loss(t_logits, torch.tensor(target), alpha, beta, m, gamma)
  reference.backward()
  np.testing.assert_allclose(float(value), reference.item(), rtol=1e-10)
  np.testing.assert_allclose(np.asarray(grad), t_logits.grad.numpy(), rtol=1e-8, atol=1e-14)


def test_cifar10_asymmetric_pairs_are_the_codes():
  """B:117-119: truck -> automobile, bird -> airplane, cat -> dog, dog -> cat, deer -> horse, each at RATE."""
  config = eps_softmax_paper.get_config("cifar10,asymmetric,0.3")
  transition = noise_lib.make_transition(config.noise.type, 10, config.noise.rate, dataset=config.noise.dataset)
  code = np.eye(10)
  for source, target in zip([9, 2, 3, 5, 4], [1, 0, 5, 3, 7]):
    code[source, source], code[source, target] = 0.7, 0.3
  np.testing.assert_allclose(transition, code, atol=1e-12)


def test_cifar100_asymmetric_uses_true_superclasses_not_the_codes_blocks():
  """The named difference: the code's P (B:151-160, build_for_cifar100 :9-22) maps each class to the next of its
  block of five consecutive ids; ours to the next of its true superclass. Both keep 1 - RATE and move RATE to one
  other class."""
  config = eps_softmax_paper.get_config("cifar100,asymmetric,0.2")
  ours = noise_lib.make_transition(config.noise.type, 100, config.noise.rate, dataset=config.noise.dataset)
  code = np.eye(100)
  for block in range(20):
    for i in range(5):
      row = 5 * block + i
      code[row, row], code[row, 5 * block + (i + 1) % 5] = 0.8, 0.2
  for matrix in (ours, code):
    np.testing.assert_allclose(np.diag(matrix), 0.8, atol=1e-12)
    assert (np.count_nonzero(matrix, axis=1) == 2).all()
  assert not np.allclose(ours, code)
  assert noise_lib.cifar100_superclass_map()[4] == 30  # beaver -> dolphin (aquatic mammals); the code: 4 -> 0


BAD = [
  ("cifar10,dependent,0.4", r"noise 'dependent'.*instance-dependent.*allowed: symmetric, asymmetric"),
  ("cifar100,human,worst", r"CIFAR-N \(human noise\) has no defaults.*allowed: DATASET cifar10, cifar100"),
  ("cifar10_n,worst", r"CIFAR-N \(human noise\) has no defaults"),
  ("mnist,symmetric,0.4", r"dataset 'mnist'.*allowed: cifar10, cifar100"),
  ("cifar10,pairflip,0.45", r"noise 'pairflip'.*allowed: symmetric, asymmetric"),
  ("cifar100,symmetric,0.5", r"RATE '0.5' for symmetric.*allowed: 0.0, 0.2, 0.4, 0.6, 0.8"),
  ("cifar100,asymmetric,0.0", r"RATE '0.0' for asymmetric.*allowed: 0.1, 0.2, 0.3, 0.4"),
  ("cifar10,asymmetric,abc", r"RATE 'abc'"),
  ("cifar10,symmetric,0.4,gce", r"loss 'gce'.*allowed: ece_mae, efl_mae"),
  ("cifar10,symmetric", r"must be DATASET,NOISE,RATE\[,LOSS\]"),
  ("cifar10,symmetric,0.4,ece_mae,x", r"must be DATASET,NOISE,RATE\[,LOSS\]"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    eps_softmax_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(eps_softmax_paper)
  assert eps_softmax_paper.get_config().method.loss == "ece_mae"


def test_doc_commands_load():
  """Every eps_softmax_paper command of docs/paper_configs.md."""
  doc = open("docs/paper_configs.md", encoding="utf-8").read()
  found = re.findall(r"--config=experiments/configs/eps_softmax_paper\.py:([\w,.=-]+)", doc)
  assert len(found) == 4
  for arg in found:
    eps_softmax_paper.get_config(arg)


@pytest.mark.parametrize("arg", ["cifar10,asymmetric,0.4,efl_mae", "cifar100,asymmetric,0.2"])
def test_smoke(arg):
  """FL_eps+MAE on mock CIFAR-10 with the 8-layer CNN (small widths), CE_eps+MAE on mock CIFAR-100 with its
  per-example asymmetric noise and a tiny ResNet: one epoch each, cosine lr, clipping, no validation split."""
  config = paper_config_checks.shrunk(eps_softmax_paper.get_config(arg), validation_size=0)
  if config.model.name == "apl_cnn":
    config.model.kwargs = {"widths": (4, 8, 8), "dense_size": 8}
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == config.method.loss
  assert [r["stage"] for r in summary["history"]] == ["stage1"]
  assert np.isfinite(summary["history"][0]["train_loss"]) and "val_accuracy" not in summary["history"][0]
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
  assert summary["noise"]["type"] == "asymmetric"
