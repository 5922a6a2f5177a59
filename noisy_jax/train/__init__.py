"""The trainer: a TrainState and a LabelTable, a per-device step mapped over a device mesh, and the epoch loop.

  state        TrainState (parameters, BatchNorm statistics, weight average) and its creation
  step         train_step: one SGD step of a method on this device's shard of the batch
  update       update: the optimiser update of every step program (gradient, device mean, schedule, apply)
  epoch        make_epoch_fn: the epoch program (order, batches, augmentation, the scan over train_step)
  predict      make_predict_fn, make_evaluate: softmax and accuracy of a split
  loop         fit: the epochs of one stage, evaluation, the method's table policy, checkpoints and resume
  method       Method: what the trainer needs of a method (it knows no method by name)
  optim, coteaching_adam   the optimisers; members, pair_epochs: two networks; checkpoint; table_metrics

Imports noisy_jax.core, parallel, data and models only.

The flow of one run (`noisy_jax.experiment.runs.run_single`, which drives `loop.fit` once per stage):

  root key --split--> first stage's key (init | data order) | noise | second stage's key
  dataset (clean) --noise.corrupt_labels--> noisy training labels --> LabelTable
  for epoch in 1..E:   (TrainState, LabelTable) --epoch program--> (TrainState, LabelTable)
                       evaluate; the method's label-table policy at the epoch boundary (pure, jitted)
  then the method's next stage, if any (methods.spec.Stage: Joint Optimization's stage 2, a fresh network trained
  with CE on the stage-1 soft labels; loss correction's estimation run comes before its own).

The epoch program is one compiled call: the permutation, batching, data gather, `lax.scan` over the train steps
and the label-table writes all run on device. It is written per device (named axis `batch`; gradients and batch
statistics are `lax.pmean`-ed; the batch's indices and probabilities are `lax.all_gather`-ed so every replica
writes the same rows into its copy of the table) and mapped over the mesh with `jax.shard_map` under `jax.jit`
with the state and table donated. `check_vma=False` keeps pmap semantics: the explicit `pmean` of the gradients
is what averages them (see shared/DESIGN.md). One device is a mesh of one.

A large label table is split by rows over the mesh instead (config `label_table_sharding`, 'auto' by default: sharded
iff more than one device and N x (C (1 + H) x 4 + 8) bytes > `label_table_budget_mib`, 256; per device the sharded
table costs ceil(N / D) x (C (1 + H) x 4 + 8) bytes: Clothing1M with JO's history 624 MB in all, 78 MB a device
over 8; 2.4M x 1000 classes over 256 devices 37.6 MB a device, 412.6 MB with H = 10). Each device then reads its
batch's rows by index (all-gathered indices, owned rows, reduce-scatter) and keeps the gathered writes of its rows:
noisy_jax.parallel.table_sharding and core.label_table.sharded_targets / sharded_record.
"""
