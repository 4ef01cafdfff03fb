"""SAR (Niu et al., 2023): sharpness-aware entropy minimisation on reliable samples (Appendix A).

Samples whose entropy is below E0 = 0.4 ln K take part; the update is a SAM step (rho = 0.05):
the gradient at the weights perturbed towards higher loss drives the base optimiser. With
``reset=True`` (the paper's online-imbalance experiments) the model returns to the source
weights when the moving average of the second-step loss falls below 0.2.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import bn_layers
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter


class Sar(_GradientAdapter):
    name = "sar"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, margin_factor: float = 0.4, rho: float = 0.05, reset: bool = False,
                 reset_constant: float = 0.2, ema_momentum: float = 0.9, exclude: tuple[str, ...] = ("layer4",)) -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        # The official code leaves the last stage ("layer4", which tta_conjugate's ResNet-26 also
        # has) out of the update.
        excluded = {id(p) for name, m in self.model.named_modules() if name.split(".")[0] in exclude
                    and m in set(bn_layers(self.model)) for p in m.parameters()}
        for p in self.params:
            if id(p) in excluded:
                p.requires_grad_(False)
        self.params = [p for p in self.params if p.requires_grad]
        self.optimizer = self._new_optimizer()
        self.margin_factor, self.rho = margin_factor, rho
        self.reset_rule, self.reset_constant, self.ema_momentum = reset, reset_constant, ema_momentum
        self.ema: float | None = None

    def reset(self) -> None:
        super().reset()
        self.ema = None

    def _filtered_entropy(self, x: torch.Tensor, refine: Refinement) -> tuple[torch.Tensor | None, torch.Tensor]:
        out = refine.predictions(self.model(x))
        used = out.for_loss()
        ent = -(F.softmax(used, 1) * F.log_softmax(used, 1)).sum(1)
        keep = ent < self.margin_factor * math.log(used.shape[1])
        return (ent[keep].mean() if keep.any() else None), out.refined

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        loss, refined = self._filtered_entropy(x, refine)
        if loss is None:
            return refined.detach()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = torch.norm(torch.stack([g.norm() for g in grads])) if grads else torch.tensor(0.0)
        steps = []
        with torch.no_grad():
            for p in self.params:
                e = torch.zeros_like(p) if p.grad is None else self.rho * p.grad / (norm + 1e-12)
                p.add_(e)
                steps.append(e)
        self.optimizer.zero_grad(set_to_none=True)
        second, _ = self._filtered_entropy(x, refine)
        if second is not None:
            second.backward()
        with torch.no_grad():
            for p, e in zip(self.params, steps):
                p.sub_(e)
        if second is not None:
            self.optimizer.step()
            value = float(second.detach())
            self.ema = value if self.ema is None else self.ema_momentum * self.ema + (1 - self.ema_momentum) * value
            if self.reset_rule and self.ema < self.reset_constant:
                self.reset()
        return refined.detach()
