"""SAR (Niu et al., 2023): sharpness-aware entropy minimisation on reliable samples (Appendix A).

Samples whose entropy is below E0 = 0.4 ln K take part; the update is a SAM step (rho = 0.05):
the gradient at the weights perturbed towards higher loss drives the base optimiser. As in the
official code (``sar.py``), the second forward pass keeps, among the first pass's reliable
samples, those still below E0 at the perturbed weights. With ``reset=True`` the model and its
optimiser return to the source state when the moving average (momentum 0.9, started from the
first value) of the second-pass loss falls below 0.2: the paper enables it "only for the
experiments of online imbalance" (Appendix A, "SAR"), which is where our grids enable it
(:mod:`dartlib.studies.online_imbalance`). DART's refiner keeps its state across such a reset.
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
    revision = 2  # 2: the second pass filters the first pass's reliable samples

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
        self.resets = 0

    def reset(self) -> None:
        super().reset()
        self.ema = None

    def recover(self) -> None:
        """SAR's model recovery: source weights, a fresh optimiser and no moving average."""
        self.model.load_state_dict(self.initial_state)
        self.optimizer = self._new_optimizer()
        self.ema = None
        self.resets += 1

    def _entropy(self, x: torch.Tensor, refine: Refinement) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample entropy of the (norm-preserving refined) predictions, and the refined logits."""
        out = refine.predictions(self.model(x))
        used = out.for_loss()
        return -(F.softmax(used, 1) * F.log_softmax(used, 1)).sum(1), out.refined

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        ent, refined = self._entropy(x, refine)
        margin = self.margin_factor * math.log(refined.shape[1])
        first = ent < margin
        if not first.any():
            return refined.detach()
        self.optimizer.zero_grad(set_to_none=True)
        ent[first].mean().backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = torch.norm(torch.stack([g.norm() for g in grads])) if grads else torch.tensor(0.0)
        steps = []
        with torch.no_grad():
            for p in self.params:
                e = torch.zeros_like(p) if p.grad is None else self.rho * p.grad / (norm + 1e-12)
                p.add_(e)
                steps.append(e)
        self.optimizer.zero_grad(set_to_none=True)
        ent2, _ = self._entropy(x, refine)
        ent2 = ent2[first]
        second = ent2[ent2 < margin]
        if len(second):
            second.mean().backward()
        with torch.no_grad():
            for p, e in zip(self.params, steps):
                p.sub_(e)
        if len(second):
            self.optimizer.step()
            value = float(second.detach().mean())
            self.ema = value if self.ema is None else self.ema_momentum * self.ema + (1 - self.ema_momentum) * value
            if self.reset_rule and self.ema < self.reset_constant:
                self.recover()
        return refined.detach()
