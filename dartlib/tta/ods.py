"""TENT+ODS (Zhou et al., 2023, "ODS: Test-Time Adaptation in the Presence of Open-World Data
Shift"), rebuilt from the description of Appendix A ("ODS") and the ODS paper's method. ODS has
no public code in a repository; its paper was not available here, so the pieces below follow
Appendix A's text where it speaks and state what is assumed where it does not.

* Distribution tracker, per-sample label vectors z (ODS's LAME-style Laplacian-regularised
  likelihood; Appendix A: "estimates the label distribution w and modified label distribution z
  by LAME, leveraging features of adapted classifier f_theta and predictions from a pre-trained
  classifier f_theta0"): z_i proportional to f_theta0(y | x_i) exp(lam sum_j a_ij z_j), the fixed
  point of :func:`dartlib.tta.lame.laplacian_solution`, with the unary term from the
  *pre-trained* model f_theta0 (its stored BN statistics, not BN-adapted) and a k-NN affinity
  a_ij over the L2-normalised features of the adapted model f_theta.
* Tracked label distribution w_t ("tracking the test label distribution over time"): an
  exponential moving average w_t = m w_{t-1} + (1 - m) mean_i z_i from w_0 = 1/K. Assumed: the
  momentum m (``momentum``, 0.9) and the EMA form.
* Class weights ("assigns high/low weights on infrequent/frequent classes"): s_k proportional to
  1 / w_t,k, normalised to mean 1 over the classes (``class_weighting="inverse"``); each sample
  takes the weight of its predicted class and the sample weights are normalised to mean 1.
  Assumed: the inverse-frequency form (DELTA's DOT uses the same); ``"complement"`` is the
  earlier reconstruction's Normalize(1 - w), whose weights hardly differ across few classes.
* Prediction optimiser ("taking an average of the modified label distribution z and the
  prediction of the adapted classifier f_theta"): y_i = (z_i + softmax f_theta(x_i)) / 2, the
  reported prediction (``combination="arithmetic"``; ``"geometric"``, the normalised
  sqrt(z p), is the earlier reconstruction from a secondary summary).
* Adaptation: TENT's entropy of f_theta, weighted per sample by the class weights above.

With DART, the refined predictions replace f_theta's wherever ODS uses them (the average, the
predicted class of the weights, the entropy in its norm-preserving form) and the tracker's unary
term is refined with the same W_B, b_B, which is where Appendix A says the refinement helps
("to estimate label distribution shifts").
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import use_source_statistics
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter
from dartlib.tta.lame import knn_affinity, laplacian_solution

COMBINATIONS = ("arithmetic", "geometric")
CLASS_WEIGHTINGS = ("inverse", "complement")


class Ods(_GradientAdapter):
    name = "ods"
    revision = 2  # 2: pre-trained unary term, tracked w, inverse-frequency weights, averaged predictions

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, k: int = 5, lam: float = 1.0, momentum: float = 0.9,
                 combination: str = "arithmetic", class_weighting: str = "inverse") -> None:
        if combination not in COMBINATIONS:
            raise ValueError(f"unknown combination {combination!r}; valid: {', '.join(COMBINATIONS)}")
        if class_weighting not in CLASS_WEIGHTINGS:
            raise ValueError(f"unknown class_weighting {class_weighting!r}; valid: {', '.join(CLASS_WEIGHTINGS)}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
        pretrained = use_source_statistics(copy.deepcopy(model))
        for p in pretrained.parameters():
            p.requires_grad_(False)
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        self.pretrained = pretrained
        self.k, self.lam, self.momentum = k, lam, momentum
        self.combination, self.class_weighting = combination, class_weighting
        self.label_distribution: torch.Tensor | None = None

    def reset(self) -> None:
        super().reset()
        self.label_distribution = None

    def class_weights(self) -> torch.Tensor:
        """Per-class loss weights from the tracked label distribution, mean 1 over the classes."""
        w = self.label_distribution
        raw = 1.0 / w.clamp_min(1e-8) if self.class_weighting == "inverse" else 1.0 - w
        return raw / raw.mean()

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        features = self.model.features(x)
        out = refine.predictions(self.model.head(features))
        with torch.no_grad():
            unary = F.softmax(refine(self.pretrained(x)), 1)
            z = laplacian_solution(unary, knn_affinity(F.normalize(features.detach(), dim=1), self.k), lam=self.lam)
            if self.label_distribution is None:
                self.label_distribution = torch.full((z.shape[1],), 1.0 / z.shape[1], device=z.device)
            self.label_distribution = self.momentum * self.label_distribution + (1 - self.momentum) * z.mean(0)
            p = F.softmax(out.refined.detach(), 1)
            if self.combination == "arithmetic":
                combined = 0.5 * (z + p)
            else:
                combined = torch.sqrt(z * p)
                combined = combined / combined.sum(1, keepdim=True)
            sample_w = self.class_weights()[combined.argmax(1)]
            sample_w = sample_w / sample_w.mean()
        used = out.for_loss()
        ent = -(F.softmax(used, 1) * F.log_softmax(used, 1)).sum(1)
        self.step((sample_w * ent).mean())
        return torch.log(combined.clamp_min(1e-30))
