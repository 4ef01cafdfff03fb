"""DELTA (Zhao et al., 2023): test-time batch renormalisation (TBR) and dynamic online
re-weighting (DOT) on top of TENT's entropy loss (Appendix A: "TENT+DELTA", factors 0.95)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import bn_layers
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter


class TBRNorm(nn.Module):
    """Batch renormalisation at test time: normalise with the batch statistics, then correct
    towards moving statistics (initialised from the first test batch, EMA with ``momentum`` of
    the old value) with detached r = sigma_B / sigma and d = (mu_B - mu) / sigma."""

    def __init__(self, bn: nn.BatchNorm2d, *, momentum: float = 0.95) -> None:
        super().__init__()
        self.weight, self.bias, self.eps, self.momentum = bn.weight, bn.bias, bn.eps, momentum
        device = bn.weight.device
        self.register_buffer("mean", torch.zeros(bn.num_features, device=device))
        self.register_buffer("std", torch.ones(bn.num_features, device=device))
        self.register_buffer("initialised", torch.tensor(False, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu = x.mean(dim=(0, 2, 3))
        sigma = torch.sqrt(x.var(dim=(0, 2, 3), unbiased=False) + self.eps)
        if not bool(self.initialised):
            self.mean.copy_(mu.detach())
            self.std.copy_(sigma.detach())
            self.initialised.fill_(True)
        r = (sigma / self.std).detach()
        d = ((mu - self.mean) / self.std).detach()
        x_hat = (x - mu[None, :, None, None]) / sigma[None, :, None, None] * r[None, :, None, None] + d[None, :, None, None]
        with torch.no_grad():
            self.mean.mul_(self.momentum).add_((1 - self.momentum) * mu.detach())
            self.std.mul_(self.momentum).add_((1 - self.momentum) * sigma.detach())
        return x_hat * self.weight[None, :, None, None] + self.bias[None, :, None, None]


def _swap_bn(module: nn.Module, momentum: float) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(module, name, TBRNorm(child, momentum=momentum))
        else:
            _swap_bn(child, momentum)


class Delta(_GradientAdapter):
    """TENT+DELTA: entropy weighted by DOT's inverse class-frequency weights, through TBR layers."""

    name = "delta"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, momentum: float = 0.95, dot_momentum: float = 0.95) -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        if any(isinstance(m, nn.BatchNorm1d) for m in bn_layers(self.model)):
            raise ValueError("DELTA's TBR is defined for BatchNorm2d layers only")
        _swap_bn(self.model, momentum)
        self.momentum, self.dot_momentum = momentum, dot_momentum
        self.q_hat: torch.Tensor | None = None

    def reset(self) -> None:
        # TBR layers stay in place: restore the source affine weights, restart the TBR statistics
        # from the next batch, and reset DOT's frequencies and the optimiser.
        for m in self.model.modules():
            if isinstance(m, TBRNorm):
                m.initialised.fill_(False)
        source = {k: v for k, v in self.initial_state.items() if "running" not in k and "num_batches" not in k}
        self.model.load_state_dict(source, strict=False)
        self.optimizer = self._new_optimizer()
        self.q_hat = None
        if self.refiner is not None:
            self.refiner.reset()

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        out = refine.predictions(self.model(x))
        used = out.for_loss()
        probs = F.softmax(out.refined.detach(), 1)
        k = probs.shape[1]
        if self.q_hat is None:
            self.q_hat = torch.full((k,), 1.0 / k, device=probs.device)
        class_w = 1.0 / self.q_hat
        class_w = class_w / class_w.sum()
        sample_w = class_w[probs.argmax(1)]
        sample_w = sample_w / sample_w.sum() * len(sample_w)
        ent = -(F.softmax(used, 1) * F.log_softmax(used, 1)).sum(1)
        self.step((sample_w * ent).mean())
        self.q_hat = self.dot_momentum * self.q_hat + (1 - self.dot_momentum) * probs.mean(0)
        return out.refined.detach()
