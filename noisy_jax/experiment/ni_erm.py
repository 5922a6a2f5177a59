"""NI-ERM: a linear (or small MLP) head trained with plain cross entropy on the labels as given, over frozen features.

Noise-ignorant empirical risk minimisation (Zhu, Zhang, Gangrade & Scott, "Label Noise: Ignorance Is Bliss",
NeurIPS 2024, arXiv:2411.00079): fit the classifier to the noisy labels as if they were clean; on the features of a
strong self-supervised backbone (DINOv2 ViT-L/14 for CIFAR-N) a linear classifier fitted this way is their CIFAR-N
result. Their code (github.com/allan-z/label_noise_ignorance, main.py at commit
18f88a77c6e125f033bd7ac52f2347de41ddf2be) fits scikit-learn's multinomial LogisticRegression with lbfgs, full batch,
on the raw backbone outputs (no standardisation), C and max_iter chosen by 5-fold GridSearchCV on the noisy labels
over C in {1e-4, ..., 100} and max_iter in {10, 20, 50, 100}.

The objective here, for a head f_theta (linear: W x + b; MLP: ReLU hidden layers, then linear) on N training rows:

  L(theta) = (1 / N) sum_i -log softmax(f_theta(x_i))[y_i] + ||W||^2 / (2 C N)

(||W||^2 the squared weights of every layer, biases not penalised), i.e. scikit-learn's LogisticRegression(C)
objective sum_i CE_i + ||W||^2 / (2 C) divided by N: the same minimiser; C = inf is the unpenalised fit. A minibatch
step uses the batch's mean CE in place of the full mean and the same penalty.

Optimisers (optax): 'lbfgs' (the default, the original's solver: full batch, optax.lbfgs with its zoom line search,
`epochs` iterations; starts at zero as scikit-learn's); 'sgd' and 'adam' (minibatch, `learning_rate`, shuffled each
epoch from the PRNG key). The training of all epochs is one jitted program: a fori_loop over the epochs (their count
traced, not compiled in), each a lax.scan over its batches (the last batch of an epoch padded and masked). The
features live on the device for the whole fit.
Defaults and their sources: DEFAULT_* below. What differs from the original: C and the iterations are arguments here
(C = 1 is scikit-learn's default and one point of their grid; noisy_jax.experiment.ni_erm_grid runs the original's
grid search over this head, `fit_path` giving a fold's heads of every iteration count from one run), optax's L-BFGS
(memory 10, zoom line search)
in place of scipy's (memory 10, More-Thuente-like line search, gradient tolerance 1e-4): the same objective, so the
same solution once both have converged, not the same iterates.

For label issues, `out_of_sample_probabilities` fits one head per fold of the same StratifiedKFold as
feature_issues.probe_probabilities, so each row of P comes from a head that never saw its label.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from noisy_jax.core import _checks
from noisy_jax.core import errors

OPTIMIZERS = ("lbfgs", "sgd", "adam")
DEFAULT_OPTIMIZER = "lbfgs"  # main.py: LogisticRegression(solver='lbfgs') (the grid's only solver)
DEFAULT_EPOCHS = 100  # lbfgs iterations: main.py's grid max_iter in {10, 20, 50, 100}, the largest
DEFAULT_INVERSE_REGULARIZATION = 1.0  # C: scikit-learn's default, in main.py's grid {1e-4, ..., 100} (CV-chosen)
DEFAULT_BATCH_SIZE = None  # full batch: lbfgs in main.py fits all training rows at once
DEFAULT_STANDARDIZE = False  # main.py feeds the backbone's outputs as they are
DEFAULT_HIDDEN_SIZES = ()  # linear: the paper's NI-ERM classifier
DEFAULT_LEARNING_RATES = {"sgd": 0.1, "adam": 1e-3}  # our choice (the original has no minibatch optimiser)


def _init_layers(key, sizes, dtype):
  """Layers [{'w': [d_in, d_out], 'b': [d_out]}]: LeCun-normal hidden layers from `key`, the output layer zero (a
  linear head starts at zero, as scikit-learn's lbfgs does)."""
  layers = []
  keys = jax.random.split(key, max(1, len(sizes) - 1))
  for index, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
    last = index == len(sizes) - 2
    w = jnp.zeros((d_in, d_out), dtype)
    if not last:
      w = jax.random.normal(keys[index], (d_in, d_out), dtype) / np.sqrt(d_in)
    layers.append({"w": w, "b": jnp.zeros((d_out,), dtype)})
  return layers


def logits(layers, x):
  """f_theta(x) [..., C]: ReLU between the layers, none after the last."""
  for layer in layers[:-1]:
    x = jax.nn.relu(x @ layer["w"] + layer["b"])
  return x @ layers[-1]["w"] + layers[-1]["b"]


def objective(layers, x, y, mask, penalty):
  """sum_i mask_i CE_i / sum_i mask_i + penalty / 2 * sum over layers ||w||^2 (biases not penalised)."""
  log_probs = jax.nn.log_softmax(logits(layers, x))
  ce = -jnp.take_along_axis(log_probs, y[:, None], axis=1)[:, 0]
  decay = sum(jnp.sum(layer["w"] ** 2) for layer in layers)
  return jnp.sum(mask * ce) / jnp.maximum(jnp.sum(mask), 1.0) + 0.5 * penalty * decay


def make_optimizer(name: str, learning_rate: float | None) -> optax.GradientTransformation:
  """optax's 'lbfgs' (learning_rate None: the line search's step alone), 'sgd' or 'adam'."""
  _checks.check_choice("optimizer", name, OPTIMIZERS)
  if name == "lbfgs":
    return optax.lbfgs(learning_rate=learning_rate)
  rate = DEFAULT_LEARNING_RATES[name] if learning_rate is None else learning_rate
  return optax.sgd(rate) if name == "sgd" else optax.adam(rate)


def step(optimizer, layers, opt_state, x, y, mask, penalty):
  """One optimiser step on the batch (x, y, mask): (layers, opt_state, loss before the step)."""
  value_fn = functools.partial(objective, x=x, y=y, mask=mask, penalty=penalty)
  value, grads = jax.value_and_grad(value_fn)(layers)
  updates, opt_state = optimizer.update(grads, opt_state, layers, value=value, grad=grads, value_fn=value_fn)
  return optax.apply_updates(layers, updates), opt_state, value


@functools.partial(jax.jit, static_argnames=("optimizer_name", "learning_rate", "batch_size"))
def _train(layers, x, y, weight, penalty, key, stops, *, optimizer_name, learning_rate, batch_size):
  """All epochs as one program: a lax.scan over the segments between `stops` [S] (increasing epoch counts, traced,
  so any counts share the compiled program), each a fori_loop over its epochs, each epoch a lax.scan over its
  batches. Returns the layers after each stop, stacked on a leading axis [S, ...]. weight [N]: 1 for a row, 0 for
  padding (full batch only); epoch e shuffles with fold_in(key, e)."""
  optimizer = make_optimizer(optimizer_name, learning_rate)
  n = x.shape[0]
  num_batches = -(-n // batch_size)
  padded = num_batches * batch_size

  def epoch(e, carry):
    layers, opt_state = carry
    order = jnp.arange(n) if batch_size >= n else jax.random.permutation(jax.random.fold_in(key, e), n)
    index = jnp.concatenate([order, jnp.zeros(padded - n, order.dtype)]).reshape(num_batches, batch_size)
    mask = jnp.concatenate([weight[order], jnp.zeros(padded - n, x.dtype)]).reshape(num_batches, batch_size)

    def batch(carry, rows):
      layers, opt_state = carry
      layers, opt_state, value = step(optimizer, layers, opt_state, x[rows[0]], y[rows[0]], rows[1], penalty)
      return (layers, opt_state), value

    carry, _ = jax.lax.scan(batch, (layers, opt_state), (index, mask))
    return carry

  def segment(carry, stop):
    start, layers, opt_state = carry
    layers, opt_state = jax.lax.fori_loop(start, stop, epoch, (layers, opt_state))
    return (stop, layers, opt_state), layers

  _, snapshots = jax.lax.scan(segment, (jnp.zeros((), stops.dtype), layers, optimizer.init(layers)), stops)
  return snapshots


def fit_path(
  features,
  labels,
  *,
  epochs=(DEFAULT_EPOCHS,),
  num_classes: int | None = None,
  key=None,
  hidden_sizes=DEFAULT_HIDDEN_SIZES,
  optimizer: str = DEFAULT_OPTIMIZER,
  learning_rate: float | None = None,
  batch_size: int | None = DEFAULT_BATCH_SIZE,
  inverse_regularization: float = DEFAULT_INVERSE_REGULARIZATION,
  standardize: bool = DEFAULT_STANDARDIZE,
  dtype=jnp.float32,
  pad_rows: int | None = None,
) -> list[dict]:
  """Fits the NI-ERM head (module docstring) to (X, y) in one run; returns its params after each epoch count of
  `epochs` (so (10, 20, 50, 100) gives the four heads of fits of 10, 20, 50 and 100 epochs, from one run of 100).

  Args:
    features: X [N, D], real numbers (copied to the device in `dtype`).
    labels: y [N], the given class ids in [0, C).
    epochs: the epoch counts to return the head at (lbfgs: iterations), each >= 1, in increasing order.
    num_classes: C, the head's outputs; default max(y) + 1.
    key: PRNG key of the MLP's initial weights and the minibatch shuffles; default jax.random.key(0).
    hidden_sizes: widths of the MLP's hidden layers; () for the linear head.
    optimizer: 'lbfgs' (full batch only), 'sgd' or 'adam'.
    learning_rate: the optimiser's; None: lbfgs' line search alone, DEFAULT_LEARNING_RATES otherwise.
    batch_size: rows per step, >= 1; None: all N.
    inverse_regularization: C > 0 (penalty ||W||^2 / (2 C N)); np.inf: none.
    standardize: centre and scale every feature by the training rows' mean and standard deviation (a constant
      feature is centred only); stored in the params and applied by `predict_proba`.
    dtype: of the features and parameters (float64 needs jax.enable_x64).
    pad_rows: full batch only: append zero-weight rows up to this many (the objective is unchanged), so that fits
      on a few different N (the folds of `out_of_sample_probabilities`) share one compiled program.

  Returns:
    [{'layers': [{'w', 'b'}, ...], 'center': [D], 'scale': [D]}], one per epoch count.
  """
  features, labels = np.asarray(features, np.float64), np.asarray(labels, np.int64)
  n = len(labels)
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  _checks.check_choice("optimizer", optimizer, OPTIMIZERS)
  _checks.check_range("inverse_regularization", inverse_regularization, 0, np.inf, low_open=True)
  stops = [int(e) for e in np.atleast_1d(epochs)]
  if not stops or stops[0] < 1 or any(b <= a for a, b in zip(stops, stops[1:])):
    shown = stops[0] if len(stops) == 1 else tuple(stops)
    raise errors.InputError(f"epochs={shown}; allowed: counts >= 1 (several: in increasing order).")
  batch_size = n if batch_size is None else int(batch_size)
  if batch_size < 1:
    raise errors.InputError(f"batch_size={batch_size}; allowed: >= 1, or None (all N = {n} rows).")
  if optimizer == "lbfgs" and batch_size < n:
    raise errors.InputError(
      f"batch_size={batch_size} with optimizer='lbfgs'; L-BFGS runs on the full batch (batch_size=None or >= N = "
      f"{n}); use optimizer='sgd' or 'adam' for minibatches."
    )
  if any(int(h) < 1 for h in hidden_sizes):
    raise errors.InputError(f"hidden_sizes={tuple(hidden_sizes)}; allowed: widths >= 1.")
  center, scale = np.zeros(features.shape[1]), np.ones(features.shape[1])
  if standardize:
    center, std = features.mean(axis=0), features.std(axis=0)
    scale = np.where(std > 0, std, 1.0)
  key = jax.random.key(0) if key is None else key
  init_key, train_key = jax.random.split(key)
  sizes = (features.shape[1], *(int(h) for h in hidden_sizes), num_classes)
  penalty = 0.0 if np.isinf(inverse_regularization) else 1.0 / (inverse_regularization * n)
  total = n if pad_rows is None or batch_size < n else max(n, int(pad_rows))
  x = np.zeros((total, features.shape[1]))
  x[:n] = (features - center) / scale
  snapshots = _train(
    _init_layers(init_key, sizes, dtype),
    jax.device_put(jnp.asarray(x, dtype)),
    jnp.asarray(np.pad(labels, (0, total - n))),
    jnp.asarray(np.arange(total) < n, dtype),
    jnp.asarray(penalty, dtype),
    train_key,
    jnp.asarray(stops),
    optimizer_name=optimizer,
    learning_rate=None if learning_rate is None else float(learning_rate),
    batch_size=total if batch_size >= n else batch_size,
  )
  center, scale = jnp.asarray(center, dtype), jnp.asarray(scale, dtype)
  return [
    {"layers": jax.tree.map(lambda leaf, s=s: leaf[s], snapshots), "center": center, "scale": scale}
    for s in range(len(stops))
  ]


def fit(features, labels, *, epochs: int = DEFAULT_EPOCHS, **settings) -> dict:
  """The NI-ERM head fitted to (X, y) for `epochs` epochs (lbfgs: iterations), >= 1: `fit_path`'s head at
  (epochs,), `settings` as fit_path takes them (num_classes, key, hidden_sizes, optimizer, learning_rate, batch_size,
  inverse_regularization, standardize, dtype, pad_rows)."""
  return fit_path(features, labels, epochs=(epochs,), **settings)[0]


@jax.jit
def _probabilities(params, x):
  return jax.nn.softmax(logits(params["layers"], (x - params["center"]) / params["scale"]))


def predict_proba(params, features) -> np.ndarray:
  """softmax(f_theta(standardise(X))) [N, C] (float64 NumPy) of a head returned by `fit`."""
  x = jnp.asarray(np.asarray(features, np.float64), params["center"].dtype)
  return np.asarray(_probabilities(params, x), np.float64)


@jax.jit
def _predictions(params, x):
  return jnp.argmax(logits(params["layers"], (x - params["center"]) / params["scale"]), axis=1)


def predict(params, features) -> np.ndarray:
  """argmax_c f_theta(standardise(X))_c [N] (int64 NumPy; the first of tied logits, as scikit-learn's predict) of a
  head returned by `fit`."""
  x = jnp.asarray(np.asarray(features, np.float64), params["center"].dtype)
  return np.asarray(_predictions(params, x), np.int64)


def out_of_sample_probabilities(
  features, labels, *, num_classes: int | None = None, num_folds: int = 5, seed: int = 0, **fit_kwargs
) -> np.ndarray:
  """P [N, C] (float64, rows sum to 1): P[F_j] from the head fitted on the other folds, F_1..F_K = scikit-learn's
  StratifiedKFold(K, shuffle=True, random_state=seed) over y (feature_issues.probe_probabilities' folds).

  Each fold's head is fitted on the classes its training rows hold (relabelled 0..C'-1; key fold_in(key(seed), j));
  a class absent from them gets probability 0 in that fold, and a fold trained on one class gives it probability 1.

  Args:
    features: X [N, D].
    labels: y [N], the given class ids in [0, C).
    num_classes: C; default max(y) + 1.
    num_folds: K, 2 <= K <= N.
    seed: the fold shuffle and the heads' PRNG keys.
    **fit_kwargs: `fit`'s settings (optimizer, epochs, inverse_regularization, hidden_sizes, ...).
  """
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top

  features, labels = np.asarray(features, np.float64), np.asarray(labels, np.int64)
  n = len(labels)
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  if not 2 <= num_folds <= n:
    raise errors.InputError(f"num_folds={num_folds}; allowed: 2 <= num_folds <= N = {n}.")
  folds = model_selection.StratifiedKFold(n_splits=num_folds, shuffle=True, random_state=seed)
  probs = np.zeros((n, num_classes), np.float64)
  base_key = jax.random.key(seed)
  splits = list(folds.split(features, labels))
  largest = max(len(train_rows) for train_rows, _ in splits)
  for fold, (train_rows, held_out_rows) in enumerate(splits):
    seen, train_labels = np.unique(labels[train_rows], return_inverse=True)
    if len(seen) == 1:
      probs[held_out_rows, seen[0]] = 1.0
      continue
    params = fit(
      features[train_rows],
      train_labels,
      num_classes=len(seen),
      key=jax.random.fold_in(base_key, fold),
      pad_rows=largest,
      **fit_kwargs,
    )
    probs[np.ix_(held_out_rows, seen)] = predict_proba(params, features[held_out_rows])
  return probs / probs.sum(axis=1, keepdims=True)
