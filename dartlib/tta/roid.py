"""ROID (Marsden et al., 2024), for the paper's mixed-domain table: BN affine parameters trained
with test-batch statistics on a weighted soft-likelihood-ratio loss plus a consistency term
against an augmented view, weight ensembling towards the source after every step, and a prior
correction of the outputs. Constants from the official code (reference notes, section 4.10):
probabilities clipped at 0.99 in the loss, temperature 1/3 of the certainty-diversity weights,
class-probability EMA momentum 0.9 from 1/K, symmetric CE with alpha 0.5 (no target detached),
ensembling 0.99 / 0.01, Adam 1e-3. As in the official ``roid.py``, the consistency term covers the
kept samples only (diversity weight at or above its mean), is weighted by their sample weights,
and compares their predictions with those of one augmented view of the kept images drawn by the
official transform (:func:`dartlib.data.augmentation.cotta_view`). With DART, the refined logits (norm-preserving inside the loss) replace
the model's wherever ROID uses its predictions, and the prior correction acts on them.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.data.augmentation import cotta_view
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter


def soft_likelihood_ratio(logits: torch.Tensor, *, clip: float = 0.99, eps: float = 1e-5) -> torch.Tensor:
    """Per-sample -sum_k p_k log(p_k / (1 - p_k)), with p clipped at ``clip``."""
    p = F.softmax(logits, 1).clamp(max=clip)
    return -(p * torch.log(p / (1.0 - p) + eps)).sum(1)


def symmetric_cross_entropy(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 0.5) -> torch.Tensor:
    """Per-sample (1 - alpha) CE(softmax b, a) + alpha CE(softmax a, b), gradients through both
    sides (the official ``SymmetricCrossEntropy(x=a, x_ema=b)``)."""
    ce_ab = -(F.softmax(b, 1) * F.log_softmax(a, 1)).sum(1)
    ce_ba = -(F.softmax(a, 1) * F.log_softmax(b, 1)).sum(1)
    return (1 - alpha) * ce_ab + alpha * ce_ba


def prior_correction(logits: torch.Tensor) -> torch.Tensor:
    """ROID's output correction by the batch's mean prediction (applied to the logits, as the
    official code does)."""
    prior = F.softmax(logits, 1).mean(0)
    b, k = logits.shape
    smooth = max(1.0 / b, 1.0 / k) / float(prior.max())
    return logits * (prior + smooth) / (1.0 + smooth * k)


def _minmax(v: torch.Tensor) -> torch.Tensor:
    return (v - v.min()) / (v.max() - v.min()).clamp_min(1e-12)


class Roid(_GradientAdapter):
    name = "roid"
    revision = 2  # 2: weighted consistency on the kept samples, official view, EMA from 1/K, SCE undetached

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, temperature: float = 1 / 3, ema: float = 0.9, ensemble: float = 0.99,
                 consistency: bool = True, prior: bool = True, seed: int = 0) -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        self.temperature, self.ema, self.ensemble = temperature, ema, ensemble
        self.consistency, self.prior = consistency, prior
        self.class_probs: torch.Tensor | None = None
        self.generator = torch.Generator().manual_seed(seed)
        self.source_params = [p.detach().clone() for p in self.params]

    def reset(self) -> None:
        super().reset()
        self.class_probs = None

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        out = refine.predictions(self.model(x))
        used = out.for_loss()
        with torch.no_grad():
            p = F.softmax(out.refined, 1)
            if self.class_probs is None:
                self.class_probs = torch.full((p.shape[1],), 1.0 / p.shape[1], device=p.device)
            w_div = _minmax(1.0 - F.cosine_similarity(self.class_probs[None], p, dim=1))
            w_cert = _minmax((p * torch.log(p.clamp_min(1e-30))).sum(1))  # -entropy
            weights = torch.exp(w_div * w_cert / self.temperature)
            mask = w_div >= w_div.mean()
            self.class_probs = self.ema * self.class_probs + (1 - self.ema) * p.mean(0)
        loss = (weights * mask * soft_likelihood_ratio(used)).sum() / len(x)
        if self.consistency and mask.any():
            kept = x[mask]
            aug = refine.predictions(self.model(cotta_view(kept.cpu(), generator=self.generator).to(x.device)))
            loss = loss + (weights[mask] * symmetric_cross_entropy(aug.for_loss(), used[mask])).sum() / len(x)
        self.step(loss)
        with torch.no_grad():
            for p_now, p_src in zip(self.params, self.source_params):
                p_now.mul_(self.ensemble).add_((1 - self.ensemble) * p_src)
        refined = out.refined.detach()
        return prior_correction(refined) if self.prior else refined
