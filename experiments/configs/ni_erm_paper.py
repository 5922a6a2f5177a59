r"""NI-ERM (Zhu, Zhang, Gangrade & Scott, "Label Noise: Ignorance Is Bliss", NeurIPS 2024, arXiv:2411.00079): the
CIFAR-10N / CIFAR-100N rows as plain frozen settings, for noisy_jax.experiment.ni_erm over embeddings.

Not a training config (no get_config): a linear classifier fitted on frozen DINOv2 features of the CIFAR images,
with the human noisy labels of CIFAR-N as given. Read a row with `row(name)`; names: cifar10n_clean, cifar10n_aggre,
cifar10n_random1, cifar10n_random2, cifar10n_random3, cifar10n_worst, cifar100n_clean, cifar100n_noisy.

Every value and its source ("code" = github.com/allan-z/label_noise_ignorance at commit
18f88a77c6e125f033bd7ac52f2347de41ddf2be, main.py and README.md):
  backbone dinov2_vitl14 (DINOv2 ViT-L/14)       code: README's command --encoder_name dinov2_vitl14, loaded with
                                                 torch.hub.load('facebookresearch/dinov2', ...); its forward output,
                                                 the final-norm CLS token, flattened: 1,024 values per image
                                                 (ViT-L's width)
  image size 224 x 224, bilinear resize of the 32 x 32 images, then ImageNet mean / std per channel, no augmentation
                                                 code: transforms.Resize((224, 224)), ToTensor, Normalize((0.485,
                                                 0.456, 0.406), (0.229, 0.224, 0.225)) for feature_type
                                                 'foundation_model'
  extraction batch 128                           code: README's command --batch_size 128 (the backbone's batches only)
  classifier: multinomial logistic regression, lbfgs, full batch, raw features (no standardisation)
                                                 code: LogisticRegression(multi_class='multinomial'), solver
                                                 ['lbfgs'], fitted on X_train as extracted
  C and max_iter: chosen by 5-fold GridSearchCV (accuracy on the noisy labels) over C in {1e-4, 1e-3, 1e-2, 0.1, 1,
                  10, 100} and max_iter in {10, 20, 50, 100}
                                                 code: param_grid, GridSearchCV(cv=5, scoring='accuracy')
  labels: CIFAR-10N clean_label, aggre_label, random_label1..3, worse_label; CIFAR-100N clean_label, noisy_label
                                                 code: the noise_mode -> key table of main.py (CIFAR-10_human.pt,
                                                 CIFAR-100_human.pt)
  reported test accuracies                       paper Table (CIFAR-N results): not retrieved in this session (the
                                                 paper's text was not readable here; the code prints the accuracy
                                                 but stores none), so None; fill them in from the paper.

DIFFERENCES says what noisy_jax.experiment.ni_erm does otherwise. `commands(name)` gives the three commands that
run a row here: embed the training images with the row's labels and the test images with theirs (DINOv2 ViT-L/14,
the code's whole-image 224 x 224 bilinear resize: --resize=224 --interpolation=bilinear), then fit the head with the
code's grid search and print its test accuracy, e.g. for cifar10n_worst:

  python -m experiments.embed --config=experiments/configs/gce_paper.py:cifar10_n,ce,worst \
      --config.dataset_kwargs.data_dir=DATA --config.dataset_kwargs.validation_size=0 \
      --backbone=vit_large_patch14_dinov2 --weights=dinov2_vitl14_pretrain.pth \
      --resize=224 --interpolation=bilinear --batch_size=128 --workdir=W/cifar10n_worst_train
  python -m experiments.embed --config=experiments/configs/gce_paper.py:cifar10_n,ce,worst --split=test ... \
      --workdir=W/cifar10_test
  python -m experiments.ni_erm_accuracy --train=W/cifar10n_worst_train --test=W/cifar10_test --grid_search
"""

from __future__ import annotations

import dataclasses
import types

CODE = "allan-z/label_noise_ignorance@18f88a77c6e125f033bd7ac52f2347de41ddf2be"


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
  """The classifier's settings: the grid of the original and the point of it ni_erm uses by default."""

  optimizer: str = "lbfgs"
  max_iter: int = 100
  max_iter_grid: tuple[int, ...] = (10, 20, 50, 100)
  inverse_regularization: float = 1.0
  inverse_regularization_grid: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)
  cv_folds: int = 5
  batch_size: int | None = None  # full batch
  standardize: bool = False
  hidden_sizes: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Row:
  """One CIFAR-N row: the data, the backbone's preprocessing, the probe, the reported result and the sources."""

  dataset: str
  noise_key: str
  backbone: str = "dinov2_vitl14"
  image_size: int = 224
  resize: str = "bilinear"
  mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
  std: tuple[float, float, float] = (0.229, 0.224, 0.225)
  feature_dim: int = 1024
  extraction_batch_size: int = 128
  probe: ProbeSettings = ProbeSettings()
  reported_test_accuracy: float | None = None
  sources: types.MappingProxyType = dataclasses.field(
    default_factory=lambda: types.MappingProxyType(
      {
        "backbone": f"{CODE} README.md command (--encoder_name dinov2_vitl14), main.py torch.hub.load",
        "image_size": f"{CODE} main.py transforms.Resize((224, 224))",
        "mean_std": f"{CODE} main.py transforms.Normalize (ImageNet statistics)",
        "feature_dim": "DINOv2 ViT-L/14: width 1024 (its CLS token, main.py flattens the forward output)",
        "extraction_batch_size": f"{CODE} README.md command --batch_size 128",
        "probe": f"{CODE} main.py LogisticRegression(multi_class='multinomial'), param_grid, GridSearchCV(cv=5)",
        "noise_key": f"{CODE} main.py noise_mode -> key of CIFAR-10_human.pt / CIFAR-100_human.pt",
        "reported_test_accuracy": "not retrieved (paper's CIFAR-N table unread in this session)",
      }
    )
  )


ROWS = types.MappingProxyType(
  {
    "cifar10n_clean": Row("cifar10", "clean_label"),
    "cifar10n_aggre": Row("cifar10", "aggre_label"),
    "cifar10n_random1": Row("cifar10", "random_label1"),
    "cifar10n_random2": Row("cifar10", "random_label2"),
    "cifar10n_random3": Row("cifar10", "random_label3"),
    "cifar10n_worst": Row("cifar10", "worse_label"),
    "cifar100n_clean": Row("cifar100", "clean_label"),
    "cifar100n_noisy": Row("cifar100", "noisy_label"),
  }
)

DIFFERENCES = types.MappingProxyType(
  {
    "grid_search": "ni_erm takes C and the iterations as arguments (defaults: C = 1, 100 iterations, one point of "
    "the original's grid); the original picks both by 5-fold GridSearchCV on the noisy labels, which "
    "noisy_jax.experiment.ni_erm_grid.search does over ni_erm's head (label_issues_from_features "
    "--ni_erm_grid_search): the same folds, scores, ranks and choice, over the heads of ni_erm's solver.",
    "solver": "optax.lbfgs (memory 10, zoom line search, a fixed number of iterations) for scipy's L-BFGS-B inside "
    "scikit-learn (memory 10, stops at gradient tolerance 1e-4 or max_iter): the same objective, other iterates.",
    "objective_scale": "ni_erm minimises the mean CE + ||W||^2 / (2 C N), scikit-learn's summed objective / N: the "
    "same minimiser.",
    "minibatch": "ni_erm also offers minibatch 'sgd' / 'adam' and an MLP head (hidden_sizes); the original has "
    "neither.",
  }
)


def row(name: str) -> Row:
  """The row called `name` (ROWS); KeyError naming the allowed names otherwise."""
  if name not in ROWS:
    raise KeyError(f"unknown NI-ERM row {name!r}; allowed: {', '.join(ROWS)}")
  return ROWS[name]


GCE_CONFIG = "experiments/configs/gce_paper.py"  # a config that reads CIFAR / CIFAR-N; only its dataset is used
CONFIG_ROWS = types.MappingProxyType(  # noise_key -> gce_paper's DATASET,METHOD,NOISE (tfds_data's noise keys)
  {
    ("cifar10", "clean_label"): "cifar10,ce,symmetric --config.noise.rate=0.0",
    ("cifar10", "aggre_label"): "cifar10_n,ce,aggregate",
    ("cifar10", "random_label1"): "cifar10_n,ce,random1",
    ("cifar10", "random_label2"): "cifar10_n,ce,random2",
    ("cifar10", "random_label3"): "cifar10_n,ce,random3",
    ("cifar10", "worse_label"): "cifar10_n,ce,worst",
    ("cifar100", "clean_label"): "cifar100,ce,symmetric --config.noise.rate=0.0",
    ("cifar100", "noisy_label"): "cifar100_n,ce,noisy",
  }
)


def commands(
  name: str, *, weights: str = "dinov2_vitl14_pretrain.pth", data_dir: str = "$HOME/tensorflow_datasets", workdir="W"
) -> list[str]:
  """The commands that embed row `name`'s training images (with its labels) and its test images (clean labels) with
  its backbone and preprocessing, then print NI-ERM's test accuracy with the code's grid search. All 50,000 training
  images are embedded (validation_size 0: the code fits on the whole training set); their order is TFDS's, so the
  grid's unshuffled folds hold other images than the code's (CIFAR's pickle order)."""
  spec = row(name)
  backbone = {"dinov2_vitl14": "vit_large_patch14_dinov2"}[spec.backbone]
  config = CONFIG_ROWS[(spec.dataset, spec.noise_key)]
  train, test = f"{workdir}/{name}_train", f"{workdir}/{spec.dataset}_test"
  embed = (
    f"python -m experiments.embed --config={GCE_CONFIG}:{config} --config.dataset_kwargs.data_dir={data_dir} "
    "--config.dataset_kwargs.validation_size=0 "
    f"--backbone={backbone} --weights={weights} --resize={spec.image_size} --interpolation={spec.resize} "
    f"--batch_size={spec.extraction_batch_size}"
  )
  return [
    f"{embed} --workdir={train}",
    f"{embed} --split=test --workdir={test}",
    f"python -m experiments.ni_erm_accuracy --train={train} --test={test} --grid_search",
  ]
