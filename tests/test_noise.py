"""Transition matrices, exact-rate corruption and noise reports against hand counts and independent facts."""

import hashlib
import json

import numpy as np
import pytest

from noisy_jax.core import noise

# CIFAR-100 fine label names in dataset order (the meta file's fine_label_names, as listed by TFDS/HF).
REFERENCE_FINE_NAMES = (
  "apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel can "
  "castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur dolphin "
  "elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion lizard lobster "
  "man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear pickup_truck "
  "pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal shark shrew skunk "
  "skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank telephone television "
  "tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman worm"
).split()
# Coarse label of each fine label, read off the dataset's (fine_label, coarse_label) pairs (independent source).
REFERENCE_COARSE_OF_FINE = np.array(
  [
    4,
    1,
    14,
    8,
    0,
    6,
    7,
    7,
    18,
    3,
    3,
    14,
    9,
    18,
    7,
    11,
    3,
    9,
    7,
    11,
    6,
    11,
    5,
    10,
    7,
    6,
    13,
    15,
    3,
    15,
    0,
    11,
    1,
    10,
    12,
    14,
    16,
    9,
    11,
    5,
    5,
    19,
    8,
    8,
    15,
    13,
    14,
    17,
    18,
    10,
    16,
    4,
    17,
    4,
    2,
    0,
    17,
    4,
    18,
    17,
    10,
    3,
    2,
    12,
    12,
    16,
    12,
    1,
    9,
    19,
    2,
    10,
    0,
    1,
    16,
    12,
    9,
    13,
    15,
    13,
    16,
    19,
    2,
    4,
    6,
    19,
    5,
    5,
    8,
    19,
    18,
    1,
    2,
    15,
    6,
    0,
    17,
    8,
    14,
    13,
  ]
)


def _labels(class_sizes, seed=0):
  """Shuffled labels with class i appearing class_sizes[i] times."""
  labels = np.repeat(np.arange(len(class_sizes)), class_sizes)
  return np.random.default_rng(seed).permutation(labels)


def _recount(clean, noisy, num_classes):
  counts = np.zeros((num_classes, num_classes), np.int64)
  for c, n in zip(clean, noisy):
    counts[c, n] += 1
  return counts


def _assert_stochastic(transition):
  assert transition.dtype == np.float64
  assert np.all(transition >= 0)
  np.testing.assert_allclose(transition.sum(axis=1), 1.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------- matrices


def test_symmetric_both_conventions():
  t = noise.symmetric_transition(5, 0.4)
  _assert_stochastic(t)
  np.testing.assert_allclose(np.diag(t), 0.6)
  np.testing.assert_allclose(t[~np.eye(5, dtype=bool)], 0.1)
  t_jo = noise.symmetric_transition(5, 0.4, include_true_class=True)
  _assert_stochastic(t_jo)
  np.testing.assert_allclose(np.diag(t_jo), 0.6 + 0.08)
  np.testing.assert_allclose(t_jo[~np.eye(5, dtype=bool)], 0.08)
  # Effective flip rate of the Joint Optimization convention: rate (C - 1) / C.
  np.testing.assert_allclose(1 - np.diag(t_jo), 0.4 * 4 / 5)


def test_pairflip():
  t = noise.pairflip_transition(4, 0.3)
  _assert_stochastic(t)
  expected = np.array([[0.7, 0.3, 0, 0], [0, 0.7, 0.3, 0], [0, 0, 0.7, 0.3], [0.3, 0, 0, 0.7]])
  np.testing.assert_allclose(t, expected)


def test_asymmetric_cifar10_and_mnist_maps():
  t = noise.asymmetric_transition("cifar10", 0.4)
  _assert_stochastic(t)
  flips = {(i, j) for i, j in zip(*np.nonzero(t)) if i != j}
  assert flips == {(9, 1), (2, 0), (4, 7), (3, 5), (5, 3)}
  for i, j in flips:
    assert t[i, j] == pytest.approx(0.4) and t[i, i] == pytest.approx(0.6)
  for clean_class in (0, 1, 6, 7, 8):
    np.testing.assert_array_equal(t[clean_class], np.eye(10)[clean_class])
  t = noise.asymmetric_transition("mnist", 0.25)
  _assert_stochastic(t)
  assert {(i, j) for i, j in zip(*np.nonzero(t)) if i != j} == {(7, 1), (2, 7), (5, 6), (6, 5), (3, 8)}


def test_cifar100_names_and_superclasses_match_the_dataset():
  assert list(noise.CIFAR100_FINE_NAMES) == REFERENCE_FINE_NAMES
  assert len(set(noise.CIFAR100_FINE_NAMES)) == 100
  np.testing.assert_array_equal(noise.CIFAR100_COARSE_OF_FINE, REFERENCE_COARSE_OF_FINE)
  np.testing.assert_array_equal(np.bincount(noise.CIFAR100_COARSE_OF_FINE), np.full(20, 5))
  assert len(noise.CIFAR100_COARSE_NAMES) == 20
  assert noise.CIFAR100_COARSE_NAMES[4] == "fruit_and_vegetables"
  assert noise.CIFAR100_COARSE_NAMES[9] == "large_man-made_outdoor_things"
  assert noise.CIFAR100_COARSE_NAMES[19] == "vehicles_2"
  # Independent statements of a few superclasses (cs.toronto.edu/~kriz/cifar.html).
  statements = {
    "fruit_and_vegetables": {"apple", "mushroom", "orange", "pear", "sweet_pepper"},
    "people": {"baby", "boy", "girl", "man", "woman"},
    "trees": {"maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"},
    "vehicles_1": {"bicycle", "bus", "motorcycle", "pickup_truck", "train"},
    "aquatic_mammals": {"beaver", "dolphin", "otter", "seal", "whale"},
  }
  for coarse_name, members in statements.items():
    coarse_id = noise.CIFAR100_COARSE_NAMES.index(coarse_name)
    ids = np.flatnonzero(noise.CIFAR100_COARSE_OF_FINE == coarse_id)
    assert {noise.CIFAR100_FINE_NAMES[i] for i in ids} == members
  assert noise.CIFAR100_FINE_NAMES.index("apple") == 0
  assert noise.CIFAR100_FINE_NAMES.index("worm") == 99


def test_cifar100_asymmetric_cycles_inside_true_superclasses():
  t = noise.asymmetric_transition("cifar100", 0.3)
  _assert_stochastic(t)
  coarse = REFERENCE_COARSE_OF_FINE
  off = t - np.diag(np.diag(t))
  for i in range(100):
    (j,) = np.flatnonzero(off[i])
    assert off[i, j] == pytest.approx(0.3) and t[i, i] == pytest.approx(0.7)
    assert coarse[i] == coarse[j]
    members = np.flatnonzero(coarse == coarse[i])
    assert j == members[(list(members).index(i) + 1) % 5]  # next in ascending order, cyclic
  # Each superclass is one 5-cycle: the map is a permutation with every class reached once.
  np.testing.assert_array_equal(np.count_nonzero(off, axis=0), np.ones(100))
  # beaver(4) -> dolphin(30) -> otter(55) -> seal(72) -> whale(95) -> beaver; apple(0) -> mushroom(51).
  assert noise.cifar100_superclass_map()[4] == 30 and noise.cifar100_superclass_map()[95] == 4
  assert noise.cifar100_superclass_map()[0] == 51
  # Not the "blocks of 5 consecutive ids" map.
  assert t[0, 1] == 0.0 and t[4, 0] == 0.0


def test_make_transition_dispatch():
  np.testing.assert_array_equal(noise.make_transition("none", 3, 0.5), np.eye(3))
  np.testing.assert_array_equal(noise.make_transition("symmetric", 4, 0.2), noise.symmetric_transition(4, 0.2))
  np.testing.assert_array_equal(
    noise.make_transition("symmetric_include_true", 4, 0.2), noise.symmetric_transition(4, 0.2, include_true_class=True)
  )
  np.testing.assert_array_equal(noise.make_transition("pairflip", 4, 0.2), noise.pairflip_transition(4, 0.2))
  np.testing.assert_array_equal(
    noise.make_transition("asymmetric", 100, 0.2, dataset="cifar100"), noise.asymmetric_transition("cifar100", 0.2)
  )
  assert set(noise.NOISE_TYPES) == {"none", "symmetric", "symmetric_include_true", "pairflip", "asymmetric"}


# ---------------------------------------------------------------------------------------------- exact mode

# (transition, class sizes making every T[i, j] n_i an integer; sizes are uneven.)
INTEGRAL_CASES = {
  "symmetric": (noise.symmetric_transition(10, 0.4), 45 * np.arange(1, 11)),  # 0.4/9 * 45 = 2
  "symmetric_include_true": (
    noise.symmetric_transition(10, 0.5, include_true_class=True),
    20 * np.arange(10, 0, -1),
  ),  # 0.05 * 20 = 1
  "pairflip": (noise.pairflip_transition(7, 0.45), 20 * np.array([1, 5, 2, 3, 9, 1, 4])),
  "asymmetric_cifar10": (noise.asymmetric_transition("cifar10", 0.4), 5 * np.arange(1, 11)),
  "asymmetric_cifar100": (noise.asymmetric_transition("cifar100", 0.2), 5 * (1 + np.arange(100) % 7)),
  "asymmetric_mnist": (noise.asymmetric_transition("mnist", 0.3), 10 * (1 + np.arange(10) % 4)),
}


@pytest.mark.parametrize("name", sorted(INTEGRAL_CASES))
def test_exact_mode_realises_exact_counts(name):
  transition, sizes = INTEGRAL_CASES[name]
  clean = _labels(sizes)
  noisy = noise.corrupt_labels(clean, transition, seed=3)
  assert noisy.dtype == np.int32 and noisy.shape == clean.shape
  expected = np.round(transition * sizes[:, None]).astype(np.int64)
  np.testing.assert_allclose(expected, transition * sizes[:, None], atol=1e-9)  # really integral
  np.testing.assert_array_equal(_recount(clean, noisy, len(sizes)), expected)
  np.testing.assert_array_equal(noise.transition_counts(transition, sizes), expected)
  report = noise.noise_report(clean, noisy, len(sizes))
  requested = 1 - np.diag(transition)
  np.testing.assert_allclose(report["per_class_flip_rate"], requested, atol=1e-12)
  assert report["flip_rate"] == pytest.approx(np.sum(requested * sizes) / sizes.sum(), abs=1e-12)


def test_exact_symmetric_overall_rate_equals_requested():
  for rate in (0.2, 0.5, 0.8):
    clean = _labels(np.full(10, 900))
    noisy = noise.corrupt_labels(clean, noise.symmetric_transition(10, rate), seed=1)
    assert np.mean(noisy != clean) == pytest.approx(rate, abs=1e-12)
    noisy = noise.corrupt_labels(clean, noise.symmetric_transition(10, rate, include_true_class=True), seed=1)
    assert np.mean(noisy != clean) == pytest.approx(rate * 9 / 10, abs=1e-12)


@pytest.mark.parametrize("name", sorted(INTEGRAL_CASES))
def test_exact_mode_uneven_non_integral_sizes(name):
  transition, _ = INTEGRAL_CASES[name]
  num_classes = transition.shape[0]
  sizes = np.random.default_rng(7).integers(0, 23, size=num_classes)
  clean = _labels(sizes)
  counts = _recount(clean, noise.corrupt_labels(clean, transition, seed=11), num_classes)
  np.testing.assert_array_equal(counts.sum(axis=1), sizes)
  assert np.all(np.abs(counts - transition * sizes[:, None]) < 1)
  assert np.all(counts[transition == 0] == 0)
  np.testing.assert_array_equal(counts, noise.transition_counts(transition, sizes))


def test_largest_remainder_tie_break_by_hand():
  # C = 4, rate 0.5, n_i = 4: keep 2 (exact); each other class is owed 2/3, two leftovers go to i+1 and i+2.
  counts = noise.transition_counts(noise.symmetric_transition(4, 0.5), [4, 4, 4, 4])
  expected = np.array([[2, 1, 1, 0], [0, 2, 1, 1], [1, 0, 2, 1], [1, 1, 0, 2]])
  np.testing.assert_array_equal(counts, expected)
  # n = 3, rate 0.5 over 3 others: 1.5 kept, 0.5 each; two leftovers: keep first (cyclic from i), then i+1.
  counts = noise.transition_counts(noise.symmetric_transition(4, 0.5), [3, 0, 0, 0])
  np.testing.assert_array_equal(counts[0], [2, 1, 0, 0])
  # Joint Optimization convention, rate 0.2, C = 10, n = 90: 73.8 kept and 1.8 to each other class, all ten
  # fractions tie at 0.8 (in exact arithmetic): the 8 leftovers go to i, i+1, ..., i+7.
  counts = noise.transition_counts(noise.symmetric_transition(10, 0.2, include_true_class=True), np.full(10, 90))
  np.testing.assert_array_equal(counts[0], [74, 2, 2, 2, 2, 2, 2, 2, 1, 1])
  np.testing.assert_array_equal(counts[6], [2, 2, 2, 2, 1, 1, 74, 2, 2, 2])


def test_cifar10_cat_dog_swap_is_drawn_from_clean_labels():
  clean = _labels(np.full(10, 1000))
  noisy = noise.corrupt_labels(clean, noise.asymmetric_transition("cifar10", 0.4), seed=0)
  cats, dogs = clean == 3, clean == 5
  assert np.sum(noisy[cats] == 5) == 400 and np.sum(noisy[cats] == 3) == 600
  assert np.sum(noisy[dogs] == 3) == 400 and np.sum(noisy[dogs] == 5) == 600
  # The sequential bug would leave only ~24% of cats flipped; here exactly 40%.
  assert np.mean(noisy[cats] != 3) == pytest.approx(0.4)


def test_exact_mode_choice_of_examples_is_uniform():
  clean = np.array([0] * 30 + [1] * 30)
  transition = noise.pairflip_transition(2, 0.4)
  flipped = np.zeros(60)
  trials = 1500
  for seed in range(trials):
    flipped += noise.corrupt_labels(clean, transition, seed=seed) != clean
  frequency = flipped / trials
  tolerance = 5 * np.sqrt(0.4 * 0.6 / trials)
  assert np.all(np.abs(frequency - 0.4) < tolerance)


# ---------------------------------------------------------------------------------------------- sampling mode


def test_sampled_mode_matches_transition_statistically():
  rng = np.random.default_rng(0)
  transition = rng.dirichlet(np.ones(5), size=5)
  transition[0] = [0.5, 0.5, 0, 0, 0]  # zero entries must never be drawn
  n = 20000
  clean = _labels(np.full(5, n))
  noisy = noise.corrupt_labels(clean, transition, seed=5, exact=False)
  empirical = _recount(clean, noisy, 5) / n
  tolerance = 5 * np.sqrt(transition * (1 - transition) / n) + 1e-12
  assert np.all(np.abs(empirical - transition) <= tolerance)
  assert np.all(empirical[transition == 0] == 0)


@pytest.mark.parametrize("exact", [True, False])
def test_seeding_and_input_untouched(exact):
  clean = _labels(np.full(10, 200))
  copy = clean.copy()
  transition = noise.symmetric_transition(10, 0.5)
  first = noise.corrupt_labels(clean, transition, seed=42, exact=exact)
  np.testing.assert_array_equal(first, noise.corrupt_labels(clean, transition, seed=42, exact=exact))
  assert np.any(first != noise.corrupt_labels(clean, transition, seed=43, exact=exact))
  np.testing.assert_array_equal(clean, copy)


def test_rate_zero_and_identity_keep_labels():
  clean = _labels([3, 5, 7])
  for exact in (True, False):
    np.testing.assert_array_equal(noise.corrupt_labels(clean, np.eye(3), seed=0, exact=exact), clean)
    np.testing.assert_array_equal(
      noise.corrupt_labels(clean, noise.symmetric_transition(3, 0.0), seed=0, exact=exact), clean
    )
  assert noise.corrupt_labels(np.zeros(0, int), np.eye(3), seed=0).shape == (0,)


# ---------------------------------------------------------------------------------------------- report


def test_noise_report_against_numpy_recount():
  rng = np.random.default_rng(2)
  clean = rng.integers(0, 5, size=300)
  clean[clean == 4] = 3  # class 4 absent
  noisy = noise.corrupt_labels(clean, noise.symmetric_transition(5, 0.3), seed=9, exact=False)
  report = noise.noise_report(clean, noisy, 5)
  counts = _recount(clean, noisy, 5)
  np.testing.assert_array_equal(report["counts"], counts)
  np.testing.assert_array_equal(report["class_counts"], np.bincount(clean, minlength=5))
  assert report["num_examples"] == 300
  assert report["flip_rate"] == pytest.approx(np.mean(clean != noisy))
  for i in range(4):
    members = clean == i
    assert report["per_class_flip_rate"][i] == pytest.approx(np.mean(noisy[members] != i))
    np.testing.assert_allclose(report["transition"][i], counts[i] / members.sum())
  np.testing.assert_array_equal(report["transition"][4], np.zeros(5))
  assert report["per_class_flip_rate"][4] == 0.0
  assert report["sha256"] == hashlib.sha256(noisy.astype("<i4").tobytes()).hexdigest()
  assert report["sha256"] != noise.noise_report(clean, clean, 5)["sha256"]
  json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in report.items()})


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: noise.symmetric_transition(10, 1.5), "rate"),
    (lambda: noise.symmetric_transition(10, -0.1), "rate"),
    (lambda: noise.pairflip_transition(10, 2.0), "rate"),
    (lambda: noise.asymmetric_transition("cifar10", -1), "rate"),
    (lambda: noise.make_transition("symmetric", 10, 1.01), "rate"),
    (lambda: noise.symmetric_transition(1, 0.1), "num_classes"),
    (lambda: noise.asymmetric_transition("svhn", 0.2), "svhn"),
    (lambda: noise.make_transition("uniform", 10, 0.2), "uniform"),
    (lambda: noise.make_transition("asymmetric", 10, 0.2), "dataset"),
    (lambda: noise.make_transition("asymmetric", 10, 0.2, dataset="cifar100"), "num_classes=10"),
    (lambda: noise.corrupt_labels([0, 1, 3], np.eye(3), seed=0), "class id 3"),
    (lambda: noise.corrupt_labels([0, -1], np.eye(3), seed=0), "class id -1"),
    (lambda: noise.corrupt_labels([[0, 1]], np.eye(3), seed=0), "1-D"),
    (lambda: noise.corrupt_labels([0.5, 1], np.eye(3), seed=0), "integer"),
    (lambda: noise.corrupt_labels([0, 1], np.eye(3)[:2], seed=0), "square"),
    (lambda: noise.corrupt_labels([0, 1], [[0.5, 0.4], [0, 1]], seed=0), "row 0 sums to"),
    (lambda: noise.corrupt_labels([0, 1], [[1.5, -0.5], [0, 1]], seed=0), "negative"),
    (lambda: noise.corrupt_labels([0, 1], [[np.nan, 1], [0, 1]], seed=0), "non-finite"),
    (lambda: noise.noise_report([0, 1], [0, 1, 1], 2), "shape"),
    (lambda: noise.noise_report([0, 1], [0, 2], 2), "class id 2"),
    (lambda: noise.transition_counts(np.eye(2), [1, -1]), "class_counts"),
  ],
)
def test_value_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()
