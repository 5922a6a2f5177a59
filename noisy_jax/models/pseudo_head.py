"""A network with a second, auxiliary classifier on the same features: ProMix's pseudo head (`WithPseudoHead`).

ProMix (Xiao et al., IJCAI 2023; Justherozen/ProMix, model.py: ResNet.pseudo_linear) gives each network a second
linear classifier h_AP beside its primary one h, both on the pooled features phi(x): h(phi(x)) and h_AP(phi(x)), [B, C]
each. Two linear maps of the same features are one linear map with 2C outputs, split in two; so the wrapped network is
any model of noisy_jax.models built with 2C outputs, and

  WithPseudoHead(x)                    = out[..., :C]             the primary head (evaluation, export, metrics)
  WithPseudoHead(x, pseudo_head=True)  = (out[..., :C], out[..., C:])

with out = base(x) [B, 2C]. Each of the 2C output columns is initialised as the base model initialises its classifier,
so the two heads start as two independent classifiers of the same family (the original's pseudo_linear has its own
PyTorch default initialisation, as its primary `linear`).

Built by models.build when `config.model.kwargs.pseudo_head` is True (the field travels with the model's kwargs into
exports, so a loaded network is the same wrapper).
"""

from __future__ import annotations

import flax.linen as nn


class WithPseudoHead(nn.Module):
  """`base` (built with 2 num_classes outputs) read as a primary and a pseudo head of num_classes each.

  Attributes:
    base: the network, any model of noisy_jax.models with 2C outputs.
    num_classes: C.
  """

  base: nn.Module
  num_classes: int

  @property
  def xla_cpu_compiler_options(self):
    """The base model's XLA options for the CPU (noisy_jax.parallel.xla_options), if it declares any."""
    return getattr(self.base, "xla_cpu_compiler_options", None)

  def __call__(self, x, *, train: bool, pseudo_head: bool = False):
    out = self.base(x, train=train)
    primary, pseudo = out[..., : self.num_classes], out[..., self.num_classes :]
    return (primary, pseudo) if pseudo_head else primary
