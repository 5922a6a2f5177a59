"""ProMix's epoch program (noisy_jax.methods.promix_train.make_epoch_fn): one training step against the original's
train() (Justherozen/ProMix, Train_promix.py; utils/utils.py and utils/fmix.py for its helpers), written literally.

One ProMix epoch of N = B rows is one step. The reference follows train() line by line on the same weak and strong
inputs: each network's forwards of the weak and the strong view, the debiased pseudo-labels, MHCS, LGA (one test with
label guessing on, its cap binding), then for each network the mixup and FMix subsets of the chosen rows *indexed out*
and forwarded alone (so the step's masked BatchNorm passes, noisy_jax.models.masked_batch_norm, and its chaining of
each network's running statistics through weak, strong, mixup, FMix, mixup (pseudo head), FMix (pseudo head) are
checked against what the original computes), loss_net1 + loss_net2 + loss_net1_ph + loss_net2_ph, one SGD step of both
networks on its gradient, and the priors' bias_update after it. The draws (lam, permutations, FMix's mask) are the
step's own, from its method key as the program derives them; their distributions against the original's are
tests/test_disc.py's and tests/test_fmix.py's.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.core import fmix as fmix_lib
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.methods import disc
from noisy_jax.methods import promix_train
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import state as state_lib

N = B = 16  # one full batch: one ProMix epoch is one step
C, H, W, LR = 3, 4, 4, 0.3
NUM_EPOCHS = 10  # the run's epochs, the original's --num_epochs E = 9
MODEL, MODEL_KWARGS = "mlp", {"hidden_sizes": (6,), "pseudo_head": True}
# Every branch on: debiasing of both kinds, a bias momentum whose update shows, MHCS (tau 0.4 of 3 classes), w and beta
# in their ramps, and LGA (with its cap binding) in the original's epochs e > E - start_expand = 2.
SETTINGS = promix_train.ProMixSettings(
  pretrain_ep=1,
  warmup_ep=4,
  tau=0.4,
  threshold=0.6,
  start_expand=7,
  debias_output=0.8,
  debias_pl=0.7,
  bias_m=0.9,
  temperature=0.5,
)


@functools.cache
def _setup(seed=1):
  rng = np.random.default_rng(seed)
  model = models.build(MODEL, C, (H, W, 1), kwargs=MODEL_KWARGS)  # BatchNorm over the mesh's axis, as in a run
  pair = state_lib.create_train_state(model, jax.random.PRNGKey(seed), (H, W, 1), optax.sgd(LR), num_networks=2)
  pair = promix_train.with_priors(pair, C)
  priors = {name: jnp.asarray(rng.dirichlet(np.full(C, 2.0), 2), jnp.float32) for name in ("reliable", "unreliable")}
  pair = pair.replace(method_state=priors)  # non-uniform: the debiasing matters
  noisy = rng.integers(0, C, N)
  selected = rng.random((N, 2)) < 0.3  # the last CSS's selections, network k's in column k
  table = label_table_lib.with_method_rows(label_table_lib.create(noisy, C), promix_train.init_rows(N))
  table = label_table_lib.with_method_rows(table, {promix_train.SELECTED: jnp.asarray(selected)})
  images = jnp.asarray(rng.normal(size=(N, H, W, 1)), jnp.float32)
  strong = jnp.asarray(rng.normal(size=(N, H, W, 1)), jnp.float32)  # each row's strong view, fixed
  return pair, table, images, strong, noisy, selected


def _forward(model, params, stats, x):
  """The original's net(x, train=True, use_ph=True) in train mode: both heads and the statistics after the pass."""
  (z, h), updates = model.apply(
    {"params": params, "batch_stats": stats}, x, train=True, pseudo_head=True, mutable=["batch_stats"]
  )
  return z, h, updates["batch_stats"]


def _take(tree, k):
  return jax.tree.map(lambda a: a[k], tree)


def _label_guessing(n_chosen, w_x, batch_size, score1, score2, match, *, tau, threshold):
  """Train_promix.label_guessing, in NumPy (w_x float [B], 1 for the chosen rows)."""
  w_x2 = w_x.copy()
  if (1.0 * n_chosen / batch_size) < threshold:
    high_conf_cond2 = (score1 > tau) * (score2 > tau) * match
    high_conf_cond2 = (1.0 * high_conf_cond2 - w_x) > 0
    hc2_idx = np.where(high_conf_cond2)[0]
    max_to_sel_num = int(batch_size * threshold) - n_chosen
    if high_conf_cond2.sum() > max_to_sel_num:
      score_mean = (score1 + score2) / 2
      idx_remove = np.argsort(-score_mean[hc2_idx], kind="stable")[max_to_sel_num:]
      high_conf_cond2[hc2_idx[idx_remove]] = False
    w_x2[high_conf_cond2] = 1
  return w_x2


def _selections(model, pair, x_w, labels, css, settings, guessing):
  """The original's no_grad block: per network, one-hot pseudo-labels [B, C], chosen and unchosen rows, and what
  each stage added ({"css", "mhcs", "lga", "candidates", "room"}) for the test's preconditions."""
  s = settings
  forward = jax.jit(lambda params, stats: _forward(model, params, stats, x_w)[0])
  px, debias_px = [], []
  for k in range(2):
    z = forward(_take(pair.params, k), _take(pair.batch_stats, k))
    z = np.asarray(z)
    px.append(np.asarray(jax.nn.softmax(z, axis=1)))
    log_pi = np.log(np.asarray(pair.method_state["reliable"][k]))
    debias_px.append(np.asarray(jax.nn.softmax(z - s.debias_pl * log_pi, axis=1)))
  labels_x = np.eye(C, dtype=np.float32)[labels]
  score1, score2 = px[0].max(axis=1), px[1].max(axis=1)
  match = px[0].argmax(axis=1) == px[1].argmax(axis=1)
  out = []
  for k in range(2):
    pred_net = np.eye(C, dtype=np.float32)[debias_px[k].argmax(axis=1)]
    w_x = css[:, k].astype(np.float32)
    high_conf_cond = (labels_x * px[k]).sum(axis=1) > s.tau
    w_x[high_conf_cond] = 1
    pseudo = labels_x * w_x[:, None] + pred_net * (1 - w_x[:, None])
    chosen = w_x == 1
    info = {"css": int(css[:, k].sum()), "mhcs": int((chosen & ~css[:, k]).sum()), "lga": 0}
    if guessing:
      guessed = _label_guessing(int(chosen.sum()), w_x, B, score1, score2, match, tau=s.tau, threshold=s.threshold)
      info["lga"] = int((guessed == 1).sum() - chosen.sum())
      info["candidates"] = int(((score1 > s.tau) & (score2 > s.tau) & match & ~chosen).sum())
      info["room"] = int(B * s.threshold) - int(chosen.sum())
      chosen = guessed == 1
    out.append({"pseudo": pseudo, "chosen": chosen, "info": info})
  return out, px


@functools.partial(jax.jit, static_argnums=0)
def _step_draws(settings, method_key, chosen):
  """Both networks' draws as the step derives them, network k's from fold_in(method_key, k) split in 4 (mixup, FMix,
  mixup of the pseudo head, FMix of the pseudo head); mixup's key split into lam's and the permutation's
  (disc.mixup_subset), FMix's into the permutation's and the mask's (the program's fmix_pass). chosen: bool [2, B]."""
  s = settings

  def network(k, chosen):
    keys = jax.random.split(jax.random.fold_in(method_key, k), 4)

    def mixup(key):
      key_lam, key_perm = jax.random.split(key)
      return disc.mixup_lambda(key_lam, s.mixup_alpha), disc.subset_permutation(key_perm, chosen)

    def fmix(key):
      key_perm, key_mask = jax.random.split(key)
      lam, mask = fmix_lib.sample_mask(
        key_mask, H, W, alpha=s.fmix_alpha, decay_power=s.fmix_decay_power, spectrum=s.fmix_spectrum, dtype=jnp.float32
      )
      return lam, mask, disc.subset_permutation(key_perm, chosen)

    return jax.vmap(mixup)(keys[0::2]), jax.vmap(fmix)(keys[1::2])  # [primary, pseudo head] each

  return jax.vmap(network)(jnp.arange(2), chosen)  # one compiled draw of each kind (a loop would compile 8)


def _draws(settings, method_key, chosen):
  """Per network, [((lam, index), (lam, mask, index))] of the primary and the pseudo head: each permutation of the
  chosen rows as the original's randperm index over the subset inputs_x[idx_chosen]."""
  (lam_mix, perm_mix), (lam_fmix, masks, perm_fmix) = jax.device_get(
    _step_draws(settings, method_key, jnp.asarray(np.stack(chosen)))
  )
  draws = []
  for k in range(2):
    subset = np.flatnonzero(chosen[k])
    as_index = lambda partner, subset=subset: np.searchsorted(subset, partner[subset])
    draws.append(
      [
        (
          (float(lam_mix[k, h]), as_index(perm_mix[k, h])),
          (float(lam_fmix[k, h]), masks[k, h], as_index(perm_fmix[k, h])),
        )
        for h in range(2)
      ]
    )
  return draws


def _reference_loss(params, model, stats, priors, x_w, x_s, sel, draws, settings, *, w, beta):
  """loss_net1 + loss_net2 + loss_net1_ph + loss_net2_ph of train(), the subsets indexed out and forwarded alone, and
  each network's statistics after its six passes."""
  s = settings
  debias_output = lambda logit, bias: logit + s.debias_output * jnp.log(bias)
  ce_soft = lambda outputs, targets: -jnp.sum(jax.nn.log_softmax(outputs, axis=1) * targets, axis=1)  # CE_Soft_Label
  cross_entropy = lambda logits, y: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))
  total, new_stats = 0.0, []
  for k in range(2):
    own, st = _take(params, k), _take(stats, k)
    pi, pi_unrel = priors["reliable"][k], priors["unreliable"][k]
    outputs_x, outputs_x_ph, st = _forward(model, own, st, x_w)
    outputs_x2, outputs_x2_ph, st = _forward(model, own, st, x_s)
    outputs_x_ori = jax.lax.stop_gradient(outputs_x)
    chosen, unchosen = np.flatnonzero(sel[k]["chosen"]), np.flatnonzero(~sel[k]["chosen"])
    pseudo_label_l = jnp.asarray(sel[k]["pseudo"])
    pseudo_label_c = pseudo_label_l[chosen]
    mixed = []
    for head, ((l, idx), (lam, mask, index)) in enumerate(draws[k]):
      pick = lambda z, h, head=head: h if head else z
      x_c = x_w[chosen]
      x_mix = l * x_c + (1 - l) * x_c[idx]
      target_mix = l * pseudo_label_c + (1 - l) * pseudo_label_c[idx]
      z, h, st = _forward(model, own, st, x_mix)
      loss_mix = ce_soft(debias_output(pick(z, h), pi), target_mix).mean()
      m = jnp.asarray(mask)[None, :, :, None]  # FMix's [1, H, W] mask of NCHW images
      x_fmix = m * x_c + (1 - m) * x_c[index]
      z, h, st = _forward(model, own, st, x_fmix)
      logits_fmix = debias_output(pick(z, h), pi)
      y1 = jnp.argmax(pseudo_label_c, axis=1)
      loss_fmix = cross_entropy(logits_fmix, y1) * lam + cross_entropy(logits_fmix, y1[index]) * (1 - lam)
      mixed.append((loss_mix, loss_fmix))
    (loss_mix, loss_fmix), (loss_mix_ph, loss_fmix_ph) = mixed
    loss_cr = ce_soft(debias_output(outputs_x2, pi)[chosen], pseudo_label_c).mean()
    loss_cr_ph = ce_soft(debias_output(outputs_x2_ph, pi)[chosen], pseudo_label_c).mean()
    loss_ce = ce_soft(debias_output(outputs_x, pi)[chosen], pseudo_label_c).mean()
    loss_ce_ph = ce_soft(debias_output(outputs_x_ph, pi)[chosen], pseudo_label_c).mean()
    loss_net = loss_ce + w * (loss_cr + loss_mix + loss_fmix)
    debias_px_unrel = jax.nn.softmax(outputs_x_ori - s.debias_pl * jnp.log(pi_unrel), axis=1)  # debias_pl
    ptx = debias_px_unrel ** (1 / s.temperature)
    ptx = ptx / ptx.sum(axis=1, keepdims=True)
    loss_unrel_ph = (
      ce_soft(debias_output(outputs_x_ph, pi_unrel)[unchosen], ptx[unchosen]).mean()
      + w * ce_soft(debias_output(outputs_x2_ph, pi_unrel)[unchosen], ptx[unchosen]).mean()
    )
    loss_net_ph = beta * loss_unrel_ph + loss_ce_ph + w * (loss_cr_ph + loss_mix_ph + loss_fmix_ph)
    total = total + loss_net + loss_net_ph
    new_stats.append(st)
  return total, new_stats


def _linear_rampup2(current, rampup_length):
  return 1.0 if current >= rampup_length else current / rampup_length


@functools.cache
def _epoch_fn():
  """The epoch program of SETTINGS (one for both tests: one compilation), its strong view each row's fixed array."""
  strong = _setup()[3]

  def no_warmup(*args):
    raise AssertionError("a ProMix epoch, not a warm-up one")

  return promix_train.make_epoch_fn(
    mesh_lib.make_mesh(1), settings=SETTINGS, num_epochs=NUM_EPOCHS, batch_size=B, num_examples=N,
    warmup_epoch_fn=no_warmup, strong_view=lambda key, codes, rows: jnp.take(strong, rows, axis=0),
  )  # fmt: skip


@pytest.mark.parametrize(
  "epoch, guessing, w, beta",
  [(2, False, 1 / 4, 0.1 / 8), (4, True, 3 / 4, 0.3 / 8)],  # the original's e = epoch - 1: 1 (no LGA) and 3
  ids=["css_mhcs", "with_lga"],
)
def test_one_promix_step_is_the_originals_train_step(epoch, guessing, w, beta):
  """One ProMix epoch of one step (optax.sgd: at_epoch's reset of the schedules' count finds none to reset) against
  the original's train() on the same batch, inputs and draws: loss, both networks' parameters, running statistics and
  priors; the table unchanged."""
  pair, table, images, strong, noisy, css = _setup()
  settings = SETTINGS
  key = jax.random.PRNGKey(7)
  before = jax.device_get((table.soft_labels, table.method_rows))
  new_pair, new_table, metrics = _epoch_fn()(jax.tree.map(jnp.copy, pair), table, images, key, jnp.int32(epoch))

  # The reference, on the batch the epoch's key orders (promix_train.full_batches: one batch).
  e = epoch - 1
  rows = np.asarray(jax.random.permutation(key, N))
  x_w, x_s, labels, batch_css = images[rows], strong[rows], noisy[rows], css[rows]
  assert guessing == (e > (NUM_EPOCHS - 1) - settings.start_expand)
  reference_model = models.build(MODEL, C, (H, W, 1), kwargs=MODEL_KWARGS, bn_axis_name=None)
  sel, px = _selections(reference_model, pair, x_w, labels, batch_css, settings, guessing)
  for k in range(2):  # every branch matters: MHCS adds rows, LGA adds rows with its cap binding, none is empty
    info = sel[k]["info"]
    assert info["mhcs"] > 0 and 2 <= sel[k]["chosen"].sum() < B, info
    if guessing:
      assert 0 < info["lga"] == info["room"] < info["candidates"], info
  draws = _draws(settings, epoch_lib.method_key(key, 0), [sel[k]["chosen"] for k in range(2)])
  w_x, beta_x = _linear_rampup2(e, settings.warmup_ep), 0.1 * _linear_rampup2(e, 2 * settings.warmup_ep)
  assert (w_x, beta_x) == pytest.approx((w, beta))  # both ramps under way
  reference = lambda params: _reference_loss(
    params, reference_model, pair.batch_stats, pair.method_state, x_w, x_s, sel, draws, settings, w=w_x, beta=beta_x
  )  # the subsets and draws are concrete (NumPy): traced once
  (want_loss, want_stats), grads = jax.jit(jax.value_and_grad(reference, has_aux=True))(pair.params)

  # the step's loss (its mean per row over the epoch's one step: the total / 2) and accuracy on the given labels
  np.testing.assert_allclose(float(metrics["train_loss"]), float(want_loss) / 2, rtol=1e-5)
  mean_px = (px[0] + px[1]) / 2
  np.testing.assert_allclose(float(metrics["train_accuracy_given"]), np.mean(mean_px.argmax(1) == labels))
  want_params = jax.tree.map(lambda p, g: p - LR * g, pair.params, grads)
  for got, want in zip(jax.tree.leaves(new_pair.params), jax.tree.leaves(want_params)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
  assert float(jnp.max(jnp.abs(jax.tree.leaves(new_pair.params)[0] - jax.tree.leaves(pair.params)[0]))) > 1e-3
  for k in range(2):  # the running averages after the network's six passes
    for got, want in zip(jax.tree.leaves(_take(new_pair.batch_stats, k)), jax.tree.leaves(want_stats[k])):
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(new_pair.step), np.asarray(pair.step) + 1)

  # bias_update after the step, from the undebiased softmax of the weak view
  m = settings.bias_m
  for k in range(2):
    chosen = sel[k]["chosen"]
    pi, pi_unrel = (np.asarray(pair.method_state[name][k]) for name in ("reliable", "unreliable"))
    np.testing.assert_allclose(
      new_pair.method_state["reliable"][k], m * pi + (1 - m) * px[k][chosen].mean(axis=0), rtol=1e-5
    )
    np.testing.assert_allclose(
      new_pair.method_state["unreliable"][k], m * pi_unrel + (1 - m) * px[k][~chosen].mean(axis=0), rtol=1e-5
    )

  # the step reads the table and writes nothing
  np.testing.assert_array_equal(np.asarray(new_table.soft_labels), before[0])
  for name, value in before[1].items():
    np.testing.assert_array_equal(np.asarray(new_table.method_rows[name]), value)
  np.testing.assert_array_equal(np.asarray(new_table.method_rows[promix_train.SELECTED]), css)
