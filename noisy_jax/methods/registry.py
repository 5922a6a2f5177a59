"""The methods by name: `make(config.method, ...)` builds the `noisy_jax.train.method.Method` that the trainer runs.

Each method is one module (two for DivideMix and ELR+, whose epoch programs have their own module) with a `SPEC`
(noisy_jax.methods.spec.MethodSpec): its config fields, its builder, its tiny test runs. The fields of each method,
with their meaning and defaults, are in its module's docstring and its builder's signature:

  loss                noisy_jax.methods.plain_loss          any loss of noisy_jax.core.losses (+ label smoothing)
  truncated_lq        noisy_jax.methods.truncated_lq        Zhang & Sabuncu, NeurIPS 2018 (ACS pruning)
  joint_optimization  noisy_jax.methods.joint_optimization  Tanaka et al., CVPR 2018 (label table; stage 2)
  encouraging         noisy_jax.methods.encouraging         Zhao et al., AAAI 2022
  loss_correction     noisy_jax.methods.loss_correction     Patrini et al., CVPR 2017 (forward / backward)
  elr                 noisy_jax.methods.elr                 Liu et al., NeurIPS 2020
  sop                 noisy_jax.methods.sop                 Liu et al., ICML 2022 (and SOP+'s balance term)
  coteaching          noisy_jax.methods.coteaching          Han et al., NeurIPS 2018; Co-teaching+ (Yu et al., 2019)
  dividemix           noisy_jax.methods.dividemix_train     Li et al., ICLR 2020
  elr_plus            noisy_jax.methods.elr_plus_train      Liu et al., NeurIPS 2020
  jocor               noisy_jax.methods.jocor               Wei et al., CVPR 2020
  disc                noisy_jax.methods.disc                Li et al., CVPR 2023 (two views, mixup)
  promix              noisy_jax.methods.promix_train        Xiao et al., IJCAI 2023 (two networks, pseudo head)
  t_revision          noisy_jax.methods.t_revision          Xia et al., NeurIPS 2019 (CE, reweighting, revision of T)
  pes                 noisy_jax.methods.pes                 Bai et al., NeurIPS 2021 (warm-up, refines, selection)
  pes_semi            noisy_jax.methods.pes_semi            Bai et al., NeurIPS 2021 (PES, then MixMatch)
  gls                 noisy_jax.methods.gls                 Wei et al., ICML 2022 (CE warm-up, then +/- label smoothing)
  peer_loss           noisy_jax.methods.peer_loss           Liu & Guo, ICML 2020 (peers from the whole split)
  cal                 noisy_jax.methods.cal                 Zhu et al., CVPR 2021 (sieve warm-up, then covariance term)
  f_divergence        noisy_jax.methods.f_divergence        Wei & Liu, ICLR 2021 (CE warm-up, then D_f with peers)
  cores               noisy_jax.methods.cores               Cheng et al., ICLR 2021 (CORES² phase 1: the sample sieve)
  volminnet           noisy_jax.methods.volminnet           Li et al., ICML 2021 (T learned with the net, log-det)

A new method is a module with its SPEC and one line in SPECS below.
"""

from __future__ import annotations

from noisy_jax.core import _checks
from noisy_jax.methods import cal
from noisy_jax.methods import cores
from noisy_jax.methods import coteaching
from noisy_jax.methods import disc
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import elr
from noisy_jax.methods import elr_plus_train
from noisy_jax.methods import encouraging
from noisy_jax.methods import f_divergence
from noisy_jax.methods import gls
from noisy_jax.methods import jocor
from noisy_jax.methods import joint_optimization
from noisy_jax.methods import loss_correction
from noisy_jax.methods import peer_loss
from noisy_jax.methods import pes
from noisy_jax.methods import pes_semi
from noisy_jax.methods import plain_loss
from noisy_jax.methods import promix_train
from noisy_jax.methods import sop
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import t_revision
from noisy_jax.methods import truncated_lq
from noisy_jax.methods import volminnet
from noisy_jax.train import method as method_lib

SPECS = {
  spec.name: spec
  for spec in (
    plain_loss.SPEC,
    truncated_lq.SPEC,
    joint_optimization.SPEC,
    encouraging.SPEC,
    loss_correction.SPEC,
    elr.SPEC,
    sop.SPEC,
    coteaching.SPEC,
    dividemix_train.SPEC,
    elr_plus_train.SPEC,
    jocor.SPEC,
    disc.SPEC,
    promix_train.SPEC,
    t_revision.SPEC,
    pes.SPEC,
    pes_semi.SPEC,
    gls.SPEC,
    peer_loss.SPEC,
    cal.SPEC,
    f_divergence.SPEC,
    cores.SPEC,
    volminnet.SPEC,
  )
}
METHOD_NAMES = tuple(SPECS)


def get(name: str) -> spec_lib.MethodSpec:
  """The spec of method `name` (ValueError naming the known ones otherwise)."""
  _checks.check_choice("method name", name, METHOD_NAMES)
  return SPECS[name]


def tiny_cases() -> dict[str, tuple[spec_lib.MethodSpec, dict]]:
  """{case name: (spec, overrides)} of every method's tiny test runs (MethodSpec.tiny), in registry order."""
  cases = {}
  for spec in SPECS.values():
    for case, overrides in spec.tiny.items():
      if case in cases:
        raise ValueError(f"tiny case {case!r} of method {spec.name!r} is also one of {cases[case][0].name!r}.")
      cases[case] = (spec, overrides)
  return cases


def make(
  method_config,
  *,
  num_classes: int,
  transition=None,
  num_epochs: int | None = None,
  num_examples: int | None = None,
) -> method_lib.Method:
  """Builds the Method of `config.method` (its fields: the method's module docstring).

  transition: for methods with `needs_transition` (loss correction), the resolved [C, C] matrix
    (`noisy_jax.experiment.runs.correction_transition`).
  num_epochs: the run's epochs, for methods whose schedule spans the run (Co-teaching's forget rate).
  num_examples: the training split's size, for methods whose state starts from it (DISC).
  """
  context = spec_lib.Context(
    num_classes=int(num_classes),
    num_epochs=num_epochs,
    transition=transition,
    num_examples=None if num_examples is None else int(num_examples),
  )
  return build(method_config, context)


def build(method_config, context: spec_lib.Context) -> method_lib.Method:
  """The Method of `config.method` in `context` (its fields checked against the spec's)."""
  spec = get(method_config.name)
  allowed = {"name", *spec.fields}
  unknown = sorted(set(method_config.keys()) - allowed)
  if unknown:
    raise ValueError(
      f"Unknown field(s) {unknown} in config.method for method {spec.name!r}; allowed: {sorted(allowed)}."
    )
  return spec.build(method_config, context)
