"""TENT+ODS (Zhou et al., 2023, as Appendix A describes it): a distribution tracker estimates
per-sample label vectors z by LAME's Laplacian-regularised likelihood (unary term: the frozen
BN-adapted source classifier's predictions; affinity: k-NN over the adapted classifier's
features) and the batch label distribution w = mean z; a prediction optimiser combines z with the
adapted classifier's prediction; TENT's entropy is weighted towards infrequent classes.

ODS has no public code; the combination (normalised geometric mean) and the class weights
(1 - w, normalised) follow a secondary summary of its paper and are options here. With DART, both
the tracker's unary predictions and the adapted classifier's predictions are refined, which is
where Appendix A says the refinement helps ("to estimate label distribution shifts").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import frozen_bn_adapted
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter
from dartlib.tta.lame import knn_affinity, laplacian_solution

COMBINATIONS = ("geometric", "arithmetic")


class Ods(_GradientAdapter):
    name = "ods"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, k: int = 5, lam: float = 1.0, combination: str = "geometric") -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        if combination not in COMBINATIONS:
            raise ValueError(f"unknown combination {combination!r}; valid: {', '.join(COMBINATIONS)}")
        self.k, self.lam, self.combination = k, lam, combination
        self.tracker_source = self.source if self.source is not None else frozen_bn_adapted(model)
        self.label_distribution: torch.Tensor | None = None

    def share_source(self, source_logits: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """ODS's label-distribution tracker reads the BN-adapted source model with or without a refiner."""
        super().share_source(source_logits)
        self.tracker_source = source_logits

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        features = self.model.features(x)
        out = refine.predictions(self.model.head(features))
        with torch.no_grad():
            unary = F.softmax(refine(self.tracker_source(x)), 1)
            z = laplacian_solution(unary, knn_affinity(F.normalize(features.detach(), dim=1), self.k), lam=self.lam)
            w = z.mean(0)
            self.label_distribution = w
            p = F.softmax(out.refined.detach(), 1)
            if self.combination == "geometric":
                combined = torch.sqrt(z * p)
                combined = combined / combined.sum(1, keepdim=True)
            else:
                combined = 0.5 * (z + p)
            class_w = (1.0 - w) / (1.0 - w).sum() * w.numel()
            sample_w = class_w[combined.argmax(1)]
            sample_w = sample_w / sample_w.mean()
        used = out.for_loss()
        ent = -(F.softmax(used, 1) * F.log_softmax(used, 1)).sum(1)
        self.step((sample_w * ent).mean())
        return torch.log(combined.clamp_min(1e-30))
