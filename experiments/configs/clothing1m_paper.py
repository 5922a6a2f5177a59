r"""Clothing1M (Xiao et al., CVPR 2015): the ImageNet ResNet-50 fine-tuned from pretrained weights, labels as given.

The string after the colon picks the method: joint_optimization (default) | ce | gce. Needs the Clothing1M folder
(manual download; layout in noisy_jax/data/clothing1m.py), the ImageNet weights of torchvision's ResNet-50 and, in
practice, an accelerator:

  python -m experiments.train --config=experiments/configs/clothing1m_paper.py \
      --config.dataset_kwargs.root=/data/clothing1m --config.model.pretrained=/weights/resnet50-0676ba61.pth \
      --workdir=workdirs/c1m_jo
  python -m experiments.train --config=experiments/configs/clothing1m_paper.py:ce \
      --config.dataset_kwargs.root=/data/clothing1m --config.dataset_kwargs.max_examples=2000 \
      --config.model.pretrained=none --workdir=/tmp/c1m_try

Pretrained weights are required: both papers fine-tune torchvision's ImageNet ResNet-50, `resnet50(pretrained=True)`
with its 1,000-class `fc` replaced by a fresh 14-class one (DivideMix Train_clothing1M.py:211-214, ELR+
ELR_plus/model/model.py:15-20). config.model.pretrained is noisy_jax.experiment.pretrained.REQUIRED
('required') until given: a run stops at its start, saying so. Pass torchvision's ResNet50_Weights.IMAGENET1K_V1,
what `pretrained=True` loads (the file resnet50-0676ba61.pth since torchvision 0.13; the papers' releases served
resnet50-19c8e357.pth), as .pth or .safetensors (noisy_jax.models.pretrained maps the names; the head is initialised
afresh for 14 classes), or --config.model.pretrained=none to train from random initialisation on purpose (accuracies
then not comparable with the papers').

Options the papers do not use, offered for fine-tuning: --config.optimizer.backbone_lr_scale=S (every parameter but
the classifier at S x the lr; the papers: one lr for the whole network; Joint Optimization's stage 2 has its own,
--config.stage2.optimizer.backbone_lr_scale) and --config.model.kwargs.freeze_batch_norm=True (BatchNorm on its
running statistics in training too; the papers train them; models.imagenet_resnet).

Data: train on the ~1M noisy_train images with their given labels (noise type 'none': nothing is corrupted, no clean
training label is known), validate on the hand-checked clean_val split, test on clean_test: the loader's defaults
(dataset 'clothing1m'; split sizes in noisy_jax/data/clothing1m.py). 14 classes. `dataset_kwargs` sits at the top
level with `root` unset (a placeholder), so --config.dataset_kwargs.root=DIR works on the locked config;
max_examples (unset) keeps the first rows of every split for a quick run.

What is NOT reproduced, and why no paper number is quoted here:
  * Joint Optimization's own Clothing1M settings (Tanaka et al., CVPR 2018, the Clothing1M section): the paper could
    not be read here (its official code, DaikiTanaka-UT/JointOptimization, covers CIFAR-10 only). Not used. Recalled,
    not verified: the paper fine-tunes the pretrained ResNet-50 and takes the prior p from the noisy labels' class
    distribution [recalled].
  * Sampling. ELR+'s "epoch" is 3,000 batches of 64 from a class-balanced subset (192,000 shuffled noisy_train
    images, at most 1/14 of them per noisy label; ELR_plus/config_clothing1m.json:29-31 batch_size, num_batches,
    data_loader/clothing1m.py), DivideMix's 1,000 balanced batches of 32 (Train_clothing1M.py:18, :30). The trainer
    has neither balanced sampling nor partial epochs: an epoch here is one pass over all 1M noisy images (15,625
    steps of 64), so 15 epochs here see ~5.2x the images of ELR+'s 15 (and the classes in their noisy proportions).
  * Preprocessing. Both codes: resize the shorter side to 256, random 224 crop + horizontal flip for training, centre
    224 crop for evaluation (ELR_plus/data_loader/data_loaders.py:80-92, DivideMix dataloader_clothing1M.py:125-137).
    Here: every split is decoded as the evaluation (shorter side to 224, centre crop: image_size 224), augmentation
    is the horizontal flip only (no crop: the on-device crop pads and shifts, it does not crop a larger image).
  * The papers' methods. ELR+'s and DivideMix's own machinery on this data is not what this config runs; their
    recipe (network, weights, optimiser, schedule, batch) is applied to the methods named above.

Every constant and its source ("ELR+" = shengliu66/ELR@934af53, file:line read; "DivideMix" =
LiJunnan1992/DivideMix@d9d3058, file:line read; REFERENCE = shared/REFERENCE.md, which summarises both):
  model: ResNet-50 ('resnet50', torchvision layout, 14 outputs)      ELR+ config_clothing1m.json:8-9 (arch1 resnet50,
                                                                      num_classes 14); DivideMix Train_clothing1M.py:29
                                                                      (num_class 14), :212-213
  pretrained: torchvision's ImageNet weights (required, see above)   ELR+ model/model.py:17 resnet50(pretrained=True);
                                                                      DivideMix Train_clothing1M.py:212
  BatchNorm statistics trained (freeze_batch_norm False)              ELR+ trainer/trainer.py:76 model.train();
                                                                      DivideMix Train_clothing1M.py:40, :122
                                                                      net.train()
  one lr for every parameter (backbone_lr_scale 1.0)                  ELR+ train.py:101-105 (one parameter group);
                                                                      DivideMix Train_clothing1M.py:227-228
                                                                      optim.SGD(net.parameters(), ...)
  normalisation 'per_channel': the training split's channel statistics, what both codes' constants are: Normalize
    ((0.6959, 0.6537, 0.6371), (0.3113, 0.3192, 0.3214)), Clothing1M's, not ImageNet's (although the weights were
    trained on ImageNet-normalised inputs; a run with PyTorch weights logs that; --config.normalization=imagenet
    gives ImageNet's)                                                 ELR+ data_loader/data_loaders.py:85, :91;
                                                                      DivideMix dataloader_clothing1M.py:130, :136
  SGD, lr 0.002                                                       ELR+ config_clothing1m.json:42; DivideMix
                                                                      Train_clothing1M.py:19
  momentum 0.9, weight decay 1e-3                                     ELR+ config_clothing1m.json:43-44; DivideMix
                                                                      Train_clothing1M.py:227
  batch 64                                                            ELR+ config_clothing1m.json:29 (DivideMix
                                                                      Train_clothing1M.py:18: 32)
  15 epochs, lr x0.1 at epoch 7 (MultiStepLR milestones [7])          ELR+ config_clothing1m.json:75-76, :81
                                                                      (DivideMix Train_clothing1M.py:24, :237-238:
                                                                      80 epochs, x0.1 from 40)
  validation on clean_val (model selection by validation accuracy)    ELR+ config_clothing1m.json:88 "monitor": "max
                                                                      val_my_metric"; DivideMix tests with best-val
                                                                      checkpoints (REFERENCE §8)
  noise type 'none' (the labels as given)                             the benchmark: real noise
  METHOD joint_optimization (default), as jo_paper.py's structure:
    stage 1: constant lr 0.002 (no schedule), 15 epochs                REFERENCE §2: stage 1 has no lr schedule;
                                                                      lr and length: the recipe above (our choice)
    alpha 1.0, beta 0.5                                               REFERENCE §2: the original code's defaults
    soft relabelling, once per epoch, from the mean of the last 10 epochs' predictions (history_length 10)
                                                                      REFERENCE §2 (original code)
    begin 5: relabelling from epoch 5 of 15                           our choice: the code's 70 of 200 (35%)
    prior p uniform over the 14 classes                               REFERENCE §2 (uniform for CIFAR-10); our
                                                                      choice here (Clothing1M is not balanced;
                                                                      see [recalled] above)
    stage 2: the network again from the pretrained weights, cross entropy on the stage-1 soft labels, the recipe
             above (lr 0.002, 15 epochs, x0.1 at 7, momentum 0.9, wd 1e-3, batch 64)
                                                                      REFERENCE §2 (stage 2 = fresh network, CE, step
                                                                      schedule); its values: the recipe (our choice)
    label table: 1M x 14 with a 10-epoch history, 624 MB (README: row-sharded over devices when large)
  METHOD ce: cross entropy, the recipe above (15 epochs, x0.1 at 7)   the baseline; our choice to offer it
  METHOD gce: generalized cross entropy q = 0.7, the recipe above     REFERENCE §1 (q); our choice to run it here
"""

import ml_collections
from ml_collections import config_dict

from experiments.configs import real_noise
from noisy_jax.experiment import pretrained

DATASET = "clothing1m"
NUM_CLASSES = 14  # noisy_jax.data.clothing1m.NUM_CLASSES
IMAGE_SIZE = 224  # ELR+ / DivideMix: 224 crops (of 256-resized images)
METHODS, DEFAULT = real_noise.METHODS, real_noise.DEFAULT

MODEL = "resnet50"  # ELR+ config_clothing1m.json:8; DivideMix Train_clothing1M.py:212
# Required: torchvision's ImageNet ResNet-50 (ELR+ model/model.py:17; DivideMix Train_clothing1M.py:212); a run stops
# until --config.model.pretrained=PATH or =none is given (noisy_jax.experiment.pretrained.check_given).
PRETRAINED = pretrained.REQUIRED
LEARNING_RATE = 0.002  # ELR+ config_clothing1m.json:42; DivideMix Train_clothing1M.py:19
WEIGHT_DECAY = 1e-3  # ELR+ config_clothing1m.json:44; DivideMix Train_clothing1M.py:227
MOMENTUM = 0.9  # ELR+ config_clothing1m.json:43; DivideMix Train_clothing1M.py:227
BATCH_SIZE = 64  # ELR+ config_clothing1m.json:29 (DivideMix: 32); an epoch here is a full pass (module docstring)
NUM_EPOCHS = 15  # ELR+ config_clothing1m.json:81
LR_BOUNDARIES = (7,)  # ELR+ config_clothing1m.json:75-76 (MultiStepLR milestones [7], gamma 0.1)
# Joint Optimization (REFERENCE §2; begin: our choice, see the module docstring).
JO_ALPHA, JO_BETA, JO_HISTORY_LENGTH = real_noise.JO_ALPHA, real_noise.JO_BETA, real_noise.JO_HISTORY_LENGTH
JO_BEGIN = 5  # our choice: 35% of 15, the original code's 70 of 200
GCE_Q = real_noise.GCE_Q


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  return real_noise.get_config(
    real_noise.parse(arg, "clothing1m_paper"),
    dataset=DATASET,
    dataset_kwargs={
      "root": config_dict.placeholder(str),
      "on_bad_file": config_dict.placeholder(str),  # 'skip': web-crawled files that do not decode (bad_files)
      "max_bad_fraction": config_dict.placeholder(float),
      "image_size": IMAGE_SIZE,
      "max_examples": config_dict.placeholder(int),
    },
    model=MODEL,
    batch_size=BATCH_SIZE,
    num_epochs=NUM_EPOCHS,
    learning_rate=LEARNING_RATE,
    weight_decay=WEIGHT_DECAY,
    momentum=MOMENTUM,
    lr_boundaries=LR_BOUNDARIES,
    jo_begin=JO_BEGIN,
    pretrained=PRETRAINED,
  )
