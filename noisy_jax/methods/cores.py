"""CORES² phase 1, the confidence-regularised sample sieve (Cheng et al., ICLR 2021, arXiv 2010.02347), as a method
with its own epoch program; the pure pieces are noisy_jax.core.cores's (its docstring: the formulas, the original
code's lines, the differences from it). Phase 2 (phase2/: UDA semi-supervised training on the sieved split) is not
implemented.

Each epoch e (1-based; loop epoch t = epochs_before + e - 1, 0-based as the code's) is the shared program's order of
the training split, `epoch.epoch_batches` with the epoch key: S = ceil(N / B) batches of B rows, the last filled up
with rows marked invalid. With beta = `core.cores.beta_at`(t), the sieve on when t >= sieve_warmup_epochs, and the
prior pi [C] of the epoch (below), step s:
  1. x = augment(normalise(images[rows])) with the shared program's key of the step; y = one-hot given labels [B, C]
     (the table's noisy_labels, never changed);
  2. one train-mode forward; l = `regularised_loss`(z, y, beta, pi or None) [B], l_sel = `sieve_margin`(z, y) [B],
     keep = `sieve_keep`(l_sel, sieve on) and valid; L = `sieved_batch_loss` (sum over kept / #kept, psum-ed over
     the devices);
  3. one optimiser step (`update.update`, the schedule's count set to t x S + s); with `divide_lr`, the step's change
     of the parameters multiplied by 1 / (1 + beta): the code's lr_plan[t] / (1 + f_beta(t)) (phase1.py:45-47) with the
     run's optimiser giving lr_plan (config.optimizer: its piecewise schedule). The optimiser's update is linear in its
     lr (SGD with momentum and coupled weight decay: -lr x buffer, the buffer independent of the lr; Adam likewise), so
     scaling the update is scaling the lr; the momentum buffer is untouched, as PyTorch's when its lr is set;
  4. the batch's l_sel and sieved-out flags written to the method rows (`SIEVE_MARGIN`, `SIEVED_OUT`), and the
     per-class counts of sieved-out valid rows (by given class) added to the epoch's totals (psum-ed).
After the epoch the prior of the next one is `updated_prior`(pi_0, N, counts) (phase1.py:211-212), pi_0 the given
labels' class frequencies over the N training rows (data/cifar.py:97-100), kept in `TrainState.method_state[PRIOR]`
(zeros before the first epoch: pi_0 then); checkpoints and resumes carry it.

Why an own epoch program: the prior is one [C] vector of the whole split that changes only at epoch ends, the
counts are sums over the epoch, and the lr is divided per epoch; the shared program's objective sees only its batch,
and its optimiser's schedule cannot divide by 1 + beta. This program is the peer-loss program's shape
(`pair_epochs.network_programs`, `update.update`) with the counts in its totals.

Label issues (Method.label_evidence): the last epoch's l_sel of each row: an issue where l_sel > 0 (the code's
get_noise_pred, phase1.py:36-42, the sieve's verdict whether or not the sieve was on), quality 1 / (1 + exp(l_sel)).

config.method fields (defaults: the code's):
  beta_warmup_epochs  10     epochs of beta 0 (loss.py:57)
  beta_ramp_epochs    30     epochs of np.linspace(0, beta_max, ramp) after them (loss.py:58)
  beta_max            2.0    beta from then on (loss.py:58-59)
  sieve_warmup_epochs 31     the first loop epochs that keep every row (loss.py:44: epoch <= 30, 0-based)
  use_prior           True   the CR term weighted by the prior (phase1.py:91); False: mean over classes (loss.py:36)
  sieve_mean          'uniform'  the sieve's threshold: the uniform mean of -log(p + 1e-8) (loss.py:34), or 'prior':
                             the prior-weighted one (core.cores's docstring)
  divide_lr           True   the lr divided by 1 + beta (phase1.py:47)

Differences from the original code: those of noisy_jax.core.cores; the code's optimiser is SGD without momentum or
weight decay (phase1.py:172) and the replication's SGD(momentum 0.9, weight decay 5e-4) whose LambdaLR multiplies its
base lr 0.1 by lr_plan[e] / (1 + f_beta(e)) (cores2_cifar10_clean.py:24-26): here the run's optimiser (the paper
config sets each). Validation rows (a carved split) are outside N, as the replication's (its prior over its training
split, cores2.py:62-71). A row-sharded label table and streamed inputs are refused.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
from jax import lax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import cores as cores_core
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

PRIOR = "prior"  # TrainState.method_state's entry: the noise prior of the next epoch [C] (zeros: pi_0)
SIEVE_MARGIN = "sieve_margin"  # method row: the last epoch's l_sel
SIEVED_OUT = "sieved_out"  # method row: 1 where the last epoch's sieve dropped the row
SIEVE_MEANS = ("uniform", "prior")


@dataclasses.dataclass(frozen=True)
class CoresSettings:
  """CORES²'s settings (module docstring: config.method fields).

  Attributes:
    beta_warmup_epochs, beta_ramp_epochs, beta_max: beta's schedule (core.cores.beta_at).
    sieve_warmup_epochs: the first loop epochs (0-based) in which the sieve keeps every row.
    use_prior: weight the CR term by the noise prior (else 1/C).
    sieve_mean: 'uniform' (the code's threshold) or 'prior'.
    divide_lr: divide the lr by 1 + beta.
    epochs_before: the run's clock at this stage's start (Context.epochs_before).
  """

  beta_warmup_epochs: int = cores_core.BETA_WARMUP_EPOCHS
  beta_ramp_epochs: int = cores_core.BETA_RAMP_EPOCHS
  beta_max: float = cores_core.BETA_MAX
  sieve_warmup_epochs: int = cores_core.SIEVE_WARMUP_EPOCHS
  use_prior: bool = True
  sieve_mean: str = "uniform"
  divide_lr: bool = True
  epochs_before: int = 0

  def __post_init__(self):
    cores_core.check_schedule(self.beta_warmup_epochs, self.beta_ramp_epochs, self.beta_max)
    for name in ("sieve_warmup_epochs", "epochs_before"):
      value = getattr(self, name)
      if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name}={value!r} must be an integer >= 0.")
    for name in ("use_prior", "divide_lr"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name}={getattr(self, name)!r} must be True or False.")
    _checks.check_choice("sieve_mean", self.sieve_mean, SIEVE_MEANS)

  def beta(self, loop_epoch: int) -> float:
    return cores_core.beta_at(loop_epoch, self.beta_warmup_epochs, self.beta_ramp_epochs, self.beta_max)

  def lr_factor(self, loop_epoch: int) -> float:
    """1 / (1 + beta) with divide_lr, else 1."""
    return 1.0 / (1.0 + self.beta(loop_epoch)) if self.divide_lr else 1.0

  def sieve_on(self, loop_epoch: int) -> bool:
    return int(loop_epoch) >= self.sieve_warmup_epochs


def init_rows(num_rows: int) -> dict:
  """The method rows before the first epoch: margin 0, nothing sieved out."""
  dtype = precision.float_dtype()
  return {SIEVE_MARGIN: jnp.zeros((num_rows,), dtype), SIEVED_OUT: jnp.zeros((num_rows,), dtype)}


def with_prior(state, num_classes: int):
  """`state` with method_state {PRIOR: zeros [C]} (zeros: the first epoch uses pi_0)."""
  return state.replace(method_state={PRIOR: jnp.zeros((num_classes,), precision.float_dtype())})


def epoch_prior(stored, given, num_classes: int) -> np.ndarray:
  """The prior of this epoch [C] float64: `stored` (method_state[PRIOR]) or, while it is zeros, pi_0 of `given`."""
  stored = np.asarray(stored, np.float64)
  return stored if stored.any() else cores_core.class_prior(given, num_classes)


def batch_objective(logits, labels, valid, prior, *, settings: CoresSettings, beta, sieve_on, axis_name=None):
  """(L, (l_sel [B], keep [B])) of one batch (module docstring, step 2): logits and labels [B, C], valid [B],
  prior [C]; beta and sieve_on traced allowed."""
  per_example = cores_core.regularised_loss(logits, labels, beta=beta, prior=prior if settings.use_prior else None)
  weights = prior if settings.sieve_mean == "prior" else None
  margin = cores_core.sieve_margin(lax.stop_gradient(logits), labels, weights=weights)
  keep = jnp.logical_and(cores_core.sieve_keep(margin, active=sieve_on), valid)
  return cores_core.sieved_batch_loss(per_example, keep, axis_name=axis_name), (margin, keep)


def _scaled(before, after, factor):
  """before + factor (after - before) per leaf; `after` itself where factor is 1."""
  return jax.tree.map(lambda a, b: jnp.where(factor == 1, b, a + factor.astype(a.dtype) * (b - a)), before, after)


def _write_rows(table, rows, valid, margin, keep, axis):
  """The global batch's l_sel and sieved-out flags into the table's method rows (invalid rows dropped)."""
  gather = lambda a: lax.all_gather(a, axis, tiled=True)
  rows, valid, margin, keep = gather(rows), gather(valid), gather(margin), gather(keep)
  target = jnp.where(valid, rows, table.noisy_labels.shape[0])
  dtype = table.method_rows[SIEVE_MARGIN].dtype
  return label_table_lib.write_rows(
    table, target, {SIEVE_MARGIN: margin.astype(dtype), SIEVED_OUT: jnp.logical_not(keep).astype(dtype)}
  )


def zero_totals(mesh, num_classes: int) -> dict:
  """The epoch's running sums (pair_epochs.zero_totals) and the per-class counts of sieved-out rows [C]."""
  counts = jax.device_put(jnp.zeros((num_classes,), precision.float_dtype()), NamedSharding(mesh, P()))
  return {**pair_epochs.zero_totals(mesh), SIEVED_OUT: counts}


def make_epoch_fn(
  mesh,
  *,
  settings: CoresSettings,
  batch_size: int,
  num_examples: int,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
  **unused,
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of CORES² (module docstring). State and
  table are donated; a row-sharded table or streamed inputs are refused."""
  if unused.get("source") is not None:
    raise ValueError("CORES² reads the resident training split: streamed inputs are not supported.")
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"CORES² splits batch_size={batch_size} over {num_devices} device(s): it must be divisible.")
  local = batch_size // num_devices
  steps = math.ceil(num_examples / batch_size)

  def network_step(state, table, totals, images, rows, valid, key, step, count, prior, beta, sieve_on, factor, **_):
    d, dtype = lax.axis_index(axis), precision.float_dtype()
    my_rows = lax.dynamic_slice_in_dim(rows, d * local, local)
    my_valid = lax.dynamic_slice_in_dim(valid, d * local, local)
    x = normalize(jnp.take(images, my_rows, axis=0))
    if augment is not None:
      x = augment(epoch_lib.augmentation_key(key, step), x, my_rows)
    given = jnp.take(table.noisy_labels, my_rows)
    labels = jax.nn.one_hot(given, table.num_classes, dtype=dtype)

    def loss_fn(params):
      logits, stats = dividemix_train.train_forward(state, params, state.batch_stats, x)
      loss, sieve = batch_objective(
        logits, labels, my_valid, prior, settings=settings, beta=beta, sieve_on=sieve_on, axis_name=axis
      )
      return loss, (stats, (logits, sieve))

    new_state, loss, (logits, (margin, keep)), _ = update_lib.update(
      state, loss_fn, axis_name=axis, schedule_count=count
    )
    new_state = new_state.replace(params=_scaled(state.params, new_state.params, factor))
    table = _write_rows(table, my_rows, my_valid, margin, keep, axis)
    dropped = jnp.logical_and(my_valid, jnp.logical_not(keep)).astype(dtype)
    correct = lax.psum(jnp.sum((jnp.argmax(logits, -1) == given) & my_valid).astype(dtype), axis)
    examples = lax.psum(jnp.sum(my_valid).astype(dtype), axis)
    sieved = totals[SIEVED_OUT] + lax.psum(jnp.sum(dropped[:, None] * labels, axis=0), axis)
    return new_state, table, {**pair_epochs.add_to_totals(totals, loss, correct, examples), SIEVED_OUT: sieved}

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=10, compiler_options=compiler_options
  )
  batches_fn = jax.jit(lambda key: epoch_lib.epoch_batches(key, num_examples, batch_size))

  def epoch_fn(state, table, images, key, epoch, **inside):
    pair_epochs.refuse_inside_epoch("CORES²", inside)
    if table_sharding.is_sharded(table):
      raise ValueError("CORES² writes its sieve to a replicated label table: set label_table_sharding='replicated'.")
    if images is None:
      raise ValueError("CORES² reads the resident training split: images must not be None.")
    loop_epoch = settings.epochs_before + int(epoch) - 1
    num_classes = table.num_classes
    given = np.asarray(distributed.host_value(table.noisy_labels))[:num_examples]
    prior = epoch_prior(distributed.host_value(state.method_state[PRIOR]), given, num_classes)
    dtype = precision.float_dtype()
    beta, factor, sieve_on = settings.beta(loop_epoch), settings.lr_factor(loop_epoch), settings.sieve_on(loop_epoch)
    replicated = (prior.astype(dtype), np.asarray(beta, dtype), np.asarray(sieve_on), np.asarray(factor, dtype))
    order, valid = batches_fn(key)
    totals = zero_totals(mesh, num_classes)
    for step in range(steps):
      count = np.int32(loop_epoch * steps + step)
      state, table, totals = program(False)(
        state, table, totals, np.int32(0), images, order[step], valid[step], key, np.int32(step), count, *replicated
      )
    sieved = np.asarray(distributed.host_value(totals[SIEVED_OUT]), np.float64)
    initial = cores_core.class_prior(given, num_classes)
    next_prior = cores_core.updated_prior(initial, num_examples, sieved)
    placed = jax.device_put(jnp.asarray(next_prior, dtype), NamedSharding(mesh, P()))
    state = state.replace(method_state={PRIOR: placed})
    metrics = epoch_lib.mean_metrics(totals, "train_accuracy_given")
    extra = {"cores_beta": beta, "cores_lr_factor": factor, "cores_sieved_fraction": float(sieved.sum()) / num_examples}
    return state, table, {**metrics, **extra}

  return epoch_fn


def method(settings: CoresSettings, num_classes: int) -> method_lib.Method:
  """CORES² as a method: its epoch program (`make_epoch_fn`), its prior in TrainState.method_state, its sieve in the
  method rows and as label evidence; the objective (cross entropy) is the shared program's, used only where a caller
  runs it (evaluation needs none)."""
  if not isinstance(settings, CoresSettings):
    raise ValueError(f"settings={settings!r} must be a CoresSettings.")

  def label_evidence(table):
    margin = np.asarray(table.method_rows[SIEVE_MARGIN], np.float64)
    return label_issues.MethodEvidence(
      what="CORES² sieve margin l_sel of the last epoch (an issue where l_sel > 0)",
      quality=1.0 / (1.0 + np.exp(np.clip(margin, -700.0, 700.0))),
      is_issue=margin > 0,
    )

  return method_lib.Method(
    name="cores",
    objective=plain_loss.cross_entropy_objective(),
    init_rows=lambda key, rows, classes: init_rows(rows),
    program=method_lib.own_program(
      functools.partial(make_epoch_fn, settings=settings), init_state=lambda state: with_prior(state, num_classes)
    ),
    label_evidence=label_evidence,
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  fields = spec_lib.given(
    method_config,
    beta_warmup_epochs=int,
    beta_ramp_epochs=int,
    beta_max=float,
    sieve_warmup_epochs=int,
    use_prior=bool,
    sieve_mean=str,
    divide_lr=bool,
  )
  settings = CoresSettings(**fields, epochs_before=int(context.epochs_before))
  return method(settings, context.num_classes)


SPEC = spec_lib.MethodSpec(
  name="cores",
  fields=(
    "beta_warmup_epochs",
    "beta_ramp_epochs",
    "beta_max",
    "sieve_warmup_epochs",
    "use_prior",
    "sieve_mean",
    "divide_lr",
  ),
  build=_build,
  # Beta ramps over the 3 epochs and the sieve is on from the second, so the prior update and the lr factor run.
  tiny={
    "cores": {
      "method": {"name": "cores", "beta_warmup_epochs": 0, "beta_ramp_epochs": 3, "sieve_warmup_epochs": 1},
      "num_epochs": 3,
    }
  },
)
