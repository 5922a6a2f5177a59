"""Every method of the project side by side on mnist5k: the seed methods and the baselines reviewers ask for.

  python -m experiments.train --config=experiments/configs/baselines.py:sym60 --workdir=workdirs/baselines_sym60
  python -m experiments.train --config=experiments/configs/baselines.py:asym40 --workdir=workdirs/baselines_asym40
  python -m experiments.train --config=experiments/configs/baselines.py:losses_sym60 \
      --workdir=workdirs/baselines_losses_sym60        # the robust-loss family (below), same two settings

Settings (the part after the colon): 'sym60' = 60% symmetric noise (exact rate per class), 'asym40' = 40%
asymmetric noise with the MNIST map (2->7, 3->8, 5<->6, 7->1: REFERENCE section 4). Seeds 0, 1, 2; the table
gives best and last test accuracy, the mean over seeds of the test accuracy at the epoch of best validation
accuracy (on the validation split's clean labels: validation_labels 'clean') and the wall time of a run.

Every method trains the small CNN for ce.py's 40 epochs with ce.py's SGD (lr 0.05, x0.1 at 20 and 30), except:
  joint_optimization   its own two stages (50 epochs of label optimisation, then 20 of CE on the new labels:
                       joint_optimization.py), so it gets more compute than the others; the table's wall time says
                       how much;
  coteaching(_plus)    the two networks of the paper with its optimiser: Adam lr 1e-3, decayed linearly from epoch
                       16 of 40 (the paper's 80 of 200) with beta1 0.9 -> 0.1, no weight decay; forget rate = the
                       noise rate (assumed known, as the paper; the originals know pairflip and symmetric noise
                       only, where it is the fraction of flipped labels: at 40% asymmetric noise the rows keep the
                       noise model's 0.4, twice the 0.2 of labels that the MNIST map flips), ramped over the first 10
                       epochs; Co-teaching+ with the disagreement phase from the first epoch (the original's MNIST
                       init_epoch 0);
  sop_plus             SOP's run (below) with SOP+'s terms (consistency 0.9, class balance 0.1: the original's
                       config_cifar100.json), its optimiser (SGD lr 0.02, momentum 0.9, weight decay 1e-3, cosine
                       to 2e-4 over the run's 40 epochs as over its 300) and its strong view: AutoAugment's CIFAR-10
                       policy with the TF
                       magnitudes, then Cutout of half the side (14 of 28 pixels, as its 16 of 32), no crop, no flip
                       (the table's runs have none: a flip is wrong for digits). On one-channel digits the policy's
                       Color is the identity, Invert swaps ink and background, Rotate (up to 30 degrees), Shear and
                       Translate move the digit, and Posterize, Solarize, Equalize, Contrast, Brightness and
                       Sharpness act on the 0-255 codes as on a grey image. With lr 0.05 (ce.py's) instead, SOP+
                       predicts one class from its second epoch on: 10.00% test accuracy after 4 epochs of seed 0,
                       against 88.00% at lr 0.02 (`python -m experiments.train
                       --config=experiments/configs/baselines.py:sym60 --runs=sop_plus
                       --config.shared.seeds="(0,)" --config.runs.sop_plus.num_epochs=4
                       [--config.runs.sop_plus.optimizer.learning_rate=0.05] --workdir=...`);
  jocor                the pair on JoCoR's joint loss with
                       Co-teaching's plan above (the original's), forget rate as the original's default: the noise
                       rate for symmetric noise, half of it for asymmetric noise (algorithm/jocor.py: its asymmetric
                       MNIST map is this one, and it flips half the classes), so 0.6 and 0.2 here; lambda 0.9 (its
                       README's best for CIFAR-10 at 20% and 50% symmetric and 40% asymmetric noise; it names 0.65
                       at 80%), ramped over 10 epochs;
  dividemix            the two networks of DivideMix with ce.py's optimiser and epochs: 5 epochs of CE warm-up (the
                       original warms up 10 of 300 epochs on CIFAR-10; 5 of 40 is our choice, not tuned here), then
                       per epoch the co-divide (GMM, p_threshold 0.5) and MixMatch of each network on its peer's
                       split. lambda_u and the warm-up penalty follow the original's CIFAR-10 settings: lambda_u 25
                       for symmetric noise; lambda_u 0 with the negative-entropy penalty in the warm-up for
                       asymmetric noise. Its wall time includes the per-epoch pass over the training split;
  elr_plus             ELR+'s two networks with the original's CIFAR-10 optimiser (SGD lr 0.02, momentum 0.9, weight
                       decay 5e-4, x0.1 at 30 of 40 epochs: its 150 of 200) and its CIFAR-10 settings (mixup alpha
                       1, no ramp of the ELR term, average decay 0.997, no warm-up), with the values of ELR below.
                       With ce.py's lr 0.05 instead, ELR+ from scratch stayed at the uniform prediction in a trial
                       on this data (seed 0, a few epochs), while lr 0.02 trains. The average's ramp is scaled
                       with the run: the original ramps it over 40,000 of its 78,200 steps (200 CIFAR-10 epochs of
                       391), about half; here over 560 of 1,120 (40 x 28).
  disc                 DISC with the original's CIFAR-10 settings for the noise (disc_paper.py: at 60% symmetric
                       lamd_h 0.2 and threshold momentum 0.95; at 40% asymmetric lamd_h 1, momentum 0.95; sigma 0.5,
                       mixup alpha 5), its SGD (lr 0.1, no momentum, weight decay 1e-3) and warm-up scaled to the
                       run's 40 epochs (x0.1 at 16 and 32 as its 80 and 160 of 200; 4 warm-up epochs as its 20),
                       and its strong view as disc_paper.py gives it for CIFAR-10: the original's own pool
                       (RandAugmentwogeo, policy 'disc_randaugment': 2 of its 16 PIL operations, each run with
                       probability 1/2 at a level of 1..4, then its grey CutoutAbs of int(0.15 x 28) = 4 on the
                       uint8 image, as int(0.15 x 32) = 4 on CIFAR: a 5-pixel hole), no crop, no flip (so the
                       original's order, crop and flip before the pool, changes nothing here). On one-channel
                       digits the pool's Color is the identity and Invert swaps ink and background; at these levels
                       TranslateX/Y move nothing and ShearX/Y at most a pixel. disc_paper.TORCHVISION_STRONG_VIEW
                       (torchvision's RandAugment, 2 operations at magnitude 9, then Cutout 4) is the former view;
  promix               ProMix's two networks, each with its pseudo head, with run.sh's CIFAR-10 rows for the noise
                       (promix_paper.py: at 60% symmetric its 50% row, rho 0.5; at 40% asymmetric its row, rho 0.5,
                       and the warm-up's confidence penalty; tau 0.99, debias 0.8), its SGD (lr 0.05, momentum 0.9,
                       weight decay 5e-4, cosine to 5e-5 over the run's 40 epochs as over its 600), its epochs scaled
                       to 40 (1 warm-up epoch for its 10 of 600, the ramps over 3 epochs for its 50, label guessing in
                       the last 16 for its 250) and its strong view as promix_paper.py gives it: the original's own
                       pool (RandomAugment(3, 5), policy 'promix_randaugment': 3 of its 14 PIL operations at
                       uniform magnitudes, then its grey Cutout of side floor(u W) + 1, u uniform on [0, 0.5), on
                       the uint8 image), no crop, no flip. On one-channel digits Color is the identity and the hole
                       is 123 (the original's 3-tuple fill fails on mode "L"). promix_paper.TORCHVISION_STRONG_VIEW
                       (torchvision's RandAugment, 3 operations at magnitude 15 of 31, then Cutout 16) is the former
                       view; its rows, with Cutout 14 of 28 pixels as its 16 of 32, are named in README.md.
  t_revision           T-Revision's three stages (noisy_jax.methods.t_revision) within the table's 40 epochs, 8 + 24 +
                       8: cross entropy with ce.py's SGD at a constant lr (the original's warm-up has no schedule
                       either) for 8 epochs, whose best-validation network's anchor points give T (the 97th-percentile
                       filter of the original's tools.fit for MNIST and CIFAR-10); from that network 24 epochs of the
                       reweighted loss with ce.py's SGD, x0.1 at 12 and 18 (its 20 and 30 of 40); from the reweighting's
                       best-validation network 8 epochs of the revision with the original's Adam (lr 5e-7, weight decay
                       1e-4 on the network and dT; t_revision_paper.py). Why these epochs: the original's 20 + 200 + 200
                       scaled to 40 leaves 2 warm-up epochs, and T needs a warm-up network at cross entropy's best; at a
                       constant lr 0.05 the warm-up's best validation epoch is 5, 5, 5 at 60% symmetric noise and 3, 5,
                       6 at 40% asymmetric (seeds 0-2 of the table's rows), so 8 hold the peak with room. An earlier
                       review's 8 warm-up + 40 reweighting epochs would make 48 before the revision, more than any row
                       but Joint Optimization's. The revision gets the fewest: at lr 5e-7 Adam moves a weight by about
                       5e-7 a step, at most about 1e-4 in its 8 x 28 steps (the original's 200 epochs of 352 steps:
                       0.035); in the table's rows each seed's test accuracy moves by at most 0.3 points over the
                       revision's 8 epochs. The original's SGD (lr 0.01; no momentum in the warm-up) is not used: its 8
                       warm-up epochs of 28 steps reach 73.10% test accuracy against cross entropy's 83.70% at best val
                       with ce.py's lr (seed 0, 60% symmetric).
  pes                  PES's four stages (noisy_jax.methods.pes) within the table's 40 loop epochs, its original's
                       (PES_cs.py: T1 = 25 of 200 loop epochs, refines of 7 and 5 epochs inside loop epoch T1;
                       docs/pes_schedule.md) scaled: 5 warm-up epochs of cross entropy with ce.py's SGD; the refines
                       inside loop epoch 5, 2 epochs (its 7 x 40 / 200 = 1.4, rounded up: this refine renews a conv too)
                       of the small CNN's last block (Conv_2 and BatchNorm_2, its third conv stage) + classifier
                       (Dense_0, its only dense layer), the analogue of the ResNet's stage 4 + linear, then 1 epoch (its
                       5 x 40 / 200) of the classifier, each renewed and trained alone with Adam, no weight decay; then
                       stage1's 34 epochs (40 - 5 - 1) continuing the warm-up's SGD, ce.py's x0.1 at 20 and 30 on the
                       loop's clock (from stage1's 15th and 25th epochs), on the rows it selects each epoch, class
                       weights not clipped, every parameter trained after the refines. The refines' Adam runs at lr
                       1e-3, ten times the original's 1e-4: the original's refines take (7 + 5) x 351 steps, these 3 x
                       28. In a trial (seed 0, 60% symmetric; the warm-up ends at 85.25% validation, 83.70% test
                       accuracy), after the refines the validation accuracy is 22.00% at lr 1e-4 (the fresh classifier
                       barely trained in 28 steps), 75.50% at 1e-3 and 38.00% at 1e-2; stage1's first selection then
                       holds 14.0%, 32.9% and 21.9% of the rows, and the run's test accuracy at best validation is
                       49.90%, 90.70% and 92.30%. 1e-3 is the one whose refined network keeps near the warm-up's (the
                       refines' purpose), chosen on the refines' validation and not on the final test accuracy.
  pes_semi             PES-semi's three stages (noisy_jax.methods.pes_semi) within the table's 40 loop epochs, its
                       original's (PES_semi.py: T1 = 20 of 300 loop epochs, a refine of the classifier for 5 epochs
                       inside loop epoch T1, whose MixMatch epoch follows in that same loop epoch) scaled: 3 warm-up
                       epochs (its 20 x 40 / 300 = 2.7, rounded up) of cross entropy with ce.py's SGD; 1 refine epoch
                       (its 5 x 40 / 300 = 0.7, rounded up) of the renewed classifier alone with Adam at lr 1e-3, as
                       PES's row and for its reason; then 37 MixMatch epochs (40 - 3) continuing the warm-up's SGD,
                       ce.py's x0.1 at loop epochs 20 and 30, lambda_u 150 (its CIFAR-10 default, ramped over 16
                       epochs from loop epoch 3), T 0.5, alpha 4 then 0.75 from loop epoch 20, class weights clipped
                       at 3. Its epoch is int(N / 128) = 28 steps, one pass over the rows, as the original's
                       int(50,000 / 128) = 390 are one pass over CIFAR's (the original's count is fixed whatever the
                       data: 390 steps here would be 14 passes an epoch). Not ce.py's SGD but the original's (lr 0.02,
                       weight decay 5e-4, cosine to lr / 100 over the run) would change two things at once; the
                       table keeps every SGD row on ce.py's.
  gls, peer_loss, volminnet, f_divergence, cores, cal
                       the CIFAR-N replication's methods: each one's plan, scaled to the table, is in
                       experiments/configs/baselines_replication.py's docstring.
Method settings: ELR with the CIFAR-10 values of its configs (symmetric: beta 0.7, lambda 3; asymmetric: beta 0.9,
lambda 1); SOP with the original's rates (symmetric: lr_u 1, lr_v 10; asymmetric: lr_u 0.1, lr_v 100); forward
loss correction with the noise model's true transition matrix; GCE q 0.7, truncated Lq q 0.7 k 0.5, EL log_end
0.75 as the per-method configs. Nothing was tuned on this table.

The robust-loss family ('losses_sym60', 'losses_asym40'): every row trains the small CNN with ce.py's 40 epochs and
SGD, as GCE's row above (CE and GCE are re-run in the same table), each loss with its paper's CIFAR-10 values:
  agce, aul, ael, nce_agce, nce_aul, nce_ael   ALFs' lnl/config.py CIFAR10_CONFIG (alfs_anl_paper.ALFS_ROWS)
  anl_ce, anl_fl                               ANL's config/cifar10_anl_{ce,fl}.json: alpha 5, beta 5, gamma 0.5,
                                               and its optimizer change: weight decay 0 and the L1 term delta 5e-5
                                               (optimizer.l1); NFL / NNFL with the paper's gradient
  bi_tempered                                  t1 0.8, t2 1.2 (our choice: the original gives no default, and its
                                               README names t1 < 1 < t2 the robust range)
  poly1                                        epsilon 2 (optax's default, the paper's ImageNet value)
  taylor                                       order 2 (our choice; the paper publishes no code)
  logit_clip                                   CE on logits clipped at temperature 1.5 (the original README's
                                               CIFAR-10 command)
  ece_mae, efl_mae                             epsilon-softmax's config.py get_eps_softmax for CIFAR-10 by noise:
                                               symmetric alpha 0.01, beta 5, m 1e5; asymmetric 0.02, 5, 1e3; EFL's
                                               gamma 0.1 (EFLandMAE's default) with the code's detached focal factor
                                               (the loss's default); ce.py's SGD (the code's L2 1e-4 is a training
                                               setting, not the loss's, as for the ALFs rows)
  jal_ce, jal_fl                               JAL's config.py CIFAR10_CONFIG: alpha 1, beta 1, a 30, JAL-FL's gamma
                                               0.5, NFL with the paper's gradient (as anl_fl); and its optimizer
                                               change, as ANL's: weight decay 0 and the L1 term delta 5e-5
                                               (get_weight_decay_config for AMSE losses)
"""

import ml_collections

from experiments.configs import alfs_anl_paper
from experiments.configs import base
from experiments.configs import baselines_replication as replication
from experiments.configs import ce
from experiments.configs import disc_paper
from experiments.configs import encouraging
from experiments.configs import gce
from experiments.configs import joint_optimization
from experiments.configs import loss_correction
from experiments.configs import pes_paper
from experiments.configs import promix_paper
from experiments.configs import sop_paper
from experiments.configs import t_revision_paper
from experiments.configs import truncated_lq
from noisy_jax.core import pes as pes_core
from noisy_jax.train import optim

SETTINGS = {"sym60": ("symmetric", 0.6, ""), "asym40": ("asymmetric", 0.4, "mnist")}
COTEACHING_EPOCHS = 40
COTEACHING_DECAY_START = 16  # the paper's 80 of 200 epochs
DIVIDEMIX_WARM_UP = 5
JOCOR_LAMBDA = 0.9  # the original README's best for CIFAR-10 at 20% / 50% symmetric and 40% asymmetric noise
SOP_PLUS_POLICY = sop_paper.STRONG_VIEW["policy"]  # the original's strong view
SOP_PLUS_CUTOUT = 14  # its Cutout 16 of CIFAR's 32 pixels: half the side, here of mnist5k's 28
ELR_PLUS_EMA_STEP = 560  # half of the run's 40 x 28 steps, as the original's 40,000 of 78,200
# T-Revision's three stages in the table's 40 epochs (module docstring): warm-up, reweighting, revision.
T_REVISION_EPOCHS = (8, 24, 8)
# PES in the table's 40 loop epochs (module docstring): T1 = 25 of the original's 200 scaled, the refines' epochs.
PES_WARMUP_EPOCHS = pes_paper.WARMUP_EPOCHS["cifar10"] * 40 // pes_paper.LOOP_EPOCHS  # 5
PES_REFINE_EPOCHS = (2, 1)  # its T2 = 7 and T3 = 5 of 200 loop epochs scaled to 40 (1.4, 1.0), the first rounded up
PES_REFINE_LEARNING_RATE = 1e-3  # ten times the original's 1e-4 (pes_paper.REFINE_LEARNING_RATE): module docstring
# the small CNN's last block (its third conv and BatchNorm) + classifier, then the classifier
PES_REFINE_MODULES = (("Conv_2", "BatchNorm_2", optim.CLASSIFIER), (optim.CLASSIFIER,))
# PES-semi in the table's 40 loop epochs (module docstring): T1 = 20 and T2 = 5 of the original's 300 (PES_semi.py:31,
# :40 --T2, :221 T1 for CIFAR-10) scaled and rounded up; lambda_u its --lambda_u default (PES_semi.py:37).
PES_SEMI_WARMUP_EPOCHS = 3
PES_SEMI_REFINE_EPOCHS = 1
PES_SEMI_LAMBDA_U = 150.0
MNIST5K_TRAIN_EXAMPLES = 3600  # mnist5k's training split, its 400 validation rows held out (noisy_jax.data)
BATCH_SIZE = 128  # base.py's, every row's


def coteaching_run(forget_rate: float, *, plus: bool = False) -> ml_collections.ConfigDict:
  run = _coteaching_plan()
  run.method = {
    "name": "coteaching",
    "forget_rate": forget_rate,
    "num_gradual": 10,
    "exponent": 1.0,
    "ramp": "paper",
    "plus": plus,
    "init_epoch": 0,
    "normalise_twice": False,
  }
  return run


def sop_plus_run(sop_run: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """SOP's run with SOP+'s two terms and its strong view (module docstring)."""
  run = ml_collections.ConfigDict(sop_run.to_dict())
  run.optimizer = base.optimizer(
    sop_paper.LEARNING_RATE, weight_decay=sop_paper.WEIGHT_DECAY, momentum=sop_paper.MOMENTUM
  )
  run.optimizer.lr_schedule = "cosine"  # over the run's 40 epochs (cosine_epochs: the stage's), as the original's 300
  run.optimizer.lr_min = sop_paper.LR_MIN
  run.method.update({"ratio_consistency": sop_paper.RATIO_CONSISTENCY, "ratio_balance": sop_paper.RATIO_BALANCE})
  run.augment = {"crop_padding": 0, "flip": False, "strong": {"policy": SOP_PLUS_POLICY, "cutout": SOP_PLUS_CUTOUT}}
  return run


def jocor_forget_rate(noise_type: str, rate: float) -> float:
  """The original's default forget rate: the noise rate, halved for asymmetric noise (hongxin001/JoCoR
  algorithm/jocor.py, JoCoR.__init__: `if args.noise_type == "asymmetric": forget_rate = args.noise_rate / 2`)."""
  return rate / 2 if noise_type == "asymmetric" else rate


def jocor_run(forget_rate: float) -> ml_collections.ConfigDict:
  run = _coteaching_plan()
  run.method = {"name": "jocor", "forget_rate": forget_rate, "co_lambda": JOCOR_LAMBDA, "num_gradual": 10}
  return run


def disc_run(symmetric: bool, rate: float) -> ml_collections.ConfigDict:
  """DISC with its CIFAR-10 settings for the noise (module docstring), its plan scaled to the run's 40 epochs."""
  run = ce.get_run()
  run.optimizer = base.optimizer(
    disc_paper.SGD_LR,
    weight_decay=disc_paper.SGD_WEIGHT_DECAY,
    lr_boundaries=tuple(m * run.num_epochs // disc_paper.NUM_EPOCHS for m in disc_paper.SGD_MILESTONES),
    momentum=0.0,
  )
  high = rate in disc_paper.HIGH_NOISE_RATES
  run.method = {
    "name": "disc",
    "start_epoch": disc_paper.START_EPOCH * run.num_epochs // disc_paper.NUM_EPOCHS,
    "momentum": disc_paper.HIGH_NOISE_MOMENTUM if (high or not symmetric) else disc_paper.MOMENTUM,
    "lamd_h": disc_paper.HIGH_NOISE_LAMD_H if high else 1.0,
    "mixup_alpha": disc_paper.MIXUP_ALPHA,
  }
  # the original's CIFAR-10 pool (m = 5) with its CutoutAbs of int(0.15 x 28) = 4 built in: no separate Cutout
  run.augment = {"crop_padding": 0, "flip": False, "strong": dict(disc_paper.STRONG_VIEW)}
  return run


def promix_run(symmetric: bool) -> ml_collections.ConfigDict:
  """ProMix with run.sh's CIFAR-10 settings for the noise (module docstring), its plan scaled to the run's 40
  epochs, and its own pool as the strong view (promix_paper.STRONG_VIEW, its Cutout built in)."""
  run = ce.get_run()
  run.optimizer = base.optimizer(
    promix_paper.LEARNING_RATE, weight_decay=promix_paper.WEIGHT_DECAY, momentum=promix_paper.MOMENTUM
  )
  run.optimizer.lr_schedule = "cosine"  # over the run's 40 epochs, as the original's over its 600
  run.optimizer.lr_min = promix_paper.LR_MIN
  scale = lambda epochs: epochs * run.num_epochs // promix_paper.ORIGINAL_NUM_EPOCHS
  tau, pretrain_ep, debias = promix_paper.FAMILY["cifar10"]
  rho = promix_paper.SYNTHETIC_ROWS[("cifar10", "symmetric" if symmetric else "asymmetric")][0.5 if symmetric else 0.4]
  run.method = {
    "name": "promix",
    "pretrain_ep": max(scale(pretrain_ep), 1),
    "warmup_ep": scale(promix_paper.WARMUP_EP),
    "start_expand": scale(promix_paper.START_EXPAND),
    "rho_start": rho,
    "rho_end": rho,
    "tau": tau,
    "debias_output": debias,
    "debias_pl": debias,
    "warmup_penalty": not symmetric,
  }
  run.model = {"name": "small_cnn", "kwargs": {"pseudo_head": True}, "pretrained": "none"}
  run.augment = {"crop_padding": 0, "flip": False, "strong": dict(promix_paper.STRONG_VIEW)}
  return run


def _stage_sgd(lr_boundaries) -> ml_collections.ConfigDict:
  """ce.py's SGD (lr 0.05, momentum 0.9, weight decay 5e-4) with `lr_boundaries`, every field set: a stage's section
  is merged over the run's optimizer (here the revision's Adam)."""
  sgd = ce.get_run().optimizer
  sgd.lr_boundaries = tuple(lr_boundaries)
  sgd.name = "sgd"
  sgd.lr_schedule = "piecewise"
  return sgd


def t_revision_run() -> ml_collections.ConfigDict:
  """T-Revision's three stages in the table's 40 epochs with ce.py's SGD for the first two (module docstring)."""
  warmup, reweight, revision = T_REVISION_EPOCHS
  run = ml_collections.ConfigDict()
  run.method = {
    "name": "t_revision",
    "percentile": t_revision_paper.PERCENTILE["cifar10"],  # 97: tools.fit's, the code's MNIST and CIFAR-10 runs
    "shared_filter": False,
    "transition_norm": "rows",
    "reweight_weight_gradient": "none",
    "revision_weight_gradient": "all",
    "accumulate_correction": False,
    "revision_weight_decay": t_revision_paper.WEIGHT_DECAY,
  }
  run.warmup = {"num_epochs": warmup, "optimizer": _stage_sgd(()).to_dict()}
  # ce.py's steps at half and three quarters of the stage (its 20 and 30 of 40)
  run.reweight = {"num_epochs": reweight, "optimizer": _stage_sgd((reweight // 2, 3 * reweight // 4)).to_dict()}
  run.num_epochs = revision
  run.optimizer = {
    "name": "coteaching_adam",
    "learning_rate": t_revision_paper.REVISION_LEARNING_RATE,
    "decay_start": t_revision_paper.NO_DECAY,
    "beta1": t_revision_paper.ADAM_BETA1,
    "beta1_after": t_revision_paper.ADAM_BETA1,
  }
  return run


def pes_run() -> ml_collections.ConfigDict:
  """PES's four stages in the table's 40 loop epochs with ce.py's SGD, Adam in the refines (module docstring). The
  refines renew the small CNN's last block (Conv_2, BatchNorm_2) + classifier, then the classifier (Dense_0, its
  only dense layer): PES_REFINE_MODULES, the analogue of PES_cs's ResNet stage 4 + linear, then linear."""
  run = ce.get_run()  # ce.py's SGD, x0.1 at loop epochs 20 and 30: stage1's schedule runs on the loop's clock
  run.method = {
    "name": "pes",
    "refine_modules": PES_REFINE_MODULES,
    "max_class_weight": ml_collections.config_dict.placeholder(float),  # None: PES_cs's weights are not clipped
    "code_freeze_renewed": False,
  }
  adam = {"name": "adam", "learning_rate": PES_REFINE_LEARNING_RATE, "weight_decay": 0.0, "lr_boundaries": ()}
  run.warmup = {"num_epochs": PES_WARMUP_EPOCHS}  # the run's SGD
  run.refine1 = {"num_epochs": PES_REFINE_EPOCHS[0], "optimizer": dict(adam)}
  run.refine2 = {"num_epochs": PES_REFINE_EPOCHS[1], "optimizer": dict(adam)}
  run.num_epochs -= PES_WARMUP_EPOCHS + pes_paper.REFINE_CLOCK_EPOCHS  # 34: the refines count one loop epoch
  return run


def pes_semi_run(num_examples: int = MNIST5K_TRAIN_EXAMPLES) -> ml_collections.ConfigDict:
  """PES-semi's three stages in the table's 40 loop epochs with ce.py's SGD, Adam in the refine of the classifier,
  one pass over the `num_examples` training rows per MixMatch epoch (module docstring)."""
  run = ce.get_run()  # ce.py's SGD, x0.1 at loop epochs 20 and 30 on the loop's clock
  run.method = {
    "name": "pes_semi",
    "lambda_u": PES_SEMI_LAMBDA_U,
    # int(N / B) steps, as the original's int(50,000 / 128) (PES_semi.py:81): one pass over the rows
    "steps_per_epoch": pes_core.semi_steps_per_epoch(int(run.get("batch_size", BATCH_SIZE)), num_examples),
  }
  adam = {"name": "adam", "learning_rate": PES_REFINE_LEARNING_RATE, "weight_decay": 0.0, "lr_boundaries": ()}
  run.warmup = {"num_epochs": PES_SEMI_WARMUP_EPOCHS}  # the run's SGD
  run.refine1 = {"num_epochs": PES_SEMI_REFINE_EPOCHS, "optimizer": adam}
  run.num_epochs -= PES_SEMI_WARMUP_EPOCHS  # 37: the refine counts no loop epoch (its MixMatch epoch shares T1)
  return run


def _coteaching_plan() -> ml_collections.ConfigDict:
  """Co-teaching's paper plan (Adam lr 1e-3, decayed from epoch 16 of 40), which JoCoR's original shares."""
  run = ml_collections.ConfigDict()
  run.num_epochs = COTEACHING_EPOCHS
  run.optimizer = {"name": "coteaching_adam", "learning_rate": 1e-3, "decay_start": COTEACHING_DECAY_START}
  return run


def dividemix_run(symmetric: bool) -> ml_collections.ConfigDict:
  run = ce.get_run()
  run.method = {
    "name": "dividemix",
    "warm_up": DIVIDEMIX_WARM_UP,
    "p_threshold": 0.5,
    "lambda_u": 25.0 if symmetric else 0.0,
    "warmup_penalty": not symmetric,
  }
  return run


def elr_plus_run(symmetric: bool) -> ml_collections.ConfigDict:
  run = ce.get_run()
  run.optimizer = base.optimizer(0.02, weight_decay=5e-4, lr_boundaries=(30,))
  run.method = {
    "name": "elr_plus",
    "beta": 0.7 if symmetric else 0.9,
    "lam": 3.0 if symmetric else 1.0,
    "mixup_alpha": 1.0,
    "coef_step": 0,
    "ema_alpha": 0.997,
    "ema_update": True,
    "ema_step": ELR_PLUS_EMA_STEP,
  }
  return run


LOSS_SETTINGS = {"losses_sym60": "sym60", "losses_asym40": "asym40"}


def loss_run(loss: str, **kwargs) -> ml_collections.ConfigDict:
  """ce.py's run (small CNN, 40 epochs, its SGD) with the loss `loss` and its hyper-parameters."""
  run = ce.get_run()
  run.method = {"name": "loss", "loss": loss, "loss_kwargs": kwargs}
  return run


def anl_run(loss: str, **kwargs) -> ml_collections.ConfigDict:
  """`loss_run` with ANL's optimizer change: no weight decay, the L1 term instead (ANL's CIFAR-10 delta)."""
  return l1_run(loss_run(loss, **kwargs), alfs_anl_paper.ANL_ROWS["cifar10"][loss][2])


def l1_run(run: ml_collections.ConfigDict, delta: float) -> ml_collections.ConfigDict:
  """`run` with no weight decay and the L1 term delta in its place (ANL's and JAL's optimizer change)."""
  run.optimizer.weight_decay = 0.0
  run.optimizer.l1 = delta
  return run


# epsilon-softmax's CIFAR-10 values by noise type (cswjl/eps-softmax config.py get_eps_softmax): alpha, beta, m.
EPS_SOFTMAX_CIFAR10 = {"symmetric": (0.01, 5.0, 1e5), "asymmetric": (0.02, 5.0, 1e3)}
EFL_GAMMA = 0.1  # EFLandMAE's default (losses.py), never set by config.py
# JAL's CIFAR-10 values (cswjl/joint-asymmetric-loss config.py CIFAR10_CONFIG) and its L1 delta for AMSE losses.
JAL_CIFAR10 = {"alpha": 1.0, "beta": 1.0, "a": 30.0}
JAL_FL_GAMMA = 0.5
JAL_L1 = 5e-5


def recent_loss_runs(noise_type: str) -> dict:
  """The 2024-2025 losses' rows (module docstring): epsilon-softmax by the table's noise type, JAL."""
  alpha, beta, m = EPS_SOFTMAX_CIFAR10[noise_type]
  return {
    "ece_mae": loss_run("ece_mae", alpha=alpha, beta=beta, m=m),
    "efl_mae": loss_run("efl_mae", alpha=alpha, beta=beta, m=m, gamma=EFL_GAMMA),
    "jal_ce": l1_run(loss_run("jal_ce", **JAL_CIFAR10), JAL_L1),
    "jal_fl": l1_run(loss_run("jal_fl", **JAL_CIFAR10, gamma=JAL_FL_GAMMA), JAL_L1),
  }


def loss_runs(noise_type: str = "symmetric") -> ml_collections.ConfigDict:
  """The robust-loss family's rows (module docstring) for a table of `noise_type`."""
  alfs = {row: loss_run(loss, **kwargs) for row, (loss, kwargs) in alfs_anl_paper.ALFS_ROWS["cifar10"].items()}
  anl = {row: alfs_anl_paper.ANL_ROWS["cifar10"][row][1] for row in ("anl_ce", "anl_fl")}
  return ml_collections.ConfigDict(
    {
      "ce": ce.get_run(),
      "gce": gce.get_run(),
      **alfs,
      "anl_ce": anl_run("anl_ce", **anl["anl_ce"]),
      "anl_fl": anl_run("anl_fl", **{k: v for k, v in anl["anl_fl"].items() if k != "detach_modulator"}),
      "bi_tempered": loss_run("bi_tempered_logistic_loss", t1=0.8, t2=1.2),
      "poly1": loss_run("poly1_cross_entropy", epsilon=2.0),
      "taylor": loss_run("taylor_cross_entropy", order=2),
      "logit_clip": loss_run("logit_clip", temperature=1.5),
      **recent_loss_runs(noise_type),
    }
  )


def get_config(setting: str = "sym60"):
  if setting not in SETTINGS and setting not in LOSS_SETTINGS:
    raise ValueError(
      f"baselines setting {setting!r}; allowed: {', '.join((*SETTINGS, *LOSS_SETTINGS))} "
      "(--config=experiments/configs/baselines.py:SETTING)."
    )
  if setting in LOSS_SETTINGS:
    config = get_config(LOSS_SETTINGS[setting])
    config.title = f"{config.title.split(':')[0]}: the robust-loss family"
    config.runs = loss_runs(SETTINGS[LOSS_SETTINGS[setting]][0])
    return config
  noise_type, rate, noise_dataset = SETTINGS[setting]
  symmetric = noise_type == "symmetric"
  config = base.comparison(f"mnist5k, {rate:.0%} {noise_type} noise: every method")
  config.shared.noise.type = noise_type
  config.shared.noise.rate = rate
  config.shared.noise.dataset = noise_dataset
  config.shared.seeds = (0, 1, 2)
  config.shared.checkpoint_every = 0
  elr_run, sop_run = ce.get_run(), ce.get_run()
  elr_run.method = {"name": "elr", "beta": 0.7 if symmetric else 0.9, "lam": 3.0 if symmetric else 1.0}
  sop_run.method = {
    "name": "sop",
    "lr_u": 1.0 if symmetric else 0.1,
    "lr_v": 10.0 if symmetric else 100.0,
    "init_std": 1e-8,
  }
  config.runs = ml_collections.ConfigDict(
    {
      "ce": ce.get_run(),
      "gce": gce.get_run(),
      "truncated_lq": truncated_lq.get_run(),
      "encouraging": encouraging.get_run(),
      "joint_optimization": joint_optimization.get_run(),
      "forward_correction": loss_correction.get_run(),
      "elr": elr_run,
      "sop": sop_run,
      "sop_plus": sop_plus_run(sop_run),
      "coteaching": coteaching_run(rate),
      "coteaching_plus": coteaching_run(rate, plus=True),
      "jocor": jocor_run(jocor_forget_rate(noise_type, rate)),
      "elr_plus": elr_plus_run(symmetric),
      "dividemix": dividemix_run(symmetric),
      "disc": disc_run(symmetric, rate),
      "promix": promix_run(symmetric),
      "t_revision": t_revision_run(),
      "pes": pes_run(),
      "pes_semi": pes_semi_run(),
      "gls": replication.gls_run(),
      "peer_loss": replication.peer_loss_run(),
      "volminnet": replication.volminnet_run(),
      "f_divergence": replication.f_divergence_run(),
      "cores": replication.cores_run(),
      "cal": replication.cal_run(),
    }
  )
  return config
