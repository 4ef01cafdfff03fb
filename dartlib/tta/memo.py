"""MEMO (Zhang et al., 2022) in the two variants of the Conjugate-PL code that the paper's MEMO
table uses: "stored BN" (source statistics, the model reset for every test batch) and "adapted
BN" (test-batch statistics, continual adaptation like TENT). Each step minimises the marginal
entropy of the prediction averaged over ``n_augmentations`` random views of every test sample,
then predicts the un-augmented batch with the updated model.

Views are AugMix views as MEMO's own CIFAR code draws them (random crop and flip, then three
chains of severity-1 AugMix operations mixed by Dirichlet(1, 1, 1) and Beta(1, 1) weights;
:func:`dartlib.data.augmentation.augmix_views`). With DART, every view's logits are refined with the batch's W_B, b_B (the
norm-preserving form inside the loss) and so is the reported prediction.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.data.augmentation import augmix_views
from dartlib.models.backbones import use_source_statistics
from dartlib.tta.base import Refinement
from dartlib.tta.basic import _GradientAdapter

BN_MODES = ("batch", "source")


def marginal_entropy(view_logits: torch.Tensor) -> torch.Tensor:
    """Batch-mean entropy of the view-averaged probabilities; ``view_logits`` is (V, B, K)."""
    log_p = F.log_softmax(view_logits, -1)
    log_mean = torch.logsumexp(log_p, 0) - math.log(view_logits.shape[0])
    return -(log_mean.exp() * log_mean).sum(1).mean()


class Memo(_GradientAdapter):
    name = "memo"
    revision = 2  # 2: AugMix views

    @classmethod
    def profile_options(cls, settings) -> dict:
        """The number of AugMix views the settings give (``methods.memo_augmentations``)."""
        return {"n_augmentations": settings.methods.memo_augmentations}

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, bn: str = "batch",
                 n_augmentations: int = 32, optimizer: str = "adam", lr: float | None = None,
                 episodic: bool | None = None, seed: int = 0) -> None:
        if bn not in BN_MODES:
            raise ValueError(f"unknown bn mode {bn!r}; valid: {', '.join(BN_MODES)}")
        if n_augmentations < 1:
            raise ValueError(f"n_augmentations must be positive, got {n_augmentations}")
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        if bn == "source":
            use_source_statistics(self.model)
        self.bn, self.n_augmentations = bn, n_augmentations
        self.episodic = (bn == "source") if episodic is None else episodic
        self.generator = torch.Generator().manual_seed(seed)

    def _views(self, x: torch.Tensor) -> torch.Tensor:
        return augmix_views(x.cpu(), n_views=self.n_augmentations, generator=self.generator).to(x.device)

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        if self.episodic:  # back to the source weights and a fresh optimiser; the refiner keeps its state
            self.model.load_state_dict(self.initial_state)
            self.optimizer = self._new_optimizer()
        views = self._views(x)
        logits = torch.stack([self.model(v) for v in views])
        if refine.active:
            logits = torch.stack([refine.predictions(l).for_loss() for l in logits])
        self.step(marginal_entropy(logits))
        with torch.no_grad():
            return refine(self.model(x))
