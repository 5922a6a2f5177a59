r"""Your own images, labels taken as given: Joint Optimization finds the wrong ones (or `:compare` runs them all).

  python -m experiments.train --config=experiments/configs/own_data.py --config.dataset_kwargs.root=DIR --workdir=W
  python -m experiments.train --config=experiments/configs/own_data.py:compare --config.dataset_kwargs.root=DIR \
    --workdir=W

DIR is an image folder (noisy_jax/data/disk.py): DIR/train/LABEL/*.png|jpg|jpeg and DIR/test/LABEL/..., optionally
DIR/val/LABEL/... (without it a stratified 10% of train is held out for validation). Every option of the loader is
a field of the top-level `dataset_kwargs`, declared unset (a None placeholder, left out when the loader is called:
its own default applies), so that each one can be given on its own although the config is locked:

  --config.dataset_kwargs.root=DIR                 the folder (or, instead, ...manifest=FILE.csv: path,label,split)
  --config.dataset_kwargs.image_size=64            resize the shorter side to 64 and centre-crop (files' size: unset)
  --config.dataset_kwargs.classes="('cat','dog')"  class-id order (unset: the sorted training labels)
  --config.dataset_kwargs.validation_size=0.2      carved from train when there is no val split (or a count: 500)
  --config.dataset_kwargs.seed=1                   seed of that carving (unset: disk.SPLIT_SEED)
  --config.dataset_kwargs.channels=3               read every image as RGB (unset: grayscale when they all are, or,
                                                   for a streamed folder, when the first training image is)
  --config.dataset_kwargs.on_bad_file=skip         leave out the files that do not decode, listed in
                                                   WORKDIR/skipped_files.txt (unset: the first one stops the run)
  --config.dataset_kwargs.max_bad_fraction=0.05    with skip: stop when more of a split's files fail (unset: 0.01)

Size: images stay uint8 in memory and are normalised on the device. A training split of at most
config.input_budget_mib (2048 MiB: e.g. 700k images of 32x32x3) is decoded once and kept on the devices; a larger one
is streamed from disk by Grain worker processes (noisy_jax.parallel.streaming), the same training either way. Force one
with
--config.input=resident|streaming; --config.input_workers=N decoding processes; --config.checkpoint_every_steps=K
also checkpoints inside an epoch (with the input position: a killed run resumes at the step it reached).

Without root (or manifest) the run stops at once: "image_folder needs root=DIR or manifest=FILE.csv ... On the
command line: --config.dataset_kwargs.root=DIR".

Labels: noise type 'none'. Nothing is corrupted; the network trains on the labels the files came with.

The default method: Joint Optimization (Tanaka et al. 2018; experiments/configs/joint_optimization.py). Stage 1
relabels: from epoch `begin` on, each example's target becomes the mean of its last `history_length` predictions.
Its label table is the per-example verdict: an example whose relabelled class (the table's argmax) differs from its
given label is flagged as mislabelled (summary.json: stage1.relabelled_fraction). Stage 2 trains a fresh network on
the relabelled targets: its test accuracy is the run's. Why this method: of the methods here that flag examples, it
found the wrong labels best when measured (detection precision / recall of the flagged examples against the known
flips, mean over seeds 0-2 on mnist5k):
  60% symmetric noise (README, the default experiment's table, default.py):
    Joint Optimization  95.98% / 98.78%  (F1 0.974)
    truncated Lq        98.49% / 94.49%  (F1 0.964; its pruned examples)
  structured pseudo-label noise, closer to real mistakes (README, the pseudo_label_noise table, seed 0):
    Joint Optimization  76.79% / 76.33%  (F1 0.766)
    truncated Lq        85.52% / 55.92%  (F1 0.676)
Truncated Lq is the more precise of the two but misses more wrong labels, and far more of the structured ones
(recall 56% against 76%); CE, GCE and EL flag nothing.

Schedule: joint_optimization.py's, unchanged (it is the default experiment's, where the numbers above come from).
  stage 1: 50 epochs at a constant lr 0.08, alpha 1.2, beta 0.8 (the paper's README values for CIFAR-10), prior
    uniform (the paper's; it assumes balanced classes), SGD momentum 0.9, weight decay 5e-4 (base.optimizer);
    relabelling from epoch begin = 20, 40% of stage 1 (the original code: 70 of 200, 35%; on mnist5k, begin 10 of 25
    relabelled while the network was still learning and recovered 87-91% of the labels, 20 of 50 90.4-93.1%),
    over the mean of the last history_length = 10 epochs (the original code's value).
  stage 2: 20 epochs, lr 0.05, x0.1 after epochs 10 and 15 (the default experiment's).
  batch 128, per-channel standardisation, no augmentation (a flip is wrong for digits or text: turn it on with
  --config.augment.flip=True --config.augment.crop_padding=4 where it suits the images).
For a different budget keep begin near 40% of num_epochs: --config.num_epochs=100 --config.method.begin=40.

Model: 'auto', picked from the images once they are loaded (noisy_jax.models.resolve): smaller side < 32 px the
small CNN (built for 28x28 digits), 32 px and up the pre-activation ResNet-32 (global-average-pooled, so any size;
0.47M parameters, a CPU step ~5x faster than ResNet-18's). Override with --config.model.name=resnet18 (or any model
of noisy_jax.models); --config.model.kwargs="{...}" goes to the model that is built. Large images cost time: resize
with image_size.

What lands in the workdir W:
  summary.json      accuracies (best / last test, test at the best validation epoch), stage1.relabelled_fraction,
                    the model that was built ("model"), the per-epoch history of both stages
  metrics.jsonl     one record per epoch (stage 1, then stage 2)
  classes.json      the class names in class-id order and where the data came from (absolute root)
  events.out.tfevents.*        TensorBoard scalars
  checkpoints/stage1, stage2   orbax, every 5 epochs and at the end (stage 1's holds the label table); the same
                               command again resumes there
  checkpoints/stage1.steps     with checkpoint_every_steps: the newest checkpoint written inside an epoch
With :compare: W/METHOD/seed0/ holds the files above for each method (ce, gce, truncated_lq, joint_optimization,
encouraging: default.py's runs and settings), W/summary.json the table of all of them and W/classes.json.

How `:compare` gets the folder: a comparison keeps its data settings under `shared`; here `shared.dataset_kwargs`
is the very same ConfigDict object as the top-level `dataset_kwargs` (and `shared.dataset` a reference to
`dataset`), so the command line above is the same for both variants and every run of the comparison loads the
folder it names. Replacing the whole dict (--config.shared.dataset_kwargs="{...}") cuts that link: give the fields.

There are no clean labels, so the metrics that need them (label recovery, detection precision / recall, the
memorised fraction, the realised noise rate) are left out of every record, summary, table and plot; test accuracy,
where a test split exists, is measured against its given labels (the only measure there is). Read
stage1.relabelled_fraction (and the label table) for what the method changed.
"""

import ml_collections
from ml_collections import config_dict

from experiments.configs import base
from experiments.configs import default
from experiments.configs import joint_optimization

DATASET = "image_folder"
VARIANTS = ("", "compare")


def dataset_kwargs() -> ml_collections.ConfigDict:
  """Every option of noisy_jax.data.disk.image_folder, unset (None: the loader's own default is used)."""
  return ml_collections.ConfigDict(
    {
      "root": config_dict.placeholder(str),
      "manifest": config_dict.placeholder(str),
      "image_size": config_dict.placeholder(int),
      "classes": config_dict.placeholder(tuple),
      "validation_size": config_dict.placeholder(object),  # an int count or a float fraction
      "seed": config_dict.placeholder(int),
      "channels": config_dict.placeholder(int),  # 1 or 3 (unset: from the images)
      "decode": config_dict.placeholder(bool),  # unset: the trainer decides (config.input)
      "on_bad_file": config_dict.placeholder(str),  # 'skip' leaves out files that do not decode (unset: 'error')
      "max_bad_fraction": config_dict.placeholder(float),  # of a split, with 'skip' (unset: 0.01)
    }
  )


def _data_settings(config: ml_collections.ConfigDict) -> None:
  """The data, labels-as-given and model settings shared by both variants (set on a run's or `shared` config)."""
  config.noise = ml_collections.ConfigDict({"type": "none", "rate": 0.0, "exact": True, "dataset": ""})
  config.model = ml_collections.ConfigDict({"name": "auto", "kwargs": {}, "pretrained": "none"})


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = (arg or "").strip()
  if variant not in VARIANTS:
    raise ValueError(
      f"own_data config string {arg!r}: use none (Joint Optimization) or 'compare' "
      "(--config=experiments/configs/own_data.py:compare)."
    )
  if variant == "compare":
    config = base.comparison("own data (image_folder), labels as given")
    config.dataset = DATASET
    config.dataset_kwargs = dataset_kwargs()
    config.shared.dataset = config.get_ref("dataset")
    config.shared.dataset_kwargs = config.dataset_kwargs  # the same object: flags on either path reach every run
    _data_settings(config.shared)
    config.runs = default.get_config().runs
    return config
  config = base.single(joint_optimization.get_run())
  config.dataset = DATASET
  config.dataset_kwargs = dataset_kwargs()
  _data_settings(config)
  return config
