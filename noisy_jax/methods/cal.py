"""CAL (Zhu et al., CVPR 2021, arXiv 2012.11854): a sieve warm-up, then the covariance-corrected loss, fresh network.

The pure pieces, their formulas and the original code's lines are noisy_jax.core.cal's (UCSC-REAL/CAL@bdb376b; its
file abbreviations PL, PR, EX, DS, AS are used here). The run (`stages`), as the code's two runs
(run_exptPRLD_C10_CAL.py "RC10" with lossfunc 'crossentropy', then with 'crossentropy_CAL'):

  stage     network starts   config             each step (global batch of B rows, valid v, noisy labels y)
  'warmup'  fresh            config.warmup      L = mean_n r_n (`core.cal.peer_regularised_ce`, prior: sqrt of the
                                                noisy class frequencies renormalised, EX:104-105, times prior_scale),
                                                alpha = seg_alpha(warmup_alpha_list, warmup_milestones) of the stage's
                                                epoch; the sieve (`core.cal.sieve`) of the step's own logits writes
                                                soft_labels[n] = w_n one_hot(d_n) (PR:109-128)
  'stage1'  fresh (RC10      the run's own      L = mean_n r_n - cal (`core.cal.cal_term`; prior: the noisy class
            is_load False)   (num_epochs,       frequencies, EX:101, times prior_scale), alpha = seg_alpha(alpha_list,
                             optimizer)         milestones); d_n = argmax, w_n = sum of the warm-up's soft label row;
                                                T_hat, P, the indicator counts from the whole table at each epoch's
                                                start; LM of the previous epoch (zero at first) in
                                                TrainState.method_state[LOSS_MEAN], replaced after each epoch by the
                                                epoch's summed records / counts (EX:184-214)

The sieve is the one of the warm-up's last epoch: the code saves the sieve of its warm-up epoch 65 (0-based, EX:220-222,
of a 100-epoch warm-up whose later epochs are never used); the CIFAR-N replication (KlemenVovk/noisy-labels
CAL/cal.py:126-135) of its epoch warmup_epochs - 1 = 64. A warm-up of 66 (or 65) epochs is that. The per-example
state is the stage table: the CAL stage starts from a table holding the warm-up's soft labels (spec.Stage table
'previous'), its noisy labels the run's; an example the sieve left unweighted (score exactly at the threshold) has a
zero row: d 0, w 0, as the code's.

Each epoch is `core.peer_loss`'s program shape (peer_loss.make_epoch_fn): the shared program's batch order
(`epoch.epoch_batches` of the epoch key), one train-mode forward of each batch (the code's peer term reuses the batch's
outputs, PR:93-94), the batch split over the mesh's devices with the sums psum-ed, one update (`update.update`) with the
schedule count (epoch - 1) x S + s of the stage.

config.method fields (defaults: the code's CIFAR-10 values; the paper states no other):
  alpha_list, milestones                the CAL stage's SegAlpha (RC10:59-60: (0, 1, 1), (10, 40, 80))
  warmup_alpha_list, warmup_milestones  the warm-up's (RC10:55-56: (0, 2, 2), (10, 40, 80); CIFAR-100's
                                        run_exptPRLD_C100_CAL.py:55: (0, 1, 1))
  sieve_threshold                       -8 (PR:123-124)
  log_epsilons                          'code' (default: the offsets inside the logs, 1e-8 for the cross entropy and
                                        the sieve, 1e-5 for the prior and covariance terms, PL:21, 34, 56, PR:111: the
                                        threshold -8 is set for them) or 'exact' (log_softmax everywhere)
  prior_scale                           1 (the code's CIFAR-100 runs: 10, EX:107-108, the paper's alpha x 10 moved into
                                        the prior: run_exptPRLD_C100_CAL.py:55's comment)
  lr_alpha_division                     False (default: the run's optimiser as configured, as the replication's plain
                                        StepLR) or True (the code's StepLR divides each epoch's rate by 1 + alpha,
                                        models/schedulers/lr_scheduler.py:36-45: each update scaled by 1 / (1 + alpha),
                                        the same for SGD with momentum and weight decay, whose momentum buffer does not
                                        hold the rate)

Differences from the original code:
- The sieve and the loss means are those of the stage's train-mode passes over augmented batches, as the code's; the
  batch order and augmentation are the trainer's. The covariance term is computed per example (`core.cal`), not from
  the [C, C, N] T_mat, which is never built (tests/test_cal.py compares the two).
- The CAL stage's noisy prior is the class frequency of the run's noisy labels (EX:101, the dataset's); the code's
  CIFAR-100 x 10 is `prior_scale`. The replication uses x 1 for CIFAR-100 (its cifar100n/CAL.py).
- Model selection and evaluation are the trainer's (the code keeps the best test accuracy, baseexperiment.py:139-142).
- A row-sharded label table and streamed inputs are refused.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import flax
import jax
from jax import lax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import cal as cal_core
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

PHASES = ("warmup", "cal")
LOSS_MEAN = "cal_loss_mean"  # TrainState.method_state's [C, C] LM of the CAL stage
RECORD = "cal_record"  # the epoch's summed records [C, C] beside the running totals


@dataclasses.dataclass(frozen=True)
class CalSettings:
  """CAL's settings (module docstring)."""

  alpha_list: tuple = (0.0, 1.0, 1.0)
  milestones: tuple = (10, 40, 80)
  warmup_alpha_list: tuple = (0.0, 2.0, 2.0)
  warmup_milestones: tuple = (10, 40, 80)
  sieve_threshold: float = cal_core.SIEVE_THRESHOLD
  log_epsilons: str = "code"
  prior_scale: float = 1.0
  lr_alpha_division: bool = False

  def __post_init__(self):
    for prefix in ("", "warmup_"):
      alphas, milestones = getattr(self, prefix + "alpha_list"), getattr(self, prefix + "milestones")
      for alpha in alphas:
        _checks.check_range(prefix + "alpha_list entry", alpha, 0.0, math.inf, high_open=True)
      try:
        cal_core.seg_alpha(alphas, milestones, 1)
      except (ValueError, TypeError) as error:
        raise ValueError(f"{prefix}alpha_list / {prefix}milestones: {error}") from None
    _checks.check_range("sieve_threshold", self.sieve_threshold, -math.inf, math.inf, low_open=True, high_open=True)
    _checks.check_choice("log_epsilons", self.log_epsilons, cal_core.LOG_EPSILONS)
    _checks.check_range("prior_scale", self.prior_scale, 0.0, math.inf, low_open=True, high_open=True)
    if not isinstance(self.lr_alpha_division, bool):
      raise ValueError(f"lr_alpha_division={self.lr_alpha_division!r} must be True or False.")


def epoch_alpha(settings: CalSettings, phase: str, epoch: int) -> float:
  """alpha of the stage's 1-based `epoch` in `phase` ('warmup' or 'cal'): SegAlpha of its lists."""
  _checks.check_choice("phase", phase, PHASES)
  prefix = "warmup_" if phase == "warmup" else ""
  schedule = cal_core.seg_alpha(
    getattr(settings, prefix + "alpha_list"), getattr(settings, prefix + "milestones"), epoch
  )
  return float(schedule[-1])


def distilled_rows(soft_labels):
  """(d [..] int32, w [..]) of the warm-up's soft-label rows w one_hot(d) (a zero row: d 0, w 0)."""
  return jnp.argmax(soft_labels, axis=-1).astype(jnp.int32), jnp.sum(soft_labels, axis=-1)


def epoch_globals(table, *, phase: str, settings: CalSettings) -> dict:
  """{'prior' [C], 'transition' [C, C], 'p_distill' [C], 'count' [C]} of the whole (replicated) table: the warm-up's
  sqrt prior and zeros, or the CAL stage's prior and `core.cal.distilled_statistics` (module docstring)."""
  num_classes = table.num_classes
  prior = cal_core.noisy_prior(table.noisy_labels, num_classes, sqrt=phase == "warmup") * settings.prior_scale
  if phase == "warmup":
    zeros = jnp.zeros((num_classes,), prior.dtype)
    return {
      "prior": prior,
      "transition": jnp.zeros((num_classes, num_classes), prior.dtype),
      "p_distill": zeros,
      "count": zeros,
    }
  distilled, weights = distilled_rows(table.soft_labels)
  return {"prior": prior, **cal_core.distilled_statistics(distilled, weights, table.noisy_labels, num_classes)}


def _inputs(images, rows, key, normalize, augment):
  x = normalize(jnp.take(images, rows, axis=0))
  return x if augment is None else augment(key, x, rows)


def _scaled_update(old_params, new_params, scale):
  """old + scale (new - old): an update with its learning rate times `scale`."""
  return jax.tree.map(lambda o, n: (o + (n - o) * scale.astype(n.dtype)).astype(n.dtype), old_params, new_params)


def _write_sieve(table, rows, valid, logits, noisy, settings, axis):
  """soft_labels[rows] = w one_hot(d) of the global batch's sieve (the devices' rows all-gathered)."""
  eps = cal_core.epsilons(settings.log_epsilons)["sieve"]
  distilled, weights = cal_core.sieve(lax.stop_gradient(logits), noisy, threshold=settings.sieve_threshold, epsilon=eps)
  values = jax.nn.one_hot(distilled, table.num_classes, dtype=table.soft_labels.dtype)
  values = values * weights.astype(values.dtype)[:, None]
  values = lax.all_gather(values, axis, tiled=True)
  targets = jnp.where(valid, rows, table.num_examples)
  return table.replace(soft_labels=table.soft_labels.at[targets].set(values, mode="drop"))


def _network_step_fn(*, settings: CalSettings, phase: str, local: int, normalize, augment, axis: str):
  """The step of `make_epoch_fn` (module docstring): one update of the global batch, the warm-up's sieve written, the
  epoch's totals (with the CAL stage's records) carried."""
  eps = cal_core.epsilons(settings.log_epsilons)

  def network_step(state, table, totals, images, rows, valid, key, step, count, alpha, scale, glob, *, m, shard_table):
    del m, shard_table
    d, dtype = lax.axis_index(axis), precision.float_dtype()
    mine = lambda a: lax.dynamic_slice_in_dim(a, d * local, local)
    my_rows, my_valid = mine(rows), mine(valid)
    v = my_valid.astype(dtype)
    x = _inputs(images, my_rows, epoch_lib.augmentation_key(key, step), normalize, augment)
    noisy = jnp.take(table.noisy_labels, my_rows)
    labels = jax.nn.one_hot(noisy, table.num_classes, dtype=dtype)
    if phase == "cal":
      distilled, weights = distilled_rows(jnp.take(table.soft_labels, my_rows, axis=0))
      ind = v * cal_core.indicator(distilled, weights, noisy, glob["transition"]).astype(dtype)

    def loss_fn(params):
      logits, stats = dividemix_train.train_forward(state, params, state.batch_stats, x)
      per_example = cal_core.peer_regularised_ce(
        logits, labels, glob["prior"], alpha=alpha, ce_epsilon=eps["ce"], prior_epsilon=eps["prior"]
      )
      total, rows_count = lax.psum(jnp.sum(v * per_example), axis), lax.psum(jnp.sum(v), axis)
      loss = total / jnp.maximum(rows_count, 1.0)
      record = jnp.zeros((table.num_classes, table.num_classes), logits.dtype)
      if phase == "cal":
        neg_log = cal_core.neg_log_probs(logits, eps["cal"])
        loss = loss - cal_core.cal_term(
          neg_log, noisy, distilled, ind, glob["transition"], glob["p_distill"], state.method_state[LOSS_MEAN], axis
        )
        record = lax.psum(cal_core.cal_record(neg_log, distilled, ind), axis)
      return loss, (stats, (logits, record))

    new_state, loss, (logits, record), _ = update_lib.update(state, loss_fn, axis_name=axis, schedule_count=count)
    if settings.lr_alpha_division:
      new_state = new_state.replace(params=_scaled_update(state.params, new_state.params, scale))
    if phase == "warmup":
      table = _write_sieve(table, rows, valid, logits, noisy, settings, axis)
    hits = (jnp.argmax(logits, -1) == noisy) & my_valid
    correct = lax.psum(jnp.sum(hits).astype(dtype), axis)
    examples = lax.psum(jnp.sum(my_valid).astype(dtype), axis)
    totals = {**pair_epochs.add_to_totals(totals, loss, correct, examples), RECORD: totals[RECORD] + record}
    return new_state, table, totals

  return network_step


def make_epoch_fn(
  mesh,
  *,
  settings: CalSettings,
  phase: str,
  batch_size: int,
  num_examples: int,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
  **unused,
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of CAL's `phase` (module docstring)."""
  if unused.get("source") is not None:
    raise ValueError("CAL reads its batches from the resident training split: streamed inputs are not supported.")
  _checks.check_choice("phase", phase, PHASES)
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"CAL splits batch_size={batch_size} over {num_devices} device(s): it must be divisible.")
  local = batch_size // num_devices
  steps = math.ceil(num_examples / batch_size)

  network_step = _network_step_fn(
    settings=settings, phase=phase, local=local, normalize=normalize, augment=augment, axis=axis
  )
  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=9, compiler_options=compiler_options
  )
  batches_fn = jax.jit(lambda key: epoch_lib.epoch_batches(key, num_examples, batch_size))
  globals_fn = jax.jit(lambda table: epoch_globals(table, phase=phase, settings=settings))
  finish_fn = jax.jit(
    lambda state, record, count: state.replace(
      method_state=flax.core.FrozenDict({LOSS_MEAN: cal_core.loss_mean(record, count).astype(record.dtype)})
    )
  )

  def epoch_fn(state, table, images, key, epoch, **inside):
    pair_epochs.refuse_inside_epoch("CAL", inside)
    if table_sharding.is_sharded(table):
      raise ValueError("CAL reads its distilled labels from the whole table: set label_table_sharding='replicated'.")
    if images is None:
      raise ValueError("CAL reads its batches from the resident training split: images must not be None.")
    alpha = epoch_alpha(settings, phase, int(epoch))
    order, valid = batches_fn(key)
    glob = globals_fn(table)
    num_classes = table.num_classes
    totals = pair_epochs.zero_totals(mesh)
    totals[RECORD] = jax.device_put(
      jnp.zeros((num_classes, num_classes), precision.float_dtype()), jax.sharding.NamedSharding(mesh, P())
    )
    alpha_arg = np.asarray(alpha, precision.float_dtype())
    scale_arg = np.asarray(1.0 / (1.0 + alpha), precision.float_dtype())
    for step in range(steps):
      count = np.int32((int(epoch) - 1) * steps + step)
      state, table, totals = program(False)(
        state,
        table,
        totals,
        np.int32(0),
        images,
        order[step],
        valid[step],
        key,
        np.int32(step),
        count,
        alpha_arg,
        scale_arg,
        glob,
      )
    if phase == "cal":
      state = finish_fn(state, totals[RECORD], glob["count"])
    metrics = epoch_lib.mean_metrics(totals, "train_accuracy_given")
    return state, table, {**metrics, "cal_alpha": alpha}

  return epoch_fn


def _with_loss_mean(state, num_classes: int):
  """The CAL stage's state: method_state {LOSS_MEAN: zeros [C, C]} (EX:30)."""
  zeros = jnp.zeros((num_classes, num_classes), precision.float_dtype())
  return state.replace(method_state=flax.core.FrozenDict({LOSS_MEAN: zeros}))


def method(settings: CalSettings, *, phase: str = "cal", num_classes: int) -> method_lib.Method:
  """CAL's `phase` as a method: its epoch program (`make_epoch_fn`); the objective (cross entropy) is the shared
  program's, used only where a caller runs it (evaluation needs none)."""
  _checks.check_choice("phase", phase, PHASES)

  own_state = {"init_state": lambda state: _with_loss_mean(state, num_classes)} if phase == "cal" else {}
  return method_lib.Method(
    name="cal" if phase == "cal" else "cal_warmup",
    objective=plain_loss.cross_entropy_objective(),
    program=method_lib.own_program(functools.partial(make_epoch_fn, settings=settings, phase=phase), **own_state),
  )


def settings_of(method_config) -> CalSettings:
  """CalSettings from config.method (ValueError naming a bad value)."""
  floats = lambda values: tuple(float(a) for a in values)
  ints = lambda values: tuple(int(m) for m in values)
  return CalSettings(
    **spec_lib.given(
      method_config,
      alpha_list=floats,
      milestones=ints,
      warmup_alpha_list=floats,
      warmup_milestones=ints,
      sieve_threshold=float,
      log_epsilons=str,
      prior_scale=float,
    ),
    **{k: method_config[k] for k in ("lr_alpha_division",) if k in method_config},
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  return method(settings_of(method_config), phase="cal", num_classes=context.num_classes)


def _build_warmup(method_config, context: spec_lib.Context) -> method_lib.Method:
  return method(settings_of(method_config), phase="warmup", num_classes=context.num_classes)


# The warm-up: peer-regularised CE with the sieve, from a fresh network, config.warmup's epochs and optimiser.
WARMUP = spec_lib.Stage("warmup", key_stream=0, build=_build_warmup, config_section="warmup")
# CAL's own stage: a fresh network (RC10 "--is_load": False), the warm-up's distilled labels in its table.
OWN = spec_lib.Stage("stage1", key_stream=1, table="previous", network="fresh", delivers=True, scores_labels=True)


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The warm-up with the sieve, then CAL (module docstring)."""
  settings_of(method_config)
  return (WARMUP, OWN)


SPEC = spec_lib.MethodSpec(
  name="cal",
  fields=(
    "alpha_list",
    "milestones",
    "warmup_alpha_list",
    "warmup_milestones",
    "sieve_threshold",
    "log_epsilons",
    "prior_scale",
    "lr_alpha_division",
  ),
  build=_build,
  # 2 warm-up epochs, then the run's 3; milestones (1, 2, 3) make alpha > 0 from each stage's third epoch on.
  tiny={
    "cal": {
      "method": {
        "name": "cal",
        "milestones": (1, 2, 3),
        "warmup_milestones": (1, 2, 3),
        "sieve_threshold": -0.1,
      },
      "warmup": {"num_epochs": 2},
    },
    # The code's learning-rate division and exact logs.
    "cal_code_lr": {
      "method": {
        "name": "cal",
        "milestones": (1, 2, 3),
        "warmup_milestones": (1, 2, 3),
        "log_epsilons": "exact",
        "lr_alpha_division": True,
      },
      "warmup": {"num_epochs": 2},
    },
  },
  stages=stages,
)
