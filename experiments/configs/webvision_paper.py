r"""mini-WebVision (the first 50 classes of WebVision 1.0's Google images) with the ImageNet ResNet-50, labels as given.

The string after the colon picks the method: joint_optimization (default) | ce | gce. Needs the WebVision folder
(manual download; layout in noisy_jax/data/webvision.py) and, in practice, an accelerator:

  python -m experiments.train --config=experiments/configs/webvision_paper.py \
      --config.dataset_kwargs.root=/data/webvision --workdir=workdirs/webvision_jo

Data: the Google training images of classes 0-49 with their given (query) labels (noise type 'none': nothing is
corrupted, no clean training label is known), every row trained on (validation_size 0); test = WebVision's
validation images of those classes (dataset 'mini_webvision'). `dataset_kwargs` sits at the top level with `root`
unset (a placeholder), so --config.dataset_kwargs.root=DIR works on the locked config.

Settings: DivideMix's WebVision recipe (REFERENCE §8; LiJunnan1992/DivideMix@d9d3058 Train_webvision.py and
dataloader_webvision.py, read). Both papers train their network from scratch on WebVision, and so does this config
(config.model.pretrained 'none'): DivideMix builds `InceptionResNetV2(num_classes=args.num_class)` and loads no
weights (Train_webvision.py:204-207; InceptionResNetV2.py has no loader), ELR+ likewise (shengliu66/ELR@934af53
ELR_plus/config_webvision.json:11-19, arch1 / arch2 InceptionResNetV2; ELR_plus/model/InceptionResNetV2.py loads
nothing), unlike their Clothing1M recipes (clothing1m_paper.py). --config.model.pretrained=PATH fine-tunes instead
(e.g. torchvision's ImageNet ResNet-50, with --config.normalization=imagenet, the statistics those weights expect;
options for it: --config.optimizer.backbone_lr_scale, --config.model.kwargs.freeze_batch_norm). ELR+'s WebVision
recipe (REFERENCE §6: lr 0.02, batch 32, 100 epochs, x0.1 at 50, wd 5e-4, mixup) is the other one REFERENCE gives;
not used.

What is NOT reproduced, and why no paper number is quoted here:
  * The network. Both papers train an Inception-ResNet-v2 (REFERENCE §6, §8) on 299 x 299 crops: DivideMix resizes
    the shorter side to 320, then a random resized crop of 299 + horizontal flip for training and a centre 299 crop
    for testing (dataloader_webvision.py at d9d3058; its earlier versions, and ELR+, crop 227 without resizing).
    Here: the ResNet-50 at 224 x 224 ('resnet50'; shorter side resized to 224, centre crop, image_size 224),
    augmented by a horizontal flip only. A different network at a different resolution: the papers' accuracies are
    not targets of this config.
  * The method. DivideMix's own machinery (two networks, GMM split, MixMatch) is not in noisy_jax; its recipe
    (optimiser, schedule, batch) is applied to the methods that are.
  * Normalisation: the code uses ImageNet's channel statistics, Normalize((0.485, 0.456, 0.406), (0.229, 0.224,
    0.225)) (dataloader_webvision.py); here 'per_channel', the training split's own statistics (a fixed affine map of
    the inputs either way; our choice for a network trained from scratch).
  * DivideMix's warm-up epoch (plain CE for epoch 0) and its loop over epochs 0..80 (81 passes): here 80 epochs.

Every constant and its source (REFERENCE = shared/REFERENCE.md; "DivideMix" = the files named above, read):
  50 classes (the first 50 of train_filelist_google.txt)             DivideMix (num_class 50, target < num_class);
                                                                      REFERENCE §6 "WebVision-50"
  from scratch (pretrained 'none'), BatchNorm statistics trained (freeze_batch_norm False), one lr for every
  parameter (backbone_lr_scale 1.0)                                   DivideMix Train_webvision.py:204-207 (no
                                                                      weights loaded), :42, :122 net.train(),
                                                                      :222-223 optim.SGD(net.parameters(), ...);
                                                                      ELR+ as above
  SGD lr 0.01, weight decay 5e-4, batch 32                            REFERENCE §8
  momentum 0.9                                                        DivideMix optim.SGD(..., momentum=0.9)
  80 epochs, lr x0.1 from epoch 40                                    REFERENCE §8 (code: lr /= 10 if epoch >= 40)
  no validation split (every training row trained on; the code evaluates on WebVision's and ILSVRC's validation
  sets every epoch)                                                   DivideMix dataloader_webvision.py
  noise type 'none' (the labels as given)                             the benchmark: real noise
  METHOD joint_optimization (default), as jo_paper.py's structure:
    stage 1: constant lr 0.01 (no schedule), 80 epochs                 REFERENCE §2: stage 1 has no lr schedule;
                                                                      lr and length: the recipe above (our choice)
    alpha 1.0, beta 0.5                                               REFERENCE §2: the original code's defaults
    soft relabelling once per epoch from the mean of the last 10 epochs' predictions (history_length 10)
                                                                      REFERENCE §2 (original code)
    begin 28: relabelling from epoch 28 of 80                         our choice: the code's 70 of 200 (35%)
    prior p uniform over the 50 classes                               REFERENCE §2 (uniform for CIFAR-10); our
                                                                      choice here (the classes are not balanced)
    stage 2: a fresh ResNet-50, cross entropy on the stage-1 soft labels, the recipe above (lr 0.01, 80 epochs,
             x0.1 at 40, momentum 0.9, wd 5e-4, batch 32)        REFERENCE §2 (stage 2 = fresh network, CE, step
                                                                      schedule); its values: the recipe (our choice)
  METHOD ce: cross entropy, the recipe above                          the baseline (DivideMix's warm-up loss,
                                                                      Train_webvision.py warmup: CEloss)
  METHOD gce: generalized cross entropy q = 0.7, the recipe above     REFERENCE §1 (q); our choice to run it here
"""

import ml_collections
from ml_collections import config_dict

from experiments.configs import real_noise

DATASET = "mini_webvision"
NUM_CLASSES = 50  # DivideMix Train_webvision.py --num_class 50; REFERENCE §6 "WebVision-50"
IMAGE_SIZE = 224  # our choice (ResNet-50's usual input); the papers: 299 (DivideMix@d9d3058) or 227 (ELR+)
METHODS, DEFAULT = real_noise.METHODS, real_noise.DEFAULT

MODEL = "resnet50"  # our choice: the papers' Inception-ResNet-v2 is not in noisy_jax
PRETRAINED = "none"  # from scratch: DivideMix Train_webvision.py:204-207; ELR+ config_webvision.json:11-19
LEARNING_RATE = 0.01  # REFERENCE §8
WEIGHT_DECAY = 5e-4  # REFERENCE §8
MOMENTUM = 0.9  # DivideMix Train_webvision.py
BATCH_SIZE = 32  # REFERENCE §8
NUM_EPOCHS = 80  # REFERENCE §8
LR_BOUNDARIES = (40,)  # REFERENCE §8 (x0.1 at 40)
VALIDATION_SIZE = 0  # DivideMix dataloader_webvision.py: every training row is trained on
# Joint Optimization (REFERENCE §2; begin: our choice, see the module docstring).
JO_ALPHA, JO_BETA, JO_HISTORY_LENGTH = real_noise.JO_ALPHA, real_noise.JO_BETA, real_noise.JO_HISTORY_LENGTH
JO_BEGIN = 28  # our choice: 35% of 80, the original code's 70 of 200
GCE_Q = real_noise.GCE_Q


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  return real_noise.get_config(
    real_noise.parse(arg, "webvision_paper"),
    dataset=DATASET,
    dataset_kwargs={
      "root": config_dict.placeholder(str),
      "on_bad_file": config_dict.placeholder(str),  # 'skip': web-crawled files that do not decode (bad_files)
      "max_bad_fraction": config_dict.placeholder(float),
      "image_size": IMAGE_SIZE,
      "num_classes": NUM_CLASSES,
      "validation_size": VALIDATION_SIZE,
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
