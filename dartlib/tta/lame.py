"""LAME (Boudiaf et al., 2022): Laplacian-regularised maximum-likelihood estimation of the batch's
predictions; no parameter update (Appendix A: k-NN affinity with k = 5)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import use_batch_statistics, use_source_statistics
from dartlib.tta.base import Adapter, Refinement

BN_MODES = ("batch", "source")


def knn_affinity(features: torch.Tensor, k: int) -> torch.Tensor:
    """W_ij = 1 when j is among the k nearest neighbours of i (Euclidean, self excluded); not
    symmetrised, as in the official code."""
    dist = torch.cdist(features, features)
    dist.fill_diagonal_(float("inf"))
    k = min(k, features.shape[0] - 1)
    idx = dist.topk(k, largest=False).indices
    return torch.zeros_like(dist).scatter_(1, idx, 1.0)


def laplacian_solution(probs: torch.Tensor, affinity: torch.Tensor, *, lam: float = 1.0, max_steps: int = 100,
                       tol: float = 1e-8) -> torch.Tensor:
    """Fixed point of Y = softmax(log p + lam W Y), starting at Y = p, stopped when the energy
    sum(-log p * Y - lam (W Y) * Y + Y log Y) changes by at most ``tol`` relatively."""
    unary = -torch.log(probs + 1e-10)
    y = probs
    energy_old = None
    for _ in range(max_steps):
        y = F.softmax(-unary + lam * affinity @ y, dim=1)
        energy = float((unary * y - lam * (affinity @ y) * y + y * torch.log(y.clamp_min(1e-30))).sum())
        if energy_old is not None and abs(energy - energy_old) <= tol * abs(energy_old):
            break
        energy_old = energy
    return y


class Lame(Adapter):
    """LAME; with DART the unary term uses the refined predictions."""

    name = "lame"
    needs_batchnorm = False  # without BN layers, LAME on the source model's features

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, k: int = 5, lam: float = 1.0,
                 bn: str = "batch") -> None:
        super().__init__(model, refiner=refiner)
        if bn not in BN_MODES:
            raise ValueError(f"unknown bn mode {bn!r}; valid: {', '.join(BN_MODES)}")
        # The official code keeps source statistics; the paper's LAME equals BNAdapt at rho = 1
        # (85.2 in Table 1), so its default here is the test batch's statistics.
        (use_batch_statistics if bn == "batch" else use_source_statistics)(self.model)
        self.k, self.lam = k, lam

    @torch.no_grad()
    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        features = self.model.features(x)
        logits = refine(self.model.head(features))
        y = laplacian_solution(F.softmax(logits, 1), knn_affinity(F.normalize(features, dim=1), self.k), lam=self.lam)
        return torch.log(y.clamp_min(1e-30))
