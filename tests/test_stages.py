"""A method's stages (noisy_jax.methods.spec.Stage): what makes a run, and what each registered method declares."""

import ml_collections
import pytest

from noisy_jax.methods import joint_optimization
from noisy_jax.methods import loss_correction
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib


def _method_config(overrides: dict) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(overrides.get("method", {"name": "cross_entropy"}))


@pytest.mark.parametrize("case", sorted(registry.tiny_cases()))
def test_every_tiny_case_declares_stages_that_make_a_run(case):
  spec, overrides = registry.tiny_cases()[case]
  method_config = _method_config(overrides)
  stages = spec_lib.check_stages(spec.stages(method_config), spec.name)
  assert [s.name for s in stages if s.build is None] == ["stage1"]


def test_joint_optimization_trains_stage2_on_stage1s_labels_unless_told_not_to():
  two = joint_optimization.stages(ml_collections.ConfigDict({"name": "joint_optimization"}))
  assert [s.name for s in two] == ["stage1", "stage2"]
  assert two[0].scores_labels and not two[0].delivers
  assert two[1].delivers and two[1].table == "previous" and two[1].config_section == "stage2"
  assert two[1].key_stream == 1
  one = joint_optimization.stages(ml_collections.ConfigDict({"name": "joint_optimization", "stage2": False}))
  assert one == (spec_lib.OWN_STAGE,)


@pytest.mark.parametrize("source, names", [("known", ["stage1"]), ("estimated", ["estimate", "stage1"])])
def test_loss_correction_estimates_its_transition_first_only_when_asked(source, names):
  stages = loss_correction.stages(ml_collections.ConfigDict({"name": "loss_correction", "transition": source}))
  assert [s.name for s in stages] == names
  if source == "estimated":
    assert stages[0].auxiliary and stages[0].product is loss_correction.estimated_transition


@pytest.mark.parametrize(
  "stages, problem",
  [
    ((spec_lib.Stage("a", delivers=True, scores_labels=True), spec_lib.Stage("a", build=len)), "repeated names"),
    ((spec_lib.Stage("a", scores_labels=True),), "that delivers"),
    ((spec_lib.Stage("a", delivers=True),), "that scores labels"),
    ((spec_lib.Stage("a", build=len, delivers=True, scores_labels=True),), "trains the method itself"),
    ((spec_lib.OWN_STAGE, spec_lib.Stage("b", delivers=True, build=len)), "that delivers"),
    ((spec_lib.Stage("a", table="previous", delivers=True, scores_labels=True),), "previous stage's table"),
    ((spec_lib.Stage("a", auxiliary=True, delivers=True, scores_labels=True),), "auxiliary stage delivers"),
  ],
)
def test_stages_that_make_no_run_are_refused_with_the_reason(stages, problem):
  with pytest.raises(ValueError, match=problem):
    spec_lib.check_stages(stages, "m")


def test_a_stage_table_start_outside_the_choices_is_refused():
  with pytest.raises(ValueError, match=r"table='labels'; allowed: \('noisy', 'previous'\)"):
    spec_lib.Stage("a", table="labels")


@pytest.mark.parametrize("field, value", [("network", "previous"), ("product_from", "best")])
def test_a_stage_network_or_product_source_outside_the_choices_is_refused(field, value):
  with pytest.raises(ValueError, match=f"{field}={value!r}; allowed"):
    spec_lib.Stage("a", **{field: value})


def test_the_first_stage_cannot_start_from_a_previous_network():
  with pytest.raises(ValueError, match="previous stage's table or network"):
    spec_lib.check_stages((spec_lib.Stage("a", network="previous_best", delivers=True, scores_labels=True),), "m")
