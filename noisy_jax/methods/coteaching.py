"""Co-teaching and Co-teaching+: the pure building blocks (schedules, small-loss selection, the exchanged loss).

Co-teaching (Han et al., "Co-teaching: Robust Training of Deep Neural Networks with Extremely Noisy Labels",
NeurIPS 2018, arXiv 1804.06872; code github.com/bhanML/Co-teaching@7c7fbe2) trains two networks f and g. On each
mini-batch of B examples both compute per-example losses; each keeps its n = floor((1 - R(e)) B) smallest-loss
examples and hands them to its peer: f is updated on g's small-loss set, g on f's. R(e), the forget rate, ramps
from 0 to tau (the noise rate, assumed known) over the first T_k epochs.

Co-teaching+ (Yu et al., "How does Disagreement Help Generalization against Label Corruption?", ICML 2019,
arXiv 1901.04215; code github.com/xingruiyu/coteaching_plus@a68ed61) runs plain Co-teaching for epochs before
`init_epoch`, then keeps only the examples on which the two networks' argmax predictions disagree and exchanges
the small-loss examples among those, with the same R(e).

What is here (no training loop; the two-network trainer builds on these):

  forget_rate_schedule   R(e) per epoch, the paper's ramp or main.py's (named option)
  num_remember           n = floor((1 - R) N) in float32, traced R and N allowed
  small_loss_selection   Co-teaching's exchanged masks (keep_for_1, keep_for_2)
  disagreement           the Co-teaching+ disagreement mask argmax z1 != argmax z2
  disagreement_selection Co-teaching+'s masks (plain Co-teaching before init_epoch)
  coteaching_loss        the mean loss over a kept set (the original's extra 1/n as a named option)
  double_softmax_cross_entropy   Co-teaching+'s CE of softmax outputs (its defect, offered by name only)

Every selection function works on per-example losses [B] (any per-example loss of `noisy_jax.core.losses`), a validity
mask [B] (padding rows: valid = 0, never kept and never counted), takes the forget rate as a Python float or a
traced scalar, and returns boolean masks of static shape [B] (ranks from a sort; no dynamic shapes), so it jits and
vmaps. With `axis_name` (inside a per-device step mapped over a device axis, pmap semantics) the selection is made
over the *global* batch: losses and masks are all-gathered (B floats per device), ranked once, and each device keeps
its own rows, so N devices select exactly what one device would on the concatenated batch.

Epoch indexing (0-based epoch e throughout). The original main.py evaluates the random init as its "epoch 0" and
trains epochs e = 1 .. n_epoch - 1 (199 of them), indexing the forget-rate and Adam plans with that e. To
reproduce it, build the plans with num_epochs = n_epoch, and train epochs 1 .. n_epoch - 1
(noisy_jax.train.coteaching_adam.adam_schedule's `epoch_offset=1` when the step count starts at 0 in epoch 1). Its MNIST
loop also runs `num_iter_per_epoch + 1` = 401 batches per epoch (`if i > 400: break`); CIFAR's 390 batches (drop_last)
are unaffected.

Defects of the original code and what is done about each (never reproduced silently):
- Forget-rate ramp off by one (main.py): linspace(0, tau^c, T_k) reaches tau at epoch index T_k - 1 = 9, and
  epoch 0, the only one with R = 0, is never trained. Default here: the paper; `ramp='original'` reproduces
  main.py's array (see `forget_rate_schedule`).
- Loss normalised twice (loss.py): F.cross_entropy already averages over the n kept examples and the result is
  divided by n again. Default: the mean; `normalise_twice=True` reproduces it (see `coteaching_loss`).
- Co-teaching+ double softmax (loss.py): softmax outputs are fed to F.cross_entropy, which applies log_softmax
  again, both for ranking and for the update. Not in the default path; `double_softmax_cross_entropy` is the
  per-example loss that reproduces it, for a caller who asks for it.
- Co-teaching+ dataset-index-0 filter: it multiplies the batch's dataset indices by the disagreement mask and
  drops zeros, so when dataset row 0 disagrees the index list is one short and the position list is truncated to
  match: the batch's *last* disagreeing example is dropped from training (one batch per epoch, at most one
  example). Not reproduced and not offered (no published number can depend on it measurably).
- Co-teaching+ `step = epoch * batch_index` (not a global step): it only gates the no-disagreement fallback (train
  on the whole batch while step < 5000, else no update). Default: no update when nothing disagrees;
  `fallback_all` takes a (traced) bool so a caller can pass `epoch * batch_index < 5000` to reproduce it.
"""

from __future__ import annotations

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import losses as losses_lib
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

RAMPS = ("paper", "original")
# Relative guard of num_remember: float32 rounding of (1 - R) N (~2e-7 relative) must not floor an exact integer
# product to the integer below (R = 0.1, N = 10 gives 8.9999998 in float32). 2^-20 ~ 9.5e-7.
_GUARD = 2.0**-20
# Co-teaching+ (main.py): epochs of plain Co-teaching before the disagreement phase, per dataset.
COTEACHING_PLUS_INIT_EPOCH = {"mnist": 0, "cifar10": 20, "cifar100": 5, "news": 0, "imagenet_tiny": 100}


# ---------------------------------------------------------------------------------------------------------------
# Schedules.


def forget_rate_schedule(
  num_epochs: int, forget_rate: float, *, num_gradual: int = 10, exponent: float = 1.0, ramp: str = "paper"
) -> np.ndarray:
  """The forget rate R(e) of each 0-based epoch e, float64 [num_epochs]. A network keeps 1 - R(e) of each batch.

  ramp='paper' (default; Han et al. 2018, Algorithm 1, and section 4 for c):

    R(e) = tau * min(e^c / T_k, 1)                        tau = forget_rate, T_k = num_gradual, c = exponent

  Algorithm 1 updates R(T) = 1 - min{T tau / T_k, tau} (there the fraction *kept*) at the end of epoch T = 1, 2, ..,
  so the 0-based epoch e = T - 1 trains with forget rate min(e tau / T_k, tau): 0 in the first epoch, tau from
  epoch index T_k = 10 on. The exponent form tau min(T^c / T_k, 1) is the paper's for its T_k / c study [recalled,
  not re-read]; every published table uses c = 1, where it is Algorithm 1's ramp.

  ramp='original' (main.py of both repositories, bit for bit):

    R = [tau] * num_epochs;  R[:T_k] = linspace(0, tau^c, T_k)      (so R(e) = e tau^c / (T_k - 1) for e < T_k)

  Its defect: the ramp reaches tau at e = T_k - 1 = 9, one epoch early, and since main.py never trains epoch 0
  (module docstring), the first trained epoch already forgets tau / 9, the second 2 tau / 9, ...; for c != 1 it
  ramps to tau^c and then jumps to tau at e = T_k. The published numbers were trained with this array, hence the
  named option. (Co-teaching+'s main.py builds the same array, without the exponent.)

  num_gradual = 0 means no ramp: R(e) = tau for every e (both ramps). A num_epochs < num_gradual truncates the
  ramp (the original would fail to assign a longer linspace into a shorter array).

  Args:
    num_epochs: length of the schedule (>= 1).
    forget_rate: tau in [0, 1].
    num_gradual: T_k >= 0, the ramp's length in epochs.
    exponent: c > 0.
    ramp: 'paper' or 'original'.

  Raises:
    ValueError: for values outside those ranges or an unknown ramp.
  """
  _checks.check_choice("ramp", ramp, RAMPS)
  _check_int("num_epochs", num_epochs, 1)
  _check_int("num_gradual", num_gradual, 0)
  _checks.check_range("forget_rate", forget_rate, 0.0, 1.0)
  _checks.check_range("exponent", exponent, 0.0, np.inf, low_open=True)
  tau = float(forget_rate)
  schedule = np.full(num_epochs, tau, dtype=np.float64)
  if num_gradual == 0:
    return schedule
  if ramp == "original":
    k = min(num_gradual, num_epochs)
    schedule[:k] = np.linspace(0.0, tau**exponent, num_gradual)[:k]
    return schedule
  epochs = np.arange(num_epochs, dtype=np.float64)
  return tau * np.minimum(epochs**exponent / num_gradual, 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Selection.


def num_remember(forget_rate, num_valid, *, round_up: bool = False) -> jax.Array:
  """n = floor((1 - R) N) (the original's `int(remember_rate * len(batch))`), int32 scalar; traced R and N allowed.

  Computed in float32 with a relative guard of 2^-20 so that products that are integers in decimal arithmetic are
  not floored below by float32 rounding (R = 0.1, N = 10 gives 9; plain float32 gives 8). The original computes in
  float64; the two agree at every entry of the published schedules at B = 128 (tested), and can differ by one where
  (1 - R) N lies within ~1e-6 relative of an integer and float64 rounds it just below (the original then keeps one
  example fewer). round_up=True gives ceil((1 - R) N): the paper's |D'| >= R(T) |D| in Algorithm 1 (at most one
  example more per batch than the code). The result is clipped to [0, N].
  """
  _checks.check_range("forget_rate", forget_rate, 0.0, 1.0)
  count = jnp.asarray(num_valid, jnp.float32)
  remember = (1.0 - jnp.asarray(forget_rate, jnp.float32)) * count
  n = jnp.ceil(remember * (1.0 - _GUARD)) if round_up else jnp.floor(remember * (1.0 + _GUARD))
  return jnp.clip(n, 0.0, count).astype(jnp.int32)


def disagreement(logits_1, logits_2, valid) -> jax.Array:
  """Co-teaching+'s disagreement mask: argmax_c z1[i, c] != argmax_c z2[i, c] and valid[i], bool [B].

  logits_1, logits_2: [B, C]; valid: [B]. Ties in an argmax go to the first maximal class (jnp.argmax; PyTorch's
  `torch.max(dim=1)` leaves it unspecified).
  """
  logits_1, logits_2 = jnp.asarray(logits_1), jnp.asarray(logits_2)
  _checks.check_same_shape("logits_1", logits_1, "logits_2", logits_2)
  if logits_1.ndim != 2:
    raise ValueError(f"logits must be [B, C], got shape {logits_1.shape}.")
  valid = _as_mask("valid", valid, logits_1.shape[:1])
  return (jnp.argmax(logits_1, axis=-1) != jnp.argmax(logits_2, axis=-1)) & valid


def small_loss_selection(
  losses_1, losses_2, valid, forget_rate, *, round_up: bool = False, keep_all_if_none=False, axis_name=None
) -> tuple[jax.Array, jax.Array]:
  """Co-teaching's exchange (Han et al. 2018, Algorithm 1, steps 4-7; loss.py `loss_coteaching`).

  With N = sum(valid) (over the global batch when `axis_name` is set) and n = num_remember(R, N):

    S_1 = the n valid examples of smallest losses_1     (network 1's small-loss set; loss.py `ind_1_update`)
    S_2 = the n valid examples of smallest losses_2     (network 2's; `ind_2_update`)
    keep_for_1 = S_2    network 1 is updated on the examples its peer selected  (loss.py `loss_1_update`)
    keep_for_2 = S_1    network 2 is updated on network 1's selection           (`loss_2_update`)

  Ranking is by value, ties broken by batch position (lower index first, a stable sort; the original's np.argsort
  is not stable), NaN losses rank last (as NumPy's sort); padding rows (valid = 0) are never ranked, kept, or
  counted in N. Use `coteaching_loss(losses_1, keep_for_1)` for network 1's objective.

  Args:
    losses_1, losses_2: [B] per-example losses of the two networks (compared, not differentiated: pass them
      through `lax.stop_gradient` or not, the masks are the same).
    valid: [B] bool / {0, 1}.
    forget_rate: R(e), a float or a traced scalar in [0, 1].
    round_up: ceil instead of floor for n (`num_remember`).
    keep_all_if_none: where n = 0 but N > 0 keep all N valid examples (Co-teaching+'s loss.py does; Co-teaching's
      divides by n = 0 there, a NaN loss). Default False: nothing is kept and `coteaching_loss` is 0. A bool or
      traced bool.
    axis_name: device axis of a per-device step: select over the global batch (module docstring).

  Returns:
    (keep_for_1, keep_for_2): bool [B] masks, each with exactly n True entries over the global batch.
  """
  losses_1, losses_2, valid = _prepare_losses(losses_1, losses_2, valid)
  g1, g2, gv = (_gather(x, axis_name) for x in (losses_1, losses_2, valid))
  n = _count_kept(forget_rate, jnp.sum(gv), keep_all_if_none, round_up)
  small_1, small_2 = _smallest(g1, gv, n), _smallest(g2, gv, n)
  b = valid.shape[0]
  return _local(small_2, b, axis_name), _local(small_1, b, axis_name)


def disagreement_selection(
  logits_1,
  logits_2,
  losses_1,
  losses_2,
  valid,
  forget_rate,
  *,
  epoch,
  init_epoch,
  round_up: bool = False,
  keep_all_if_none=True,
  fallback_all=False,
  axis_name=None,
) -> tuple[jax.Array, jax.Array]:
  """Co-teaching+'s exchange (Yu et al. 2019, Algorithm 1; loss.py `loss_coteaching_plus`, main.py `train`).

  epoch < init_epoch: plain Co-teaching, `small_loss_selection` over all valid examples.
  epoch >= init_epoch: with D = disagreement(logits_1, logits_2, valid) and N_D = sum(D) (global),
  m = num_remember(R, N_D) (and m = N_D where m = 0 < N_D, `keep_all_if_none`):

    S_1 = the m examples of D with smallest losses_1,  S_2 likewise with losses_2
    keep_for_1 = S_2,  keep_for_2 = S_1                    (the same exchange, inside the disagreement set)

  and when no valid example disagrees (N_D = 0), nothing is kept (no update), or every valid example for both
  networks where `fallback_all` is true. The original trains on the whole batch there while its step counter
  `epoch * batch_index` < 5000 and skips the update after; pass `fallback_all=epoch * batch_index < 5000` to
  reproduce it (that branch's loss is the plain batch mean: `coteaching_loss(..., normalise_twice=False)`).

  `keep_all_if_none` defaults to True here because Co-teaching+'s loss.py keeps the whole candidate set when
  int((1 - R) N) = 0 (in both phases); it matters for small disagreement sets (N_D < 1 / (1 - R)).

  The losses are whatever the caller ranks and trains with. The original ranks and trains the disagreement phase
  on `double_softmax_cross_entropy` (its defect) and the plain phase on the cross entropy of the logits; the
  default path here is the cross entropy of the logits in both phases. The index-0 filter of the original is not
  reproduced (module docstring).

  Args:
    logits_1, logits_2: [B, C] the two networks' logits (only their argmaxes are used).
    losses_1, losses_2, valid, forget_rate, round_up, axis_name: as `small_loss_selection`.
    epoch, init_epoch: ints or traced ints (0-based epoch, as main.py's `epoch < init_epoch`).
    keep_all_if_none, fallback_all: bools or traced bools (above).

  Returns:
    (keep_for_1, keep_for_2): bool [B].
  """
  losses_1, losses_2, valid = _prepare_losses(losses_1, losses_2, valid)
  disagree = disagreement(logits_1, logits_2, valid)
  if disagree.shape != valid.shape:
    raise ValueError(f"logits cover {disagree.shape[0]} examples, losses {valid.shape[0]}.")
  g1, g2, gv, gd = (_gather(x, axis_name) for x in (losses_1, losses_2, valid, disagree))
  n_all = _count_kept(forget_rate, jnp.sum(gv), keep_all_if_none, round_up)
  plain_1, plain_2 = _smallest(g1, gv, n_all), _smallest(g2, gv, n_all)
  num_disagree = jnp.sum(gd)
  n_dis = _count_kept(forget_rate, num_disagree, keep_all_if_none, round_up)
  plus_1, plus_2 = _smallest(g1, gd, n_dis), _smallest(g2, gd, n_dis)
  take_all = (num_disagree == 0) & jnp.asarray(fallback_all, bool)
  plus_1, plus_2 = jnp.where(take_all, gv, plus_1), jnp.where(take_all, gv, plus_2)
  plus = jnp.asarray(epoch) >= jnp.asarray(init_epoch)
  small_1, small_2 = jnp.where(plus, plus_1, plain_1), jnp.where(plus, plus_2, plain_2)
  b = valid.shape[0]
  return _local(small_2, b, axis_name), _local(small_1, b, axis_name)


# ---------------------------------------------------------------------------------------------------------------
# Losses.


def coteaching_loss(per_example_loss, keep, axis_name=None, *, normalise_twice=False) -> jax.Array:
  """The mean per-example loss over the kept examples, a scalar (psum over `axis_name`: the global batch's mean).

    L = sum_i keep_i l_i / n,   n = sum_i keep_i            (the paper's mean over the peer's small-loss set)

  normalise_twice=True gives L / n, what loss.py returns: `F.cross_entropy(y[ind], t[ind])` is already the mean
  over the n kept examples and `torch.sum(...) / num_remember` divides it by n once more. Under Adam (the paper's
  optimiser) a constant gradient scale changes only eps's relative size, but n varies over the ramp and between
  batches, so exact reproduction needs it; under SGD it would scale the lr by 1 / n. A bool or traced bool.

  An empty kept set gives 0 (n is clipped to 1). Rows that are not kept contribute neither value nor gradient,
  even if their loss is not finite (jnp.where, not a product with the mask).

  Args:
    per_example_loss: [B] losses of the network being updated (differentiated).
    keep: [B] bool mask, e.g. keep_for_1 of `small_loss_selection` for network 1.
    axis_name: device axis of a per-device step.
    normalise_twice: reproduce the original's extra 1 / n.

  Returns:
    float scalar in the loss's dtype (at least float32).
  """
  per_example_loss = jnp.asarray(per_example_loss)
  if per_example_loss.ndim != 1:
    raise ValueError(f"per_example_loss must be [B], got shape {per_example_loss.shape}.")
  keep = _as_mask("keep", keep, per_example_loss.shape)
  dtype = jnp.promote_types(per_example_loss.dtype, jnp.float32)
  total = _psum(jnp.sum(jnp.where(keep, per_example_loss.astype(dtype), 0.0)), axis_name)
  count = jnp.maximum(_psum(jnp.sum(keep.astype(dtype)), axis_name), 1.0)
  mean = total / count
  return jnp.where(jnp.asarray(normalise_twice, bool), mean / count, mean)


def double_softmax_cross_entropy(logits, labels) -> jax.Array:
  """Co-teaching+'s defect, reproduced only on request: CE(softmax(z), y) = -sum_c y_c log softmax(softmax(z))_c.

  loss.py `loss_coteaching_plus` passes `F.softmax(logits)` to `F.cross_entropy`, which applies log_softmax again.
  With p = softmax(z) and one-hot y the value is log sum_c e^{p_c} - p_y, confined to [log(C - 1 + e) - 1,
  log(C - 1 + e)] (probabilities in [0, 1] are nearly flat after a second softmax), and its gradient is small: what
  the published Co-teaching+ numbers were trained with.
  Shapes and contract as `noisy_jax.core.losses.cross_entropy`: logits, labels [..., C] -> [...].
  """
  logits = jnp.asarray(logits)
  probs = jax.nn.softmax(logits.astype(jnp.promote_types(logits.dtype, jnp.float32)), axis=-1)
  out = losses_lib.cross_entropy(probs, labels)
  return out.astype(logits.dtype if jnp.issubdtype(logits.dtype, jnp.floating) else jnp.float32)


# ---------------------------------------------------------------------------------------------------------------
# Helpers.


def _check_int(name, value, low):
  if isinstance(value, bool) or int(value) != value or value < low:
    raise ValueError(f"{name}={value!r} must be an integer >= {low}.")


def _as_mask(name, mask, shape) -> jax.Array:
  mask = jnp.asarray(mask)
  if mask.shape != tuple(shape):
    raise ValueError(f"{name} must have shape {tuple(shape)}, got {mask.shape}.")
  return mask.astype(bool)


def _prepare_losses(losses_1, losses_2, valid):
  losses_1, losses_2 = jnp.asarray(losses_1), jnp.asarray(losses_2)
  _checks.check_same_shape("losses_1", losses_1, "losses_2", losses_2)
  if losses_1.ndim != 1:
    raise ValueError(f"losses must be [B], got shape {losses_1.shape}.")
  return losses_1, losses_2, _as_mask("valid", valid, losses_1.shape)


def _psum(x, axis_name):
  return x if axis_name is None else lax.psum(x, axis_name)


def _gather(x, axis_name):
  """[B] -> the global batch [N B] in device order (identity without a device axis)."""
  return x if axis_name is None else lax.all_gather(x, axis_name, tiled=True)


def _local(x, b, axis_name):
  """This device's rows [B] of a global [N B] vector."""
  return x if axis_name is None else lax.dynamic_slice_in_dim(x, lax.axis_index(axis_name) * b, b)


def _count_kept(forget_rate, count, keep_all_if_none, round_up):
  n = num_remember(forget_rate, count, round_up=round_up)
  return jnp.where(jnp.asarray(keep_all_if_none, bool) & (n == 0), count.astype(jnp.int32), n)


def _smallest(values, eligible, n) -> jax.Array:
  """Bool mask of the n eligible entries of smallest value (ties: lower index first; NaN last), [B]."""
  b = values.shape[0]
  index = lax.iota(jnp.int32, b)
  # Keys: ineligible rows last, then the value (lax.sort's total order: -0.0 == 0.0, NaN last), then the index.
  first = jnp.where(eligible, 0, 1).astype(jnp.int32)  # eligible rows first, then by value, then by position
  _, _, order = lax.sort((first, values.astype(jnp.promote_types(values.dtype, jnp.float32)), index), num_keys=3)
  rank = jnp.zeros((b,), jnp.int32).at[order].set(index)
  return eligible & (rank < n)


def method(
  *,
  forget_rate: float,
  num_epochs: int,
  num_gradual: int = 10,
  exponent: float = 1.0,
  ramp: str = "paper",
  plus: bool = False,
  init_epoch: int = 0,
  normalise_twice: bool = False,
) -> method_lib.Method:
  """Co-teaching / Co-teaching+ on two networks as a method. Epoch e (1-based here) trains with the forget rate
  R(e - 1) of `forget_rate_schedule(num_epochs, forget_rate, ...)`; each network's loss is the mean cross entropy over
  the examples its peer selected (`small_loss_selection`, or `disagreement_selection` from 0-based epoch `init_epoch`
  on with `plus`), selected over the global batch. The objective is the sum of both."""
  schedule = jnp.asarray(
    forget_rate_schedule(int(num_epochs), forget_rate, num_gradual=int(num_gradual), exponent=exponent, ramp=ramp),
    jnp.float32,
  )
  if int(init_epoch) < 0:
    raise ValueError(f"init_epoch={init_epoch!r} must be >= 0 (the 0-based epoch where Co-teaching+ starts).")

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, **unused):
    del weights
    rate = schedule[jnp.clip(epoch - 1, 0, schedule.shape[0] - 1)]
    per_example = jax.vmap(losses_lib.cross_entropy, in_axes=(0, None))(logits, soft_labels)  # [2, B]
    ranked = jax.lax.stop_gradient(per_example)
    if plus:
      keep_1, keep_2 = disagreement_selection(
        jax.lax.stop_gradient(logits[0]),
        jax.lax.stop_gradient(logits[1]),
        ranked[0],
        ranked[1],
        valid,
        rate,
        epoch=epoch - 1,
        init_epoch=int(init_epoch),
        axis_name=axis_name,
      )
    else:
      keep_1, keep_2 = small_loss_selection(ranked[0], ranked[1], valid, rate, axis_name=axis_name)
    loss = coteaching_loss(per_example[0], keep_1, axis_name, normalise_twice=normalise_twice) + coteaching_loss(
      per_example[1], keep_2, axis_name, normalise_twice=normalise_twice
    )
    return loss, rows

  return method_lib.Method(
    name="coteaching_plus" if plus else "coteaching",
    objective=objective,
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
  )


def schedule_arguments(method_config, context: spec_lib.Context, *, default_hint: str) -> dict:
  """{forget_rate, num_epochs} of a method built on `forget_rate_schedule` (Co-teaching, JoCoR), with a ValueError
  naming what is missing: the run's epochs (Context.num_epochs) or method.forget_rate (`default_hint`: what the
  paper or code uses)."""
  name = method_config.name
  if context.num_epochs is None:
    raise ValueError(
      f"method {name!r} needs the run's epochs for its forget-rate schedule: make(..., num_epochs=config.num_epochs)."
    )
  if "forget_rate" not in method_config:
    raise ValueError(f"method {name!r} needs method.forget_rate ({default_hint}).")
  return {"forget_rate": float(method_config.forget_rate), "num_epochs": int(context.num_epochs)}


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  return method(
    **schedule_arguments(method_config, context, default_hint="the paper uses the noise rate"),
    **spec_lib.given(
      method_config, num_gradual=int, exponent=float, ramp=str, plus=bool, init_epoch=int, normalise_twice=bool
    ),
  )


def _tiny(plus: bool) -> dict:
  """Both networks in one state, the paper's Adam plan (lr / beta1 decay from epoch 2)."""
  return {
    "method": {"name": "coteaching", "forget_rate": 0.4, "num_gradual": 2, "plus": plus},
    "optimizer": {"name": "coteaching_adam", "learning_rate": 1e-2, "decay_start": 2},
  }


SPEC = spec_lib.MethodSpec(
  name="coteaching",
  fields=("forget_rate", "num_gradual", "exponent", "ramp", "plus", "init_epoch", "normalise_twice"),
  build=_build,
  tiny={"coteaching": _tiny(plus=False), "coteaching_plus": _tiny(plus=True)},
)
