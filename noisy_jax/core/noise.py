"""Synthetic label noise: transition matrices, exact-rate corruption and realised-noise reports.

Host-side NumPy, run once before training. Conventions (shared REFERENCE.md, section 4):

- A transition matrix T is row-stochastic, float64 [C, C]: T[i, j] = P(noisy = j | clean = i).
  (cleanlab's noise matrix is the transpose.)
- Every noisy label is drawn from the *clean* labels at once. Flips are never applied one after another, so a
  swap such as CIFAR-10 cat <-> dog moves exactly `rate` of the cats to dog and `rate` of the dogs to cat.
- `corrupt_labels(..., exact=True)` (the default) realises T exactly up to rounding: of the n_i examples of
  clean class i, round(T[i, j] * n_i) (largest-remainder rounding, so the counts sum to n_i) become class j, and
  which ones is a uniformly random choice. `exact=False` draws each label independently from T[clean].

Noise models:
  symmetric               rate spread over the C - 1 other classes; realised flip rate = rate.
  symmetric_include_true  the original Joint Optimization code (Tanaka et al., CVPR 2018): the new label is drawn
                          from all C classes, T = (1 - rate) I + rate / C; flip rate = rate (C - 1) / C.
  pairflip                class i -> (i + 1) mod C (Han et al., Co-teaching, NeurIPS 2018; the "class-dependent"
                          noise of Zhang & Sabuncu, NeurIPS 2018).
  asymmetric              semantic maps (Patrini et al., CVPR 2017): CIFAR-10 truck -> automobile,
                          bird -> airplane, deer -> horse, cat <-> dog; MNIST 7 -> 1, 2 -> 7, 5 <-> 6, 3 -> 8;
                          CIFAR-100 class -> next class of its true superclass, cyclically.
"""

from __future__ import annotations

import hashlib

import numpy as np

from noisy_jax.core import _checks

NOISE_TYPES = ("none", "symmetric", "symmetric_include_true", "pairflip", "asymmetric")

# Row sums of a transition matrix may differ from 1 by at most this much.
ROW_SUM_TOLERANCE = 1e-6

# The official CIFAR-100 superclasses (coarse labels) and their five classes (fine labels), by name, as in
# https://www.cs.toronto.edu/~kriz/cifar.html. Ids are derived below from the alphabetical order of the names,
# which is the order of `coarse_label_names` / `fine_label_names` in the dataset's meta file (and in TFDS).
CIFAR100_SUPERCLASSES: dict[str, tuple[str, ...]] = {
  "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
  "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
  "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
  "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
  "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
  "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
  "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
  "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
  "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
  "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
  "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
  "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
  "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
  "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
  "people": ("baby", "boy", "girl", "man", "woman"),
  "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
  "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
  "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
  "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
  "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}
CIFAR100_COARSE_NAMES: tuple[str, ...] = tuple(sorted(CIFAR100_SUPERCLASSES))
CIFAR100_FINE_NAMES: tuple[str, ...] = tuple(sorted(name for names in CIFAR100_SUPERCLASSES.values() for name in names))
_FINE_ID = {name: i for i, name in enumerate(CIFAR100_FINE_NAMES)}
# CIFAR100_COARSE_OF_FINE[fine id] = coarse id, int64 [100].
CIFAR100_COARSE_OF_FINE: np.ndarray = np.zeros(len(CIFAR100_FINE_NAMES), np.int64)
for _coarse_id, _coarse_name in enumerate(CIFAR100_COARSE_NAMES):
  CIFAR100_COARSE_OF_FINE[[_FINE_ID[n] for n in CIFAR100_SUPERCLASSES[_coarse_name]]] = _coarse_id
CIFAR100_COARSE_OF_FINE.setflags(write=False)

# Asymmetric (semantic) maps, clean class -> noisy class, for the 10-class datasets.
CIFAR10_ASYMMETRIC_MAP = {9: 1, 2: 0, 4: 7, 3: 5, 5: 3}  # truck->automobile, bird->airplane, deer->horse, cat<->dog
MNIST_ASYMMETRIC_MAP = {7: 1, 2: 7, 5: 6, 6: 5, 3: 8}

ASYMMETRIC_NUM_CLASSES = {"cifar10": 10, "cifar100": 100, "mnist": 10}
ASYMMETRIC_DATASETS = tuple(ASYMMETRIC_NUM_CLASSES)


def _check_num_classes(num_classes) -> int:
  if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 2:
    raise ValueError(f"num_classes={num_classes!r} must be an integer >= 2.")
  return int(num_classes)


def _check_rate(rate) -> float:
  _checks.check_range("rate", rate, 0.0, 1.0)
  return float(rate)


def _map_transition(num_classes: int, mapping: dict[int, int], rate: float) -> np.ndarray:
  """T = I, then for each (i -> j) of `mapping`: T[i, i] = 1 - rate, T[i, j] = rate."""
  transition = np.eye(num_classes)
  for clean, noisy in mapping.items():
    transition[clean, clean] = 1.0 - rate
    transition[clean, noisy] = rate
  return transition


def cifar100_superclass_map() -> dict[int, int]:
  """Fine id -> the next fine id of the same CIFAR-100 superclass (ascending ids, cyclic).

  E.g. aquatic_mammals = beaver(4), dolphin(30), otter(55), seal(72), whale(95): 4 -> 30 -> 55 -> 72 -> 95 -> 4.
  """
  mapping = {}
  for coarse_id in range(len(CIFAR100_COARSE_NAMES)):
    members = np.flatnonzero(CIFAR100_COARSE_OF_FINE == coarse_id)  # ascending fine ids
    for position, fine_id in enumerate(members):
      mapping[int(fine_id)] = int(members[(position + 1) % len(members)])
  return mapping


def symmetric_transition(num_classes: int, rate: float, *, include_true_class: bool = False) -> np.ndarray:
  """Uniform (symmetric) noise.

  include_true_class=False (default): the flipped mass is spread over the C - 1 *other* classes,
    T[i, i] = 1 - rate,  T[i, j] = rate / (C - 1) for j != i;  the realised flip rate is `rate`.
  include_true_class=True: the original Joint Optimization code's convention (Tanaka et al., CVPR 2018): with
    probability `rate` the label is redrawn uniformly from all C classes (possibly the true one),
    T = (1 - rate) I + rate / C;  the effective flip rate is rate (C - 1) / C.

  Args:
    num_classes: C >= 2.
    rate: in [0, 1].
    include_true_class: which convention (default False, the paper convention: rate = flip probability).

  Returns:
    float64 [C, C] row-stochastic matrix.
  """
  num_classes = _check_num_classes(num_classes)
  rate = _check_rate(rate)
  if include_true_class:
    return (1.0 - rate) * np.eye(num_classes) + rate / num_classes
  transition = np.full((num_classes, num_classes), rate / (num_classes - 1))
  np.fill_diagonal(transition, 1.0 - rate)
  return transition


def pairflip_transition(num_classes: int, rate: float) -> np.ndarray:
  """Pair flip: T[i, i] = 1 - rate, T[i, (i + 1) mod C] = rate.

  The pair-flip noise of Co-teaching (Han et al., NeurIPS 2018) and the "class-dependent" noise of
  Zhang & Sabuncu (NeurIPS 2018). Returns float64 [C, C].
  """
  num_classes = _check_num_classes(num_classes)
  rate = _check_rate(rate)
  return _map_transition(num_classes, {i: (i + 1) % num_classes for i in range(num_classes)}, rate)


def asymmetric_transition(dataset: str, rate: float) -> np.ndarray:
  """Semantic class-dependent noise (Patrini et al., CVPR 2017; Joint Optimization's CIFAR-10 setting).

  Each mapped class i keeps its label with probability 1 - rate and becomes m(i) with probability `rate`;
  unmapped classes are clean:
    cifar10:  truck(9) -> automobile(1), bird(2) -> airplane(0), deer(4) -> horse(7), cat(3) <-> dog(5).
    cifar100: each class -> the next class of its true superclass (ascending fine ids, cyclic); see
              `CIFAR100_SUPERCLASSES` (not blocks of 5 consecutive ids).
    mnist:    7 -> 1, 2 -> 7, 5 <-> 6, 3 -> 8.

  Args:
    dataset: one of ASYMMETRIC_DATASETS ('cifar10', 'cifar100', 'mnist').
    rate: in [0, 1].

  Returns:
    float64 [C, C] with C = 10, 100 or 10.
  """
  _checks.check_choice("dataset", dataset, ASYMMETRIC_DATASETS)
  rate = _check_rate(rate)
  if dataset == "cifar10":
    mapping = CIFAR10_ASYMMETRIC_MAP
  elif dataset == "mnist":
    mapping = MNIST_ASYMMETRIC_MAP
  else:
    mapping = cifar100_superclass_map()
  return _map_transition(ASYMMETRIC_NUM_CLASSES[dataset], mapping, rate)


def make_transition(noise_type: str, num_classes: int, rate: float, *, dataset: str | None = None) -> np.ndarray:
  """One entry point for configs: the [C, C] transition matrix of a named noise model.

  Args:
    noise_type: one of NOISE_TYPES: 'none' (identity), 'symmetric', 'symmetric_include_true' (the Joint
      Optimization code's convention), 'pairflip', 'asymmetric'.
    num_classes: C >= 2.
    rate: in [0, 1] (checked, and ignored for 'none').
    dataset: needed by 'asymmetric' (one of ASYMMETRIC_DATASETS, whose class count must equal num_classes);
      ignored otherwise.

  Returns:
    float64 [C, C] row-stochastic matrix, T[i, j] = P(noisy = j | clean = i).
  """
  _checks.check_choice("noise_type", noise_type, NOISE_TYPES)
  num_classes = _check_num_classes(num_classes)
  rate = _check_rate(rate)
  if noise_type == "none":
    return np.eye(num_classes)
  if noise_type == "symmetric":
    return symmetric_transition(num_classes, rate)
  if noise_type == "symmetric_include_true":
    return symmetric_transition(num_classes, rate, include_true_class=True)
  if noise_type == "pairflip":
    return pairflip_transition(num_classes, rate)
  if dataset is None:
    raise ValueError(f"noise_type='asymmetric' needs dataset, one of {ASYMMETRIC_DATASETS}.")
  _checks.check_choice("dataset", dataset, ASYMMETRIC_DATASETS)
  if ASYMMETRIC_NUM_CLASSES[dataset] != num_classes:
    raise ValueError(
      f"num_classes={num_classes} does not match dataset {dataset!r}, which has "
      f"{ASYMMETRIC_NUM_CLASSES[dataset]} classes."
    )
  return asymmetric_transition(dataset, rate)


def check_transition(transition) -> np.ndarray:
  """Checks a row-stochastic matrix (square [C, C], C >= 2, finite, >= 0, rows sum to 1 within 1e-6).

  Returns it as float64 with each row renormalised to sum to exactly 1 (up to float rounding).
  """
  matrix = np.asarray(transition, dtype=np.float64)
  if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
    raise ValueError(f"transition must be a square [C, C] matrix with C >= 2, got shape {matrix.shape}.")
  if not np.all(np.isfinite(matrix)):
    raise ValueError("transition holds non-finite entries; entries must be probabilities in [0, 1].")
  if np.any(matrix < 0):
    row, col = np.argwhere(matrix < 0)[0]
    raise ValueError(f"transition[{row}, {col}]={matrix[row, col]!r} is negative; entries must be >= 0.")
  row_sums = matrix.sum(axis=1)
  bad = np.flatnonzero(np.abs(row_sums - 1.0) > ROW_SUM_TOLERANCE)
  if bad.size:
    raise ValueError(
      f"transition row {bad[0]} sums to {row_sums[bad[0]]!r}; every row must sum to 1 (within {ROW_SUM_TOLERANCE})."
    )
  return matrix / row_sums[:, None]


def transition_counts(transition, class_counts) -> np.ndarray:
  """How many examples of each clean class i become class j under exact-rate corruption.

  counts[i] is the largest-remainder rounding of T[i] * n_i: every entry gets floor(T[i, j] n_i), and the
  n_i - sum_j floor(T[i, j] n_i) remaining examples go one each to the entries with the largest fractional parts.
  Ties are broken deterministically in cyclic order starting at the true class: j = i (keep), i + 1, i + 2, ...
  (mod C), so that leftovers do not all pile onto class 0. Hence counts[i].sum() = n_i,
  |counts[i, j] - T[i, j] n_i| < 1, and counts[i, j] = 0 wherever T[i, j] = 0.

  Args:
    transition: [C, C] row-stochastic matrix.
    class_counts: [C] non-negative integers n_i.

  Returns:
    int64 [C, C].
  """
  matrix = check_transition(transition)
  num_classes = matrix.shape[0]
  sizes = np.asarray(class_counts)
  if sizes.shape != (num_classes,) or np.any(sizes < 0) or np.any(sizes != np.round(sizes)):
    raise ValueError(f"class_counts must be {num_classes} non-negative integers, got {class_counts!r}.")
  sizes = sizes.astype(np.int64)
  # Rounded so that ties between equal exact values do not depend on float noise.
  expected = np.round(matrix * sizes[:, None], 9)
  counts = np.floor(expected).astype(np.int64)
  fractions = np.round(expected - counts, 9)
  for i in range(num_classes):
    leftover = int(sizes[i] - counts[i].sum())
    cyclic = (np.arange(num_classes) + i) % num_classes  # columns i, i+1, ..., i-1
    order = cyclic[np.argsort(-fractions[i, cyclic], kind="stable")]
    counts[i, order[:leftover]] += 1
  return counts


def corrupt_labels(labels, transition, *, seed, exact: bool = True) -> np.ndarray:
  """Draws noisy labels from clean ones through a transition matrix.

  All draws use the clean labels at once (no sequential flips). The input is never modified.

  exact=True (default): for each clean class i with n_i examples, exactly `transition_counts(T, n)[i, j]`
    of them (the largest-remainder rounding of T[i, j] n_i) get label j; which ones is a uniformly random
    permutation of class i's examples (classes in ascending order, one `rng.permutation` each). The realised
    flip rate equals the requested one whenever T[i, j] n_i are integers.
  exact=False: each label independently ~ Categorical(T[clean label]).

  Args:
    labels: [N] integer class ids in [0, C).
    transition: [C, C] row-stochastic matrix (see `make_transition`).
    seed: anything `np.random.default_rng` accepts (e.g. an int); the same seed gives the same labels.
    exact: exact-rate injection (default) or independent draws.

  Returns:
    int32 [N] noisy labels.
  """
  matrix = check_transition(transition)
  num_classes = matrix.shape[0]
  clean = _checks.check_labels("labels", labels, num_classes)
  rng = np.random.default_rng(seed)
  noisy = np.empty(clean.shape, np.int32)
  members_of = [np.flatnonzero(clean == i) for i in range(num_classes)]
  if exact:
    counts = transition_counts(matrix, [len(m) for m in members_of])
    for i, members in enumerate(members_of):
      noisy[rng.permutation(members)] = np.repeat(np.arange(num_classes, dtype=np.int32), counts[i])
  else:
    for i, members in enumerate(members_of):
      noisy[members] = rng.choice(num_classes, size=len(members), p=matrix[i])
  return noisy


def noise_report(clean, noisy, num_classes: int) -> dict:
  """Measures the noise that was actually injected.

  Args:
    clean: [N] clean class ids in [0, C).
    noisy: [N] noisy class ids in [0, C).
    num_classes: C.

  Returns:
    A dict of plain Python / NumPy values (JSON-serialisable after `.tolist()`):
      'num_examples': N;
      'flip_rate': mean(noisy != clean) (0.0 when N = 0);
      'class_counts': int64 [C], n_i = #(clean = i);
      'per_class_flip_rate': float64 [C], #(clean = i, noisy != i) / n_i (0.0 for absent classes);
      'counts': int64 [C, C], counts[i, j] = #(clean = i, noisy = j);
      'transition': float64 [C, C], counts row-normalised (rows of absent classes all zero);
      'sha256': hex digest of the noisy labels as little-endian int32 bytes (identifies the noisy label set).
  """
  num_classes = _check_num_classes(num_classes)
  clean_ids = _checks.check_labels("clean", clean, num_classes)
  noisy_ids = _checks.check_labels("noisy", noisy, num_classes)
  _checks.check_same_shape("clean", clean_ids, "noisy", noisy_ids)
  counts = np.bincount(clean_ids * num_classes + noisy_ids, minlength=num_classes * num_classes).reshape(
    num_classes, num_classes
  )
  class_counts = counts.sum(axis=1)
  safe = np.maximum(class_counts, 1)
  num_examples = int(clean_ids.size)
  flipped = num_examples - int(np.trace(counts))
  return {
    "num_examples": num_examples,
    "flip_rate": flipped / num_examples if num_examples else 0.0,
    "class_counts": class_counts.astype(np.int64),
    "per_class_flip_rate": (class_counts - np.diag(counts)) / safe,
    "counts": counts.astype(np.int64),
    "transition": counts / safe[:, None],
    "sha256": hashlib.sha256(np.asarray(noisy_ids, dtype="<i4").tobytes()).hexdigest(),
  }
