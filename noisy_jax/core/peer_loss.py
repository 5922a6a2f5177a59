"""Peer loss (Liu & Guo, ICML 2020, arXiv 1910.03231): its pure pieces (the method: noisy_jax.methods.peer_loss).

For an example n with logits z_n [C] and label y_n, and a peer pair drawn independently of it and of each other (the
inputs x_n1 of one random training example, the label y_n2 of another):

  l_n = CE(f(x_n), y_n) - alpha CE(f(x_n1), y_n2)

`peer_loss` is l [B] from the batch's logits and labels and the peers' logits and labels [B, C]; `draw_peer_rows`
draws the peer rows n1, n2 of a batch from the whole training split; `alpha_schedule` is the CIFAR replication's
alpha per epoch and `lr_factor` its learning-rate plan.

How the codes draw the peers (both from the whole training split, never from the batch):
- UCSC-REAL/cifar-10-100n@b5a80e6 main_min.py:172-185 (a draft: its peer branch computes no loss, and HEAD has no
  peer loss): two extra loaders over the training set, each with RandomSampler(replacement=True): x_n1 from one,
  y_n2 from the other, batch by batch (main_min.py:70-82), a second forward of the network on x_n1 (train mode).
- KlemenVovk/noisy-labels (the CIFAR-N replication) peer_loss.py:122-132 with data/pipelines/shuffle.py: a second
  training loader, shuffled each epoch, over a copy of the training set whose images are permuted by one random
  permutation pi fixed for the run: its batch gives (x_pi(j), y_j), a second forward on x_pi(j).
- gohsyi/PeerLoss models/nn.py:318-321 (the paper's own, binary UCI runs): each step draws the x rows and the y rows
  by two independent np.random.choice(m, batchsize_, replace=False) over the training set.
`draw_peer_rows` follows the first: two independent uniform draws with replacement, from two key streams.

The cross entropy: the paper's and the draft's main term is exact (log_softmax); the replication's
CrossEntropyLossStable (peer_loss/utils.py:5-14) is -log(softmax(z)_y + 1e-5) for both terms, and the draft's peer
term -log(softmax(z)_y + 1e-8) (loss.py:147): `log_epsilon` (0: exact, the default) names that offset.

The method is noisy_jax.methods.peer_loss: a method's objective sees only its batch, and the peers are other
examples of the training split, normalised and augmented as a batch is, so the method has its own epoch program,
which holds the whole split, draws each step's peer rows and runs the second forward. Taking the peers from the
batch's own rows instead would change the estimator (the peer term would reuse the batch's images, their augmentation
and BatchNorm statistics): not offered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

# Key streams of draw_peer_rows: jax.random.fold_in(key, stream).
PEER_INPUT_STREAM = 0
PEER_LABEL_STREAM = 1
# The replication's epsilon in CrossEntropyLossStable (peer_loss/utils.py:6).
REPLICATION_LOG_EPSILON = 1e-5
# f_alpha's two settings (peer_loss/utils.py:18-37): 'sparse' (its r <= 0.3, the one PeerLoss uses: r=0.1,
# peer_loss.py:66) and 'uniform' (r > 0.3). Each: (start, stop, count) of the torch.linspace pieces concatenated.
ALPHA_PIECES = {
  "sparse": ((0.0, 0.0, 20), (0.0, 1.0, 20), (1.0, 2.0, 50), (2.0, 5.0, 50), (5.0, 10.0, 100), (10.0, 20.0, 100)),
  "uniform": ((0.0, 0.0, 20), (0.0, 0.1, 20), (1.0, 2.0, 50), (2.0, 2.5, 50), (2.5, 3.3, 100), (3.3, 5.0, 100)),
}
# peer_loss/utils.py:40-52: the learning rate per epoch before its division by 1 + alpha.
REPLICATION_LR_PLAN = (0.1,) * 40 + (0.01,) * 40 + (1e-3,) * 40 + (1e-4,) * 40 + (1e-5,) * 40 + (1e-6,) * 40
REPLICATION_LR_PLAN += (1e-7,) * 40 + (1e-8,) * 20


def _cross_entropy(logits, labels, log_epsilon) -> jax.Array:
  """-sum_c y_c log q_c [...]: q = softmax(z) (log_epsilon 0) or softmax(z) + log_epsilon."""
  if _checks.is_concrete(log_epsilon) and float(log_epsilon) == 0.0:
    log_q = jax.nn.log_softmax(logits, axis=-1)
  else:
    log_q = jnp.log(jax.nn.softmax(logits, axis=-1) + log_epsilon)
  return -jnp.sum(labels * log_q, axis=-1)


def peer_loss(logits, labels, peer_logits, peer_labels, *, alpha, log_epsilon: float = 0.0) -> jax.Array:
  """l_n = CE(z_n, y_n) - alpha CE(z'_n, y'_n) [...] (module docstring).

  Args:
    logits: [..., C] the batch's logits z.
    labels: [..., C] its labels y (one-hot or soft).
    peer_logits: [..., C] the logits z' of the peer inputs x_n1.
    peer_labels: [..., C] the peer labels y_n2.
    alpha: the peer term's weight (>= 0; a number or a traced value).
    log_epsilon: 0 (exact cross entropies) or the offset inside the log (the replication's 1e-5).

  Returns:
    [...] per-example loss in the logits' dtype, computed in at least float32.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf, high_open=True)
  _checks.check_range("log_epsilon", log_epsilon, 0.0, 1.0)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  peer_logits, peer_labels, _ = loss_parts.prepare(peer_logits, peer_labels)
  _checks.check_same_shape("logits", logits, "peer_logits", peer_logits)
  weight = loss_parts.hyper(alpha, logits.dtype)
  own = _cross_entropy(logits, labels, log_epsilon)
  peer = _cross_entropy(peer_logits, peer_labels, log_epsilon)
  return (own - weight * peer).astype(out_dtype)


def draw_peer_rows(key: jax.Array, batch_size: int, num_examples: int) -> tuple[jax.Array, jax.Array]:
  """The peer rows of one batch: (input rows n1 [B], label rows n2 [B]) int32, each uniform over [0, N) with
  replacement, from the independent streams fold_in(key, PEER_INPUT_STREAM) and fold_in(key, PEER_LABEL_STREAM)
  (RandomSampler(replacement=True) twice, cifar-10-100n@b5a80e6 main_min.py:172-173)."""
  if int(batch_size) < 1 or int(num_examples) < 1:
    raise ValueError(f"batch_size={batch_size!r} and num_examples={num_examples!r} must both be >= 1.")
  draw = lambda stream: jax.random.randint(jax.random.fold_in(key, stream), (int(batch_size),), 0, int(num_examples))
  return draw(PEER_INPUT_STREAM), draw(PEER_LABEL_STREAM)


def _linspace_like_torch(start: float, stop: float, count: int) -> np.ndarray:
  """torch.linspace(start, stop, count) [count] float32 as its CPU kernel computes it: the step
  (stop - start) / (count - 1) in float32, then start + i step for the first half and stop - (count - 1 - i) step
  for the second, each fused (one rounding: float64 here, then float32)."""
  step = np.float64((np.float32(stop) - np.float32(start)) / np.float32(count - 1))
  i = np.arange(count, dtype=np.float64)
  first = np.float64(np.float32(start)) + step * i
  second = np.float64(np.float32(stop)) - step * (count - 1 - i)
  return np.where(i < count // 2, first, second).astype(np.float32)


def alpha_schedule(setting: str = "sparse") -> np.ndarray:
  """The replication's alpha for epochs 0 ... 339 [340] float32 (f_alpha, peer_loss/utils.py:18-37); later epochs
  use the last value (its clamp). The epoch is the run's 0-based one, the CE epoch 0 included (module docstring)."""
  _checks.check_choice("alpha setting", setting, tuple(ALPHA_PIECES))
  return np.concatenate([_linspace_like_torch(*piece) for piece in ALPHA_PIECES[setting]])


def alpha_at(epoch: int, setting: str = "sparse") -> float:
  """alpha of 0-based `epoch` (f_alpha: clamped to [0, 339])."""
  schedule = alpha_schedule(setting)
  return float(schedule[min(max(int(epoch), 0), schedule.shape[0] - 1)])


def lr_factor(epoch: int, setting: str = "sparse") -> float:
  """The replication's learning-rate factor of 0-based `epoch` (lr_plan, peer_loss/utils.py:40-52; SGD lr=1 times
  this): its plan's rate / (1 + alpha(epoch)). Its clamp to [0, 319] overruns its 300-entry plan (an IndexError
  from epoch 300 on); here epochs past 299 use the last entry."""
  epoch = min(max(int(epoch), 0), len(REPLICATION_LR_PLAN) - 1)
  return REPLICATION_LR_PLAN[epoch] / (1.0 + alpha_at(epoch, setting))
