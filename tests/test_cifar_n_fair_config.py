"""The fair CIFAR-N comparison (experiments/configs/cifar_n_fair.py): one protocol for every registered method, each
run's plan equal to its paper config's, the noise rates the Co-teaching family is told, the refusals, the docstring's
commands, and a smoke run of two rows under `tfds.testing.mock_data` (random images with the real TFDS feature specs,
nothing downloaded; the shrinking happens here, never in the config)."""

import re

import numpy as np
import pytest
import tensorflow_datasets as tfds

from experiments.configs import cifar_n_fair
from noisy_jax.experiment import comparison
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib

LABEL_SETS = [
  "cifar10_n,worst",
  "cifar10_n,aggregate",
  "cifar10_n,random1",
  "cifar10_n,random2",
  "cifar10_n,random3",
  "cifar100_n,noisy",
]


@pytest.fixture(scope="module", params=LABEL_SETS)
def fair(request):
  return request.param, cifar_n_fair.get_config(request.param)


def test_the_protocol_is_shared(fair):
  arg, config = fair
  dataset, labels = arg.split(",")
  shared = config.shared
  assert shared.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
  assert shared.dataset == dataset and shared.dataset_kwargs.noise_key == labels
  assert shared.noise.type == "dataset" and shared.validation_labels == "noisy"
  assert shared.dataset_kwargs.validation_size == 2500 and tuple(shared.seeds) == (0, 1, 2)
  assert shared.augment.to_dict() == {"crop_padding": 4, "flip": True} and shared.normalization == "per_channel"
  for name, run in config.runs.items():
    assert not set(run.keys()) & {"model", "dataset", "dataset_kwargs", "noise", "seed", "seeds"}, name


def test_every_registered_method_has_a_row(fair):
  _, config = fair
  assert set(registry.METHOD_NAMES) <= {run.method.name for run in config.runs.values()}


def test_each_run_is_its_paper_configs_plan(fair):
  """Every field of a run equals its source paper config's (JoCoR's method and the Co-teaching forget rates apart);
  the merged run builds its method and stages, and every stage's optimiser parses."""
  arg, config = fair
  dataset, labels = arg.split(",")
  num_classes = 100 if dataset == "cifar100_n" else 10
  for name, run in config.runs.items():
    source = cifar_n_fair._source_config(name, dataset, labels)  # pylint: disable=protected-access
    for field, value in run.to_dict().items():
      if field == "augment":
        assert value == {**config.shared.augment.to_dict(), **source.augment.to_dict()}, name
      elif field != "method" or name not in ("jocor", "coteaching", "coteaching_plus"):
        assert value == source[field].to_dict() if hasattr(source[field], "to_dict") else value == source[field], name
    merged = comparison.merged_run_config(config, name, 0)
    spec = registry.get(merged.method.name)
    transition = np.eye(num_classes)  # loss correction and T-Revision: what a warm-up stage gives the run
    context = spec_lib.Context(num_classes, merged.num_epochs, transition, num_examples=47500)
    registry.build(merged.method, context)
    for stage in spec_lib.check_stages(spec.stages(merged.method), spec.name):
      settings_lib.optimizer_settings(stages_lib.config_of_stage(merged, stage).optimizer)


def test_the_coteaching_family_is_told_the_published_rate(fair):
  arg, config = fair
  rate = cifar_n_fair.NOISE_RATES[tuple(arg.split(","))]
  for name in ("coteaching", "coteaching_plus", "jocor"):
    assert config.runs[name].method.forget_rate == rate
  assert config.runs.coteaching_plus.method.plus and not config.runs.coteaching.method.plus
  assert config.runs.jocor.method.co_lambda == 0.9


@pytest.mark.parametrize(
  "arg,message",
  [
    ("cifar10,worst", r"unknown dataset 'cifar10'.*allowed: cifar10_n, cifar100_n"),
    ("cifar10_n,noisy", r"unknown labels 'noisy' for cifar10_n.*allowed: worst, aggregate, random1"),
    ("cifar10_n", r"must be DATASET,LABELS"),
  ],
)
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    cifar_n_fair.get_config(arg)


def test_docstring_commands_load():
  found = re.findall(r"--config=experiments/configs/cifar_n_fair\.py:([\w,]+)", cifar_n_fair.__doc__)
  assert len(found) == 2
  for arg in found:
    cifar_n_fair.get_config(arg)
  assert cifar_n_fair.get_config().to_dict() == cifar_n_fair.get_config(cifar_n_fair.DEFAULT).to_dict()


def test_smoke_two_rows():
  """Cross entropy and Peer Loss on mock CIFAR-10N worst: 1 epoch each, one seed, batches of 16, 40 examples (8 of
  them validation, scored on their human labels), a ResNet of two 1-block stages."""
  config = cifar_n_fair.get_config("cifar10_n,worst")
  config.shared.seeds = (0,)
  config.shared.num_devices = 1
  config.shared.checkpoint_every = 0
  config.shared.dataset_kwargs.validation_size = 8
  config.shared.model.kwargs = {"widths": (4, 8), "blocks_per_stage": (1, 1)}
  for name in ("ce", "peer_loss"):
    config.runs[name].num_epochs = 1
    config.runs[name].batch_size = 16
  with tfds.testing.mock_data(num_examples=40):
    out = comparison.run(config, only=["ce", "peer_loss"])
  assert set(out["mean_std"]) == {"ce", "peer_loss"}
  for name in ("ce", "peer_loss"):
    (summary,) = out["per_seed"][name]
    assert np.isfinite(summary["last_test_accuracy"]) and "test_accuracy_at_best_val" in summary
