r"""Every method on CIFAR-N under one protocol: the fair comparison of the CIFAR-N replication (ReScience C, 2026).

The string after the colon picks the label set: cifar10_n,worst (default) | cifar10_n,aggregate | cifar10_n,random1 |
cifar10_n,random2 | cifar10_n,random3 | cifar100_n,noisy. On a GPU/TPU box with CIFAR-N prepared
(noisy_jax.data.tfds_data; its human labels need their manual download):

  python -m experiments.train --config=experiments/configs/cifar_n_fair.py:cifar10_n,worst \
      --config.shared.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/fair_c10n_worst
  python -m experiments.train --config=experiments/configs/cifar_n_fair.py:cifar100_n,noisy --runs=ce,peer_loss \
      --config.shared.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/fair_c100n

The protocol, the same for every row (config.shared):
  backbone     ResNet-34, CIFAR style (registry 'resnet34'), from a random initialisation, whatever the method's
               paper used (PreAct ResNet-18/32, the 9-layer CNN, ResNet-18): the replication's one backbone
  data         the label set's human labels for training (noise type 'dataset'); 5% of the 50,000 training images
               (2,500, stratified by the clean label) held out for validation, with their human labels
               (validation_labels 'noisy'): model selection sees only what a user of noisy data has
  seeds        0, 1, 2: the table gives the mean and std over them
  reported     the test accuracy of the last epoch and of the epoch of best (noisy) validation accuracy
               (`last_test_accuracy`, `test_accuracy_at_best_val`); the best test accuracy is logged but is not a
               number anyone could select
  input        per-channel normalisation of the training split, random crop after 4-pixel padding + flip
Each method keeps its own training plan: epochs, optimiser and schedule, batch size, stage sections, strong views
and hyper-parameters, read from its paper config (SOURCES below: its CIFAR-N row where it has one, else its CIFAR-10
or CIFAR-100 row, the dataset's class count deciding which), without its data, its network or its seed. Methods that
are told the noise rate (the Co-teaching family's forget rate) get the label set's published rate (Wei et al.,
ICLR 2022, Table 1; NOISE_RATES), which a user of CIFAR-N could read there.

What the README's table will hold for a user who has the data: one row per method (RUNS), last and selected test
accuracy (mean +- std over 3 seeds), the realised noise rate (the same for every row: the human labels are fixed)
and the wall time of a run. No such table is measured here: the machines of this project cannot download CIFAR-N.

Our noise generators are exact; the replication found that the original DivideMix and ELR code inject less noise
than they state (their 'sym' draws a label from all classes, the true one included, so a stated 50% flips 45% on
CIFAR-10). On CIFAR-N the labels are the human ones and no generator is involved: every row sees the same labels.
"""

import importlib

import ml_collections

from experiments.configs import base
from experiments.configs import coteaching_paper
from experiments.configs import paper_rows

LABEL_SETS = {
  "cifar10_n": ("worst", "aggregate", "random1", "random2", "random3"),
  "cifar100_n": ("noisy",),
}
DEFAULT = "cifar10_n,worst"
# The published noise rate of each label set (Wei et al., ICLR 2022, Table 1) [recalled].
NOISE_RATES = {
  ("cifar10_n", "aggregate"): 0.0903,
  ("cifar10_n", "random1"): 0.1723,
  ("cifar10_n", "random2"): 0.1812,
  ("cifar10_n", "random3"): 0.1764,
  ("cifar10_n", "worst"): 0.4021,
  ("cifar100_n", "noisy"): 0.4020,
}
MODEL = "resnet34"  # the replication's one backbone
VALIDATION_SIZE = 2500  # 5% of the 50,000 training images (an int: --config.shared.dataset_kwargs.validation_size=N)
SEEDS = (0, 1, 2)
# ProMix's names of the CIFAR-N label sets (promix_paper.HUMAN_LABELS).
PROMIX_LABELS = {"aggregate": "aggre", "random1": "rand1", "random2": "rand2", "random3": "rand3", "worst": "worst"}

# Each run: (paper config module, its config string for a CIFAR-10N label set, for CIFAR-100N). '{labels}' is the
# label set; '{promix}' ProMix's name of it. The config string of a method without a CIFAR-N row names the CIFAR-10
# (CIFAR-100) row whose training plan it takes.
SOURCES = {
  "ce": ("gce_paper", "cifar10_n,ce,{labels}", "cifar100_n,ce,noisy"),
  "gce": ("gce_paper", "cifar10_n,gce,{labels}", "cifar100_n,gce,noisy"),
  "truncated_lq": ("gce_paper", "cifar10_n,truncated_lq,{labels}", "cifar100_n,truncated_lq,noisy"),
  "joint_optimization": ("jo_paper", "symmetric", "symmetric"),
  "encouraging": ("el_paper", "cifar10,el", "cifar100,el"),
  "loss_correction": (
    "loss_correction_paper",
    "cifar10,forward,estimated,symmetric",
    "cifar100,forward,estimated,symmetric",
  ),
  "elr": ("elr_paper", "cifar10,symmetric", "cifar100,symmetric"),
  "sop": ("sop_paper", "symmetric", "symmetric"),
  "coteaching": ("coteaching_paper", "cifar10,coteaching,symmetric50", "cifar100,coteaching,symmetric50"),
  "coteaching_plus": (
    "coteaching_paper",
    "cifar10,coteaching_plus,symmetric50",
    "cifar100,coteaching_plus,symmetric50",
  ),
  "jocor": ("coteaching_paper", "cifar10,coteaching,symmetric50", "cifar100,coteaching,symmetric50"),
  "dividemix": ("dividemix_paper", "cifar10,symmetric_include_true,50", "cifar100,symmetric_include_true,50"),
  "elr_plus": ("elr_plus_paper", "cifar10,symmetric", "cifar100,symmetric"),
  "disc": ("disc_paper", "cifar10,symmetric,0.4", "cifar100,symmetric,0.4"),
  "promix": ("promix_paper", "cifar10_n,{promix}", "cifar100_n,noisy100"),
  "t_revision": ("t_revision_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "pes": ("pes_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "pes_semi": ("pes_semi_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "gls": ("gls_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "peer_loss": ("peer_loss_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "f_divergence": ("f_divergence_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "volminnet": ("volminnet_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "cores": ("cores_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
  "cal": ("cal_paper", "cifar10_n,{labels}", "cifar100_n,noisy"),
}
RUNS = tuple(SOURCES)
# JoCoR takes Co-teaching's plan (its original shares Co-teaching's Adam and ramp) with its own loss: co_lambda 0.9
# (JoCoR's main.py default), the forget rate the label set's rate.
JOCOR_CO_LAMBDA = 0.9
# What a paper config sets that belongs to the protocol (config.shared), not to a method's plan.
DATA_FIELDS = ("dataset", "dataset_kwargs", "noise", "normalization", "validation_labels", "model", "seed", "seeds")


def parse(arg: str | None) -> tuple[str, str]:
  """(dataset, label set) of 'DATASET,LABELS'; ValueError naming the bad part and the allowed values."""
  arg = arg or DEFAULT
  parts = [part.strip() for part in arg.split(",")]
  if len(parts) != 2:
    raise ValueError(f"cifar_n_fair config string {arg!r} must be DATASET,LABELS, e.g. {DEFAULT!r}.")
  dataset, labels = parts
  if dataset not in LABEL_SETS:
    raise ValueError(f"cifar_n_fair: unknown dataset {dataset!r} in {arg!r}; allowed: {', '.join(LABEL_SETS)}.")
  if labels not in LABEL_SETS[dataset]:
    allowed = ", ".join(LABEL_SETS[dataset])
    raise ValueError(f"cifar_n_fair: unknown labels {labels!r} for {dataset} in {arg!r}; allowed: {allowed}.")
  return dataset, labels


def _source_config(run: str, dataset: str, labels: str) -> ml_collections.ConfigDict:
  """The paper config whose training plan `run` takes (SOURCES)."""
  module_name, cifar10_arg, cifar100_arg = SOURCES[run]
  module = importlib.import_module(f"experiments.configs.{module_name}")
  template = cifar100_arg if dataset == "cifar100_n" else cifar10_arg
  return module.get_config(template.format(labels=labels, promix=PROMIX_LABELS.get(labels, labels)))


def run_plan(run: str, dataset: str, labels: str) -> ml_collections.ConfigDict:
  """The fields of `run`'s paper config that are its training plan: every field but DATA_FIELDS whose value differs
  from the protocol's (`shared_protocol`); of its augmentation only what the protocol's crop and flip do not cover
  (a strong view); the noise rate its method is told set to the label set's."""
  source = _source_config(run, dataset, labels).to_dict()
  shared = shared_protocol(dataset, labels).to_dict()
  plan = {
    name: value
    for name, value in source.items()
    if name not in (*DATA_FIELDS, "augment") and (name not in shared or shared[name] != value)
  }
  own_views = {k: v for k, v in source.get("augment", {}).items() if k not in shared["augment"]}
  if own_views:
    plan["augment"] = {**shared["augment"], **own_views}
  rate = NOISE_RATES[(dataset, labels)]
  if run == "jocor":
    plan["method"] = {
      "name": "jocor",
      "forget_rate": rate,
      "co_lambda": JOCOR_CO_LAMBDA,
      "num_gradual": coteaching_paper.NUM_GRADUAL,
    }
  elif plan["method"]["name"] == "coteaching":
    plan["method"]["forget_rate"] = rate
  return ml_collections.ConfigDict(plan)


def shared_protocol(dataset: str, labels: str) -> ml_collections.ConfigDict:
  """config.shared: the data, backbone, validation and seeds every row shares (module docstring)."""
  shared = base.get_shared()
  paper_rows.row_data(shared, dataset, "human", labels, validation_size=VALIDATION_SIZE)
  shared.validation_labels = "noisy"
  shared.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  shared.seeds = SEEDS
  del shared.plots  # a comparison's plots field is config.plots
  return shared


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, labels = parse(arg)
  config = base.comparison(f"{dataset} {labels}: every method under one protocol (ResNet-34, 5% noisy validation)")
  config.shared = shared_protocol(dataset, labels)
  config.runs = ml_collections.ConfigDict({run: run_plan(run, dataset, labels) for run in RUNS})
  return config
