"""ProMix (Xiao, Chen, Zhang, Wang, Wang, Chen; IJCAI 2023) as pure building blocks: the class-wise small-loss
selection, the matched high-confidence selection, label guessing, the debiasing by moving class priors, and the
per-network losses of its two heads.

The original code is Justherozen/ProMix@HEAD (`Train_promix.py`: train, eval_train, label_guessing, warmup;
`utils/utils.py`: debias_output, debias_pl, bias_update, CE_Soft_Label, linear_rampup2; `utils/fmix.py`). Notation:
epoch e is the original's 0-based epoch, C the classes, y_i the given label, p_i = softmax(z_i) the primary head's
softmax of the weak view (before debiasing), pi and pi_u a network's moving class priors of its reliable and its
unreliable rows.

Selection, per network:

  CSS (`class_small_loss_selection`, eval_train): after each epoch, each network's eval-mode cross entropy on the
    training split; in every class j (given labels) the ceil(rho N / C) examples of smallest loss (at least 1, at most
    the class's size) are selected, rho = rho_start + (rho_end - rho_start) min(e / warmup_ep, 1)
    (`selection_ratio`, `css_budget`). The original min-max normalises the losses first: a monotone map, the same
    ranking.
  MHCS (`matched_high_confidence`): in each batch a row is also selected when p_i[y_i] > tau.
  LGA (`label_guessing`, only for e > E - start_expand, E the original's num_epochs): when fewer than threshold B of
    the batch's B rows are selected, rows where both networks predict the same class with confidence > tau are added,
    at most floor(threshold B) - |selected|, those of the highest mean confidence first.
  The selected rows train with the given label where CSS or MHCS chose them, with the debiased prediction
  argmax debias_pl(z_i) where LGA did (`pseudo_labels`).

Debiasing (`debias_output`, `debias_pl`, `updated_prior`): z + t log pi for the losses (t = debias_output, 0.8 on
CIFAR-10, 0.5 on CIFAR-100), softmax(z - t' log pi) for pseudo-labels (t' = debias_pl); after each step
pi <- m pi + (1 - m) mean of p over the batch's selected rows, pi_u likewise over the unselected ones (m = bias_m,
0.9999), both starting uniform.

Losses of network k on a batch (`network_loss`), all means over the rows named, CE(z, q) = -sum_c q_c log softmax(z)_c:

  primary  CE_sel(z_w + t log pi, y~) + w (CE_sel(z_s + t log pi, y~) + mixup + fmix)
  pseudo   beta (CE_uns(h_w + t log pi_u, q) + w CE_uns(h_s + t log pi_u, q))
           + CE_sel(h_w + t log pi, y~) + w (CE_sel(h_s + t log pi, y~) + mixup_ph + fmix_ph)

with z the primary head's logits, h the pseudo head's, w / s the weak and strong views, y~ the pseudo-labels,
q = sharpen(debias_pl(z_w, pi_u), T) (T 0.5), w = min(e / warmup_ep, 1) (`consistency_weight`) and beta
(`unreliable_weight`) 0.1 min(e / (2 warmup_ep), 1), 0 from e >= 2 warmup_ep on (1 throughout with debias_pl = 0).
mixup / fmix: mixup (lam ~ Beta(4, 4), max(lam, 1 - lam)) and FMix (noisy_jax.core.fmix) of the selected rows' weak
views, each its own forward pass, loss on the debiased logits (z + t log pi). The step's loss is the sum over both
networks of primary + pseudo.

Padding rows (valid False) count in no set and no mean; over several devices the sets, means and priors are the
global batch's (psum over `axis_name`).

Differences from the original, named: (1) a mean over no rows is 0 here where the original's is NaN (a batch with
every row selected makes its loss NaN and, through bias_update, its priors NaN for the rest of the run); the priors
keep their value on a batch with no selected (unselected) row; (2) ties in the CSS and LGA rankings go to the lower
row index (torch.sort is not stable); (3) the warm-up's confidence penalty (asymmetric noise) is the softmax's negative
entropy, as DivideMix's: the original clamps the *logits* at 1e-12 before its softmax (NegEntropy), which
`penalty_clamps_logits` reproduces.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks

TAU = 0.99  # Train_promix.py --tau (0.95 in the CIFAR-100 lines of run.sh)
THRESHOLD = 0.9  # --threshold, LGA's cap on the selected fraction
BIAS_MOMENTUM = 0.9999  # --bias_m
TEMPERATURE = 0.5  # --T
MIXUP_ALPHA = 4.0  # np.random.beta(4, 4) in train()


def linear_rampup(current: int, length: int) -> float:
  """min(current / length, 1), 1 for length 0 (utils.linear_rampup2; Python numbers, current >= 0)."""
  return 1.0 if length == 0 else min(current / length, 1.0)


def consistency_weight(epoch: int, warmup_ep: int) -> float:
  """w = min(e / warmup_ep, 1): the weight of the strong view, mixup and FMix terms (0-based epoch e)."""
  return linear_rampup(epoch, warmup_ep)


def unreliable_weight(epoch: int, warmup_ep: int, debias_pl: float) -> float:
  """beta, the weight of the unselected rows' pseudo-head loss: 0.1 min(e / (2 warmup_ep), 1) while e < 2 warmup_ep
  and 0 after when debias_pl is nonzero; 1 when it is 0 (train(): `beta = 0 if (epoch >= 2 warmup_ep and beta < 1)`)."""
  beta = 0.1 * linear_rampup(epoch, 2 * warmup_ep) if debias_pl else 1.0
  return 0.0 if (epoch >= 2 * warmup_ep and beta < 1) else beta


def selection_ratio(epoch: int, *, rho_start: float, rho_end: float, warmup_ep: int) -> float:
  """rho of CSS at 0-based epoch e: rho_start + (rho_end - rho_start) min(e / warmup_ep, 1)."""
  return rho_start + (rho_end - rho_start) * linear_rampup(int(epoch), int(warmup_ep))


def css_budget(num_examples: int, num_classes: int, rho: float) -> int:
  """ceil(rho N / C), the per-class budget of CSS before the class-size bounds (the original's
  `math.ceil(bs_j * rho)` with bs_j = N * (1 / C), in double precision)."""
  return int(math.ceil(num_examples * (1.0 / num_classes) * rho))


def class_small_loss_selection(losses, labels, budget, *, num_classes: int, valid=None) -> jax.Array:
  """bool [N]: in every class j, the min(max(budget, 1), n_j) rows of smallest loss (budget: ceil(rho N / C)),
  n_j the number of (valid) rows labelled j; classes without rows select nothing. Ties: the lower index first.

  Args:
    losses: float [N] each row's loss (any monotone transform of it selects the same rows).
    labels: int [N] the given labels.
    budget: int scalar (may be traced).
    num_classes: C.
    valid: optional bool [N]; invalid rows (a sharded table's padding) are never selected and not counted.
  """
  losses = jnp.asarray(losses)
  labels = jnp.asarray(labels, jnp.int32)
  n = losses.shape[0]
  valid = jnp.ones((n,), bool) if valid is None else jnp.asarray(valid, bool)
  # Order by (invalid last, label, loss, index): a stable sort on the loss, then a stable sort on the key.
  by_loss = jnp.argsort(jnp.where(valid, losses, jnp.inf), stable=True)
  class_key = jnp.where(valid, labels, num_classes)[by_loss]
  order = by_loss[jnp.argsort(class_key, stable=True)]
  sorted_labels = jnp.where(valid, labels, num_classes)[order]
  counts = jnp.bincount(jnp.where(valid, labels, num_classes), length=num_classes + 1)
  starts = jnp.cumsum(counts) - counts
  rank = jnp.arange(n) - starts[sorted_labels]
  limit = jnp.minimum(jnp.maximum(jnp.asarray(budget), 1), counts)[sorted_labels]
  chosen_sorted = (rank < limit) & (sorted_labels < num_classes)
  return jnp.zeros((n,), bool).at[order].set(chosen_sorted)


def debias_output(logits, prior, strength):
  """z + t log pi (utils.debias_output): logits [..., C], prior [C]."""
  return logits + strength * jnp.log(prior).astype(logits.dtype)


def debias_pl(logits, prior, strength):
  """softmax(z - t log pi) (utils.debias_pl): the debiased probabilities that pseudo-labels are read from."""
  return jax.nn.softmax(logits - strength * jnp.log(prior).astype(logits.dtype), axis=-1)


def sharpen(probs, temperature: float):
  """p^(1/T) / sum_c p_c^(1/T)."""
  powered = probs ** (1.0 / temperature)
  return powered / jnp.sum(powered, axis=-1, keepdims=True)


def _psum(x, axis_name):
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def subset_mean(per_example, mask, axis_name=None):
  """(sum over the mask's rows) / max(count, 1) over the global batch: 0 for no row (module docstring (1))."""
  mask = jnp.asarray(mask, bool)
  total = _psum(jnp.sum(jnp.where(mask, per_example, 0.0)), axis_name)
  count = _psum(jnp.sum(mask.astype(per_example.dtype)), axis_name)
  return total / jnp.maximum(count, 1.0)


def updated_prior(prior, probs, mask, momentum: float, axis_name=None):
  """m pi + (1 - m) mean of probs [B, C] over the mask's rows of the global batch (utils.bias_update); pi unchanged
  when no row is in the mask."""
  mask = jnp.asarray(mask, bool)
  total = _psum(jnp.sum(jnp.where(mask[:, None], probs, 0.0), axis=0), axis_name)
  count = _psum(jnp.sum(mask.astype(probs.dtype)), axis_name)
  mean = total / jnp.maximum(count, 1.0)
  return jnp.where(count > 0, momentum * prior + (1 - momentum) * mean.astype(prior.dtype), prior)


def matched_high_confidence(probs, labels, tau: float) -> jax.Array:
  """bool [B]: p_i[y_i] > tau (MHCS), probs [B, C] the primary head's undebiased softmax of the weak view."""
  given = jnp.take_along_axis(probs, jnp.asarray(labels, jnp.int32)[:, None], axis=1)[:, 0]
  return given > tau


def label_guessing(selected, probs_1, probs_2, valid, *, tau: float, threshold: float) -> jax.Array:
  """The selection after label guessing by agreement (Train_promix.label_guessing), over one (global) batch.

  Args:
    selected: bool [B] a network's selection (CSS or MHCS).
    probs_1, probs_2: [B, C] both networks' undebiased softmax of the weak view.
    valid: bool [B] False for padding (the batch size B_v is the number of valid rows).
    tau: the confidence both networks need. threshold: the selected fraction below which guessing applies (a
      Python float: the cap's table is built from it).

  Returns:
    bool [B]: `selected` plus, when |selected| < threshold B_v, the rows (valid, not selected) where both networks
    predict the same class with confidence > tau, at most floor(threshold B_v) - |selected| of them, the highest mean
    confidence first (ties: the lower row first).
  """
  valid = jnp.asarray(valid, bool)
  selected = jnp.asarray(selected, bool) & valid
  score_1, score_2 = jnp.max(probs_1, axis=1), jnp.max(probs_2, axis=1)
  match = jnp.argmax(probs_1, axis=1) == jnp.argmax(probs_2, axis=1)
  candidates = (score_1 > tau) & (score_2 > tau) & match & ~selected & valid
  batch = jnp.sum(valid.astype(jnp.int32))
  count = jnp.sum(selected.astype(jnp.int32))
  cap, first_full = _guessing_bounds(valid.shape[0], threshold)
  applies = count < first_full[batch]  # 1. * count / B < threshold, in doubles
  room = cap[batch] - count  # int(B * threshold) - count, in doubles
  order = jnp.argsort(jnp.where(candidates, -(score_1 + score_2) / 2, jnp.inf), stable=True)
  rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0]))
  added = candidates & (rank < room) & applies
  return selected | added


def _guessing_bounds(max_batch: int, threshold: float) -> tuple[jax.Array, jax.Array]:
  """(cap, first_full), int32 [max_batch + 1] each, indexed by the batch size B: cap[B] = int(B threshold) and
  first_full[B] = the least count c with c / B >= threshold, both in double precision as the original's Python
  arithmetic (float32 would round 90 x 0.7 = 62.99999999999999 up to 63)."""
  sizes = np.arange(max_batch + 1)
  cap = np.floor(sizes * float(threshold)).astype(np.int32)
  first_full = np.array([next((c for c in range(b + 1) if b and c / b >= threshold), b + 1) for b in sizes], np.int32)
  return jnp.asarray(cap), jnp.asarray(first_full)


def pseudo_labels(labels, guessed, kept) -> jax.Array:
  """int [B]: the given label where `kept` (CSS or MHCS), the debiased prediction `guessed` elsewhere (the one-hot
  rows of labels_x w_x + pred_net (1 - w_x))."""
  return jnp.where(jnp.asarray(kept, bool), jnp.asarray(labels, jnp.int32), jnp.asarray(guessed, jnp.int32))


def soft_cross_entropy(logits, targets):
  """-sum_c q_c log softmax(z)_c per row (CE_Soft_Label)."""
  return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def hard_cross_entropy(logits, labels):
  """-log softmax(z)_y per row."""
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.take_along_axis(log_p, jnp.asarray(labels, jnp.int32)[:, None], axis=-1)[:, 0]


def network_loss(
  heads: dict,
  mixed: dict,
  labels,
  selected,
  unselected,
  priors: dict,
  *,
  strength: float,
  strength_pl: float,
  temperature: float,
  weight: float,
  beta: float,
  axis_name=None,
) -> tuple[jax.Array, dict]:
  """One network's primary + pseudo-head loss of a batch (module docstring).

  Args:
    heads: {"z_w", "z_s", "h_w", "h_s"}: [B, C] the primary (z) and pseudo (h) head's logits of the weak (w) and
      strong (s) view, undebiased.
    mixed: {"mix", "fmix", "mix_ph", "fmix_ph"}: the scalar mixup and FMix losses of the selected rows (already on
      debiased logits).
    labels: int [B] the pseudo-labels y~.
    selected, unselected: bool [B] the rows trained on y~ and the rows trained on the sharpened debiased prediction
      (padding in neither).
    priors: {"reliable": pi [C], "unreliable": pi_u [C]}.
    strength, strength_pl: t (debias_output) and t' (debias_pl). temperature: T. weight: w. beta: beta.
    axis_name: the device axis (None: one device).

  Returns:
    (loss, parts): parts holds the primary and pseudo terms {"primary", "pseudo"}.
  """
  pi, pi_u = priors["reliable"], priors["unreliable"]
  mean_sel = lambda per_example: subset_mean(per_example, selected, axis_name)
  mean_uns = lambda per_example: subset_mean(per_example, unselected, axis_name)
  ce_sel = lambda logits, prior: mean_sel(hard_cross_entropy(debias_output(logits, prior, strength), labels))
  primary = ce_sel(heads["z_w"], pi) + weight * (ce_sel(heads["z_s"], pi) + mixed["mix"] + mixed["fmix"])
  targets = jax.lax.stop_gradient(sharpen(debias_pl(heads["z_w"], pi_u, strength_pl), temperature))
  unreliable = mean_uns(soft_cross_entropy(debias_output(heads["h_w"], pi_u, strength), targets)) + weight * mean_uns(
    soft_cross_entropy(debias_output(heads["h_s"], pi_u, strength), targets)
  )
  pseudo = (
    beta * unreliable
    + ce_sel(heads["h_w"], pi)
    + weight * (ce_sel(heads["h_s"], pi) + mixed["mix_ph"] + mixed["fmix_ph"])
  )
  return primary + pseudo, {"primary": primary, "pseudo": pseudo}


def initial_priors(num_classes: int, dtype=jnp.float32) -> dict:
  """{"reliable", "unreliable"}: uniform [C] each (utils.bias_initial)."""
  uniform = jnp.full((int(num_classes),), 1.0 / int(num_classes), dtype)
  return {"reliable": uniform, "unreliable": jnp.array(uniform)}


def check_settings(**values) -> None:
  """ValueError naming the first out-of-range field of ProMix's settings."""
  for name in ("tau", "threshold", "bias_m", "rho_start", "rho_end"):
    if name in values:
      _checks.check_range(name, values[name], 0.0, 1.0)
  for name in ("debias_output", "debias_pl", "mixup_alpha"):
    if name in values:
      _checks.check_range(name, values[name], 0.0, np.inf)
  if "temperature" in values:
    _checks.check_range("temperature", values["temperature"], 0.0, np.inf, low_open=True)
  for name in ("pretrain_ep", "warmup_ep", "start_expand"):
    value = values.get(name, 0)
    if isinstance(value, bool) or int(value) != value or value < 0:
      raise ValueError(f"{name}={value!r} must be an integer >= 0.")
