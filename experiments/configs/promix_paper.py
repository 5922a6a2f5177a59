r"""ProMix (Xiao et al., IJCAI 2023): the CIFAR-10 / CIFAR-100 / CIFAR-N rows of the original code's run.sh.

The string after the colon picks the row, DATASET,NOISE,RATE[,original] or DATASET,LABELS[,original]:
  DATASET   cifar10 | cifar100              synthetic noise (run.sh --noise_mode sym / asym), then NOISE,RATE:
    NOISE   symmetric   the original's 'sym': int(rate x N) examples relabelled uniformly over all C classes, the
                        true one included ('symmetric_include_true' here; realised rate (C - 1) / C x rate)
            asymmetric  the original's 'asym', CIFAR-10 only: its class map (truck -> automobile, bird -> airplane,
                        deer -> horse, cat <-> dog; the other classes keep their label), 'asymmetric' here
    RATE    run.sh's rows: cifar10 symmetric 0.2 / 0.5, cifar10 asymmetric 0.4, cifar100 symmetric 0.2 / 0.5
  DATASET   cifar10_n | cifar100_n          CIFAR-N human labels (run.sh --noise_mode cifarn), then LABELS, the
                                            original's --noise_type:
    LABELS  cifar10_n: aggre | rand1 | worst (run.sh's rows), rand2 | rand3 (the original's noise_type_map has them,
            run.sh has no line: the rand1 line's settings, our choice); cifar100_n: noisy100
            (noise type 'dataset' with dataset_kwargs.noise_key aggregate / random1 / random2 / random3 / worst /
            noisy: noisy_jax.data.tfds_data, the same CIFAR-N labels as the original's CIFAR-10_human.pt /
            CIFAR-100_human.pt keys aggre_label / random_label1..3 / worse_label / noisy_label)
  original  optional: the original's FMix spectrum indexing (method.fmix_spectrum 'original',
            noisy_jax.core.fmix) and its clamp of the logits at 1e-12 in the warm-up's confidence penalty
            (method.penalty_clamps_logits, which acts on the asymmetric row only), the two defects the published
            numbers were trained with; without it both follow the paper (see the deviations)
Default: cifar10,symmetric,0.2. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs
its manual download):

  python -m experiments.train --config=experiments/configs/promix_paper.py:cifar10,asymmetric,0.4 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/promix_c10_asym40
  python -m experiments.train --config=experiments/configs/promix_paper.py:cifar10_n,worst \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/promix_c10n_worst

Every constant and its source: "code" = Justherozen/ProMix@40d8378 (run.sh; Train_promix.py: its argparse defaults
and main loop; utils/utils.py adjust_learning_rate; dataloader_cifarn.py; utils/randaug.py; utils/fmix.py; model.py).
  network: ResNet-18, CIFAR stem (3x3 conv, stride 1, no max pool), BasicBlocks 2-2-2-2, widths 64..512, with the
           pseudo head h_AP beside the primary classifier (model.kwargs.pseudo_head True:
           noisy_jax.models.pseudo_head)                             code model.py ResNet18, DualNet; registry
                                                                     'resnet18'
  two networks, one SGD over both: lr 0.05, momentum 0.9, weight decay 5e-4, batch 256
                                                                     code Train_promix.py (optimizer1, --lr,
                                                                     --batch_size)
  601 epochs: --num_epochs 600 and `for epoch in range(args.num_epochs + 1)` runs epochs 0 .. 600
                                                                     code Train_promix.py main loop
                                                                     (noisy_jax.methods.promix_train: a run
                                                                     of E + 1 epochs is the original's E)
  cosine lr per epoch e = 0 .. 600: eta_min + (0.05 - eta_min) (1 + cos(pi e / 600)) / 2, eta_min = 0.05 x 0.1^3
           (lr_schedule 'cosine', cosine_epochs 600, lr_min 5e-5; the last epoch trains at eta_min)
                                                                     code run.sh --cosine; utils.py
                                                                     adjust_learning_rate; --lr_decay_rate 0.1
  rho_range a,b -> method.rho_start a, rho_end b: 0.7,0.7 at rate 0.2; 0.5,0.5 at rate 0.5, asymmetric 0.4 and
           CIFAR-N                                                   code run.sh
  tau 0.99, pretrain_ep 10, debias_output = debias_pl = 0.8 (CIFAR-10, CIFAR-10N: run.sh passes 0.8 or nothing,
           the default); CIFAR-100, CIFAR-100N: tau 0.95, pretrain_ep 30, debias 0.5
                                                                     code run.sh; Train_promix.py defaults
  warmup_penalty on the asymmetric row only: the warm-up adds conf_penalty when noise_mode == 'asym'
                                                                     code Train_promix.py warmup
  warmup_ep 50, threshold 0.9, start_expand 250, bias_m 0.9999, T 0.5   code Train_promix.py defaults
  mixup lam ~ Beta(4, 4); FMix() alpha 1, decay power 3              code Train_promix.py train; utils/fmix.py
  weak view: random horizontal flip + random crop after 4-pixel padding
                                                                     code dataloader_cifarn.py transform_train
  strong view: 3 of the pool's 14 PIL operations at uniform magnitudes, then its gray Cutout, on the uint8 image
           before the weak view's flip and crop (policy 'promix_randaugment', STRONG_VIEW; see below)
                                                                     code dataloader_cifarn.py transform_train_s
                                                                     (RandomAugment(3, 5) inserted first);
                                                                     utils/randaug.py
  normalisation: per channel                                         code dataloader_cifarn.py (fixed CIFAR-10 /
                                                                     CIFAR-100 statistics; here the training
                                                                     split's own)
  no validation split (trains on all 50,000)                         code dataloader_cifarn.py (train, eval_train
                                                                     and test only)

Stated deviations:
- The strong view's randomness and grey images. The code's RandomAugment(3, 5) and its Cutout (utils/randaug.py) are
  policy 'promix_randaugment' (noisy_jax.core.promix_randaugment): 3 of its 14 PIL operations with replacement, each
  at a magnitude uniform over its whole range, then the gray (125, 123, 114) square of side floor(16 u) + 1 at the
  corner int(max(0, uniform(1, 32) - side / 2)) (np.random.uniform(32) draws on (1, 32]), cut on the uint8 image
  before the crop and flip as there; every operation equals the code's PIL call pixel for pixel
  (tests/test_promix_randaugment.py). It differs in its uniforms, 24-bit (torch.rand's) where Python's random() has
  53 bits, each magnitude rounded to float32, and drawn per example from the run's key; in Color and Contrast's gray
  image, Pillow 6.2's (the code's requirements.txt), which Pillow >= 7.0 rounds one level up at times; on one-channel
  images (mnist5k), where the code's Cutout fails (PIL refuses a 3-tuple fill on mode "L") and the hole here is 123.
  TORCHVISION_STRONG_VIEW, the view these rows used before (torchvision's RandAugment with the same 14 operations, 3
  of them at magnitude bin 15 of 31, the middle of its ranges: rotate 15 degrees, shear 0.15, Brightness-like factors
  1 +- 0.45 where the code's 0.05..0.95 only weaken, signed operations negated with probability 1/2; then a 16-pixel
  Cutout, the code's largest, on the normalised image after the crop and flip), stays available:
  --config.augment.strong.policy=randaugment --config.augment.strong.magnitude=15 --config.augment.strong.cutout=16.
- The crop pads with the normalisation mean (zeros after normalising, noisy_jax.core.augment); the code's
  RandomCrop(32, padding=4) pads the PIL image with black.
- Noise: drawn with the exact rate here (noise.exact: exactly the rate of each class, evenly over the targets); the
  code relabels int(rate x 50,000) examples chosen over the whole training set (Python `random`, seed 123), so the
  per-class counts vary around the same expectation (asymmetric: the chosen examples of the five unmapped classes
  keep their label, about rate / 2 of the set overall, as here).
- FMix and the warm-up's confidence penalty follow the paper unless `original` is given (noisy_jax.core.fmix,
  noisy_jax.methods.promix): the code's FMix indexes its spectrum along the wrong axis, and its NegEntropy clamps
  the logits (not the probabilities) at 1e-12.
- The method's own differences (the warm-up's padded last batch, the projection head not built, ...): the module
  docstrings of noisy_jax.methods.promix and noisy_jax.methods.promix_train.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
NOISES = {"symmetric": "symmetric_include_true", "asymmetric": "asymmetric"}  # code dataloader_cifarn.py sym / asym
# run.sh's synthetic rows: (dataset, noise) -> {rate: rho (rho_range "rho,rho")}.
SYNTHETIC_ROWS = {
  ("cifar10", "symmetric"): {0.2: 0.7, 0.5: 0.5},
  ("cifar10", "asymmetric"): {0.4: 0.5},
  ("cifar100", "symmetric"): {0.2: 0.7, 0.5: 0.5},
}
# The original's --noise_type -> noisy_jax.data.tfds_data's noise_key. rand2 / rand3: no run.sh line (our choice).
HUMAN_LABELS = {
  "cifar10_n": {"aggre": "aggregate", "rand1": "random1", "rand2": "random2", "rand3": "random3", "worst": "worst"},
  "cifar100_n": {"noisy100": "noisy"},
}
HUMAN_RHO = 0.5  # code run.sh: every CIFAR-N line has --rho_range 0.5,0.5
OPTIONS = ("original",)
DEFAULT = "cifar10,symmetric,0.2"

# Per family (CIFAR-N: its CIFAR's): (tau, pretrain_ep, debias_output = debias_pl). code run.sh.
FAMILY = {"cifar10": (0.99, 10, 0.8), "cifar100": (0.95, 30, 0.5)}
MODEL = "resnet18"  # code model.py ResNet18 (CIFAR stem)
BATCH_SIZE = 256  # code Train_promix.py --batch_size
ORIGINAL_NUM_EPOCHS = 600  # code Train_promix.py --num_epochs
NUM_EPOCHS = ORIGINAL_NUM_EPOCHS + 1  # its loop runs epochs 0 .. num_epochs
LEARNING_RATE = 0.05  # code Train_promix.py --lr
LR_DECAY_RATE = 0.1  # code Train_promix.py -lr_decay_rate
LR_MIN = LEARNING_RATE * LR_DECAY_RATE**3  # code utils.py adjust_learning_rate: eta_min
MOMENTUM = 0.9  # code Train_promix.py optimizer1
WEIGHT_DECAY = 5e-4  # code Train_promix.py optimizer1
WARMUP_EP = 50  # code Train_promix.py --warmup_ep
THRESHOLD = 0.9  # code Train_promix.py --threshold
START_EXPAND = 250  # code Train_promix.py --start_expand
BIAS_M = 0.9999  # code Train_promix.py --bias_m
TEMPERATURE = 0.5  # code Train_promix.py --T
MIXUP_ALPHA = 4.0  # code Train_promix.py train: np.random.beta(4, 4)
FMIX_ALPHA = 1.0  # code utils/fmix.py FMix(alpha=1)
FMIX_DECAY_POWER = 3.0  # code utils/fmix.py FMix(decay_power=3)
# code dataloader_cifarn.py: RandomAugment(3, 5) (its m = 5 is never read), its Cutout included (no Cutout after
# normalising); magnitude and num_magnitude_bins are there for a switch to TORCHVISION_STRONG_VIEW by flags.
STRONG_VIEW = {"policy": "promix_randaugment", "num_ops": 3, "magnitude": 5, "num_magnitude_bins": 31, "cutout": 0}
# torchvision's RandAugment at the middle of its ranges, then Cutout 16 on the normalised image: the former default,
# with which baselines.py's ProMix rows were measured.
TORCHVISION_STRONG_VIEW = {
  "policy": "randaugment",
  "num_ops": 3,
  "magnitude": 15,
  "num_magnitude_bins": 31,
  "cutout": 16,
}


def parse(arg: str | None) -> tuple[str, str, float | str, bool]:
  """'DATASET,NOISE,RATE[,original]' or 'DATASET,LABELS[,original]' -> (dataset, noise, rate or labels, original);
  ValueError naming the bad part and the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  form = "DATASET,NOISE,RATE[,original] or DATASET,LABELS[,original]"
  if parts[0] not in DATASETS:
    raise ValueError(f"promix_paper: unknown dataset {parts[0]!r} in {arg!r}; allowed: {', '.join(DATASETS)}.")
  dataset = parts[0]
  size = 2 if dataset in HUMAN_LABELS else 3
  if len(parts) not in (size, size + 1):
    raise ValueError(f"promix_paper config string {arg!r} must be {form}, e.g. {DEFAULT!r} or 'cifar10_n,aggre'.")
  if len(parts) == size + 1 and parts[-1] not in OPTIONS:
    raise ValueError(f"promix_paper: unknown option {parts[-1]!r} in {arg!r}; allowed: {', '.join(OPTIONS)}.")
  original = len(parts) == size + 1
  if dataset in HUMAN_LABELS:
    labels, allowed = parts[1], HUMAN_LABELS[dataset]
    if labels not in allowed:
      raise ValueError(
        f"promix_paper: unknown labels {labels!r} for {dataset} in {arg!r}; allowed: {', '.join(allowed)}."
      )
    return dataset, "human", labels, original
  noise, rate_text = parts[1], parts[2]
  noises = [n for d, n in SYNTHETIC_ROWS if d == dataset]
  if noise not in noises:
    raise ValueError(f"promix_paper: unknown noise {noise!r} for {dataset} in {arg!r}; allowed: {', '.join(noises)}.")
  rates = SYNTHETIC_ROWS[(dataset, noise)]
  try:
    rate = float(rate_text)
  except ValueError:
    rate = None
  if rate not in rates:
    raise ValueError(
      f"promix_paper: RATE {rate_text!r} in {arg!r} has no run.sh row for {dataset},{noise}; allowed: "
      f"{', '.join(map(str, rates))}."
    )
  return dataset, noise, rate, original


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, original = parse(arg)
  tau, pretrain_ep, debias = FAMILY[dataset.removesuffix("_n")]
  config = base.get_shared()
  if noise == "human":
    rho = HUMAN_RHO
    noise_type, rate_or_labels = "human", HUMAN_LABELS[dataset][rate_or_labels]  # the original's name -> noise_key
  else:
    rho = SYNTHETIC_ROWS[(dataset, noise)][rate_or_labels]
    noise_type = NOISES[noise]
  noise_dataset = dataset if noise_type == "asymmetric" else ""
  paper_rows.row_data(config, dataset, noise_type, rate_or_labels, validation_size=0, noise_dataset=noise_dataset)
  config.augment.strong = ml_collections.ConfigDict(STRONG_VIEW)
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {"pseudo_head": True}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = NUM_EPOCHS
  config.method = ml_collections.ConfigDict(
    {
      "name": "promix",
      "pretrain_ep": pretrain_ep,
      "warmup_ep": WARMUP_EP,
      "rho_start": rho,
      "rho_end": rho,
      "tau": tau,
      "threshold": THRESHOLD,
      "start_expand": START_EXPAND,
      "debias_output": debias,
      "debias_pl": debias,
      "bias_m": BIAS_M,
      "temperature": TEMPERATURE,
      "mixup_alpha": MIXUP_ALPHA,
      "fmix_alpha": FMIX_ALPHA,
      "fmix_decay_power": FMIX_DECAY_POWER,
      "fmix_spectrum": "original" if original else "paper",
      "warmup_penalty": noise == "asymmetric",
      "penalty_clamps_logits": original,
    }
  )
  config.optimizer = base.optimizer(LEARNING_RATE, weight_decay=WEIGHT_DECAY, momentum=MOMENTUM)
  config.optimizer.lr_schedule = "cosine"
  config.optimizer.cosine_epochs = ORIGINAL_NUM_EPOCHS
  config.optimizer.lr_min = LR_MIN
  return config
