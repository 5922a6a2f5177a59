"""noisy_jax.experiment.ni_erm: the NI-ERM head reaches scikit-learn's LogisticRegression solution (penalised and
unpenalised), one optax step is the hand-computed CE gradient step, fits are deterministic given the key, the K-fold
probabilities are out of sample; experiments/configs/ni_erm_paper.py holds the probe's defaults."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.configs import ni_erm_paper
from noisy_jax.experiment import feature_issues
from noisy_jax.experiment import ni_erm


def mixture(seed, n=300, d=10, c=3, spread=1.2):
  """Gaussian classes with overlapping clouds (not separable): a unique finite unpenalised optimum."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(c, d)) * spread
  y = rng.integers(0, c, n)
  return centres[y] + rng.normal(size=(n, d)), y


def sklearn_probe(x, y, **kwargs):
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top

  return linear_model.LogisticRegression(max_iter=5000, tol=1e-10, **kwargs).fit(x, y)


def test_default_fit_is_sklearns_logistic_regression():
  """The default (lbfgs, C = 1, raw features) minimises scikit-learn's LogisticRegression(C=1) objective: the same
  probabilities on held-out points, to 1e-5, hence the same test accuracy."""
  x, y = mixture(0)
  x_test, y_test = mixture(0, n=200)[0], mixture(0, n=200)[1]
  params = ni_erm.fit(x, y)
  theirs = sklearn_probe(x, y, C=1.0)
  ours = ni_erm.predict_proba(params, x_test)
  np.testing.assert_allclose(ours, theirs.predict_proba(x_test), atol=1e-5)
  assert np.mean(ours.argmax(1) == y_test) == np.mean(theirs.predict(x_test) == y_test)


@pytest.mark.parametrize("optimizer, rate", [("sgd", 0.1), ("adam", 0.01)])
def test_minibatch_optimizers_reach_sklearns_accuracy(optimizer, rate):
  x, y = mixture(1)
  x_test, y_test = mixture(1, n=400)
  params = ni_erm.fit(x, y, optimizer=optimizer, learning_rate=rate, batch_size=32, epochs=40, standardize=True)
  ours = np.mean(ni_erm.predict_proba(params, x_test).argmax(1) == y_test)
  theirs = np.mean(sklearn_probe(x, y).predict(x_test) == y_test)
  assert ours >= theirs - 0.02, (ours, theirs)


def test_unpenalised_full_batch_limit_is_sklearns_unpenalised_solution():
  """C = inf, full batch, lbfgs run to convergence: the predictions of LogisticRegression(C=inf) (no penalty)."""
  x, y = mixture(2, spread=0.8)
  params = ni_erm.fit(x, y, inverse_regularization=np.inf, epochs=400)
  theirs = sklearn_probe(x, y, C=np.inf)
  np.testing.assert_array_equal(ni_erm.predict_proba(params, x).argmax(1), theirs.predict(x))
  np.testing.assert_allclose(ni_erm.predict_proba(params, x), theirs.predict_proba(x), atol=1e-4)


def test_one_sgd_step_is_the_hand_computed_gradient_step():
  """float64: W' = W - lr (X^T (softmax(XW + b) - onehot(y)) / B + W / (C N)), b' = b - lr mean(softmax - onehot),
  for a linear head and for one hidden layer (backpropagation written out)."""
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(16, 5)), rng.integers(0, 3, 16)
  mask, lr, penalty = np.ones(16), 0.3, 0.05
  w, b = rng.normal(size=(5, 3)), rng.normal(size=3)
  w1, b1 = rng.normal(size=(5, 4)), rng.normal(size=4)
  with jax.enable_x64(True):
    opt = optax.sgd(lr)
    layers = [{"w": jnp.asarray(w), "b": jnp.asarray(b)}]
    stepped, _, value = ni_erm.step(opt, layers, opt.init(layers), jnp.asarray(x), jnp.asarray(y), mask, penalty)
    two = [{"w": jnp.asarray(w1), "b": jnp.asarray(b1)}, {"w": jnp.asarray(w[:4] * 0 + w[:4]), "b": jnp.asarray(b)}]
    stepped_two, _, _ = ni_erm.step(opt, two, opt.init(two), jnp.asarray(x), jnp.asarray(y), mask, penalty)
  onehot = np.eye(3)[y]

  def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)

  p = softmax(x @ w + b)
  ce = -np.log(p[np.arange(16), y]).mean() + 0.5 * penalty * np.sum(w**2)
  np.testing.assert_allclose(float(value), ce, rtol=1e-13)
  np.testing.assert_allclose(stepped[0]["w"], w - lr * (x.T @ (p - onehot) / 16 + penalty * w), rtol=1e-13)
  np.testing.assert_allclose(stepped[0]["b"], b - lr * (p - onehot).mean(0), rtol=1e-13)
  h_pre = x @ w1 + b1
  h = np.maximum(h_pre, 0)
  g_out = (softmax(h @ w[:4] + b) - onehot) / 16
  g_h = (g_out @ w[:4].T) * (h_pre > 0)
  np.testing.assert_allclose(stepped_two[1]["w"], w[:4] - lr * (h.T @ g_out + penalty * w[:4]), rtol=1e-12)
  np.testing.assert_allclose(stepped_two[0]["w"], w1 - lr * (x.T @ g_h + penalty * w1), rtol=1e-12)
  np.testing.assert_allclose(stepped_two[0]["b"], b1 - lr * g_h.sum(0), rtol=1e-12)


def test_fit_is_deterministic_given_the_key():
  x, y = mixture(3, n=100)
  settings = {"optimizer": "sgd", "batch_size": 16, "epochs": 3, "hidden_sizes": (8,)}
  a = ni_erm.fit(x, y, key=jax.random.key(1), **settings)
  b = ni_erm.fit(x, y, key=jax.random.key(1), **settings)
  c = ni_erm.fit(x, y, key=jax.random.key(2), **settings)
  for la, lb, lc in zip(a["layers"], b["layers"], c["layers"]):
    np.testing.assert_array_equal(la["w"], lb["w"])
  assert not np.allclose(a["layers"][0]["w"], c["layers"][0]["w"])  # other init and shuffles


def test_mlp_fits_what_a_linear_head_cannot():
  """XOR of two coordinates: a linear head stays near chance, one hidden layer of 16 separates it."""
  rng = np.random.default_rng(0)
  x = rng.uniform(-1, 1, size=(400, 2))
  y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(int)
  linear = ni_erm.fit(x, y)
  mlp = ni_erm.fit(x, y, hidden_sizes=(16,), optimizer="adam", learning_rate=0.02, batch_size=50, epochs=150)
  assert np.mean(ni_erm.predict_proba(linear, x).argmax(1) == y) < 0.7
  assert np.mean(ni_erm.predict_proba(mlp, x).argmax(1) == y) > 0.9


def test_out_of_sample_rows_come_from_heads_that_never_saw_them():
  """Random labels: out-of-sample p(given) is about chance (the in-sample fit memorises); on the mixture the K-fold
  P equals scikit-learn's cross_val_predict over feature_issues' folds with the same objective (to 1e-4)."""
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(120, 60)), rng.integers(0, 3, 120)
  rows = np.arange(120)
  out = ni_erm.out_of_sample_probabilities(x, y, num_folds=3, epochs=200)
  inside = ni_erm.predict_proba(ni_erm.fit(x, y, epochs=200), x)
  assert out[rows, y].mean() < 0.42 and inside[rows, y].mean() > 0.6, (out[rows, y].mean(), inside[rows, y].mean())
  x, y = mixture(4, n=150)
  folds = model_selection.StratifiedKFold(n_splits=4, shuffle=True, random_state=5)
  model = linear_model.LogisticRegression(C=1.0, max_iter=5000, tol=1e-10)
  theirs = model_selection.cross_val_predict(model, x, y, cv=folds, method="predict_proba")
  ours = ni_erm.out_of_sample_probabilities(x, y, num_folds=4, seed=5)
  np.testing.assert_allclose(ours, theirs, atol=1e-4)  # float32 fits, 100 iterations: measured 2.5e-5


def test_out_of_sample_gives_zero_to_a_class_missing_from_the_training_folds():
  x, y = mixture(5, n=60)
  y[17] = 3  # one example of class 3; class 4 has none
  with pytest.warns(UserWarning):
    probs = ni_erm.out_of_sample_probabilities(x, y, num_classes=5, num_folds=3)
  np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
  assert probs[17, 3] == 0 and np.all(probs[:, 4] == 0) and np.sum(probs[:, 3] > 0) > 0


def test_bad_settings_are_refused():
  x, y = mixture(0, n=30)
  with pytest.raises(ValueError, match="batch_size=8 with optimizer='lbfgs'"):
    ni_erm.fit(x, y, batch_size=8)
  with pytest.raises(ValueError, match="optimizer"):
    ni_erm.fit(x, y, optimizer="rmsprop")
  with pytest.raises(ValueError, match="epochs=0"):
    ni_erm.fit(x, y, epochs=0)


def test_paper_config_holds_the_probes_defaults():
  """experiments/configs/ni_erm_paper.py: its probe settings are ni_erm's defaults (or a documented difference)."""
  for name, row in ni_erm_paper.ROWS.items():
    probe = row.probe
    assert probe.optimizer == ni_erm.DEFAULT_OPTIMIZER, name
    assert probe.max_iter == ni_erm.DEFAULT_EPOCHS and probe.max_iter in probe.max_iter_grid, name
    assert probe.inverse_regularization == ni_erm.DEFAULT_INVERSE_REGULARIZATION, name
    assert probe.inverse_regularization in probe.inverse_regularization_grid, name
    assert probe.batch_size == ni_erm.DEFAULT_BATCH_SIZE and probe.standardize == ni_erm.DEFAULT_STANDARDIZE, name
    assert tuple(probe.hidden_sizes) == ni_erm.DEFAULT_HIDDEN_SIZES, name
    assert row.backbone == "dinov2_vitl14" and row.image_size == 224 and row.feature_dim == 1024, name
    assert row.sources and all(row.sources.values()), name
  assert ni_erm_paper.row("cifar10n_worst").noise_key == "worse_label"
  assert set(ni_erm_paper.DIFFERENCES) >= {"grid_search", "solver"}
  assert feature_issues.DEFAULT_NUM_FOLDS == 5  # the grid search's cv=5, and the probe's folds
