"""The interface every test-time method implements (Appendix A, "Details about baseline methods").

An adapter takes the test stream batch by batch, adapts as its method prescribes, and returns
that batch's predictions (logits). With a DART refiner, W_B and b_B come from the frozen
BN-adapted *source* model f_theta0_bar on the batch (Section 3, "Utilizing g_phi at test-time"),
and the refined logits f_theta(x) W_B + b_B are used wherever the method uses predictions of the
test data; the reported predictions are the refined ones.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable

import torch
from torch import nn

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import frozen_bn_adapted


class Adapter(abc.ABC):
    """Base class: holds the model being adapted, the frozen source copy and the refiner."""

    name = "base"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None) -> None:
        self.initial_state = copy.deepcopy(model.state_dict())
        self.model = model
        self.refiner = refiner
        self.source = frozen_bn_adapted(model) if refiner is not None else None

    def share_source(self, source_logits: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Read f_theta0_bar's logits from ``source_logits`` instead of this adapter's own frozen
        copy: one memoised copy can then serve every adapter of the same source classifier (a
        grid's cells). It must compute what the own copy computes; nothing changes without a
        refiner (and methods that also read the source model for other purposes override this)."""
        if self.source is not None:
            self.source = source_logits

    def reset(self) -> None:
        """Back to the source model (and a fresh optimiser where the method has one)."""
        self.model.load_state_dict(self.initial_state)
        if self.refiner is not None:
            self.refiner.reset()

    def affine(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(W_B, b_B) for this batch from f_theta0_bar, or None (no refiner / DART-split says no)."""
        if self.refiner is None:
            return None
        with torch.no_grad():
            wb = self.refiner.transform(self.source(x))
        if wb is not None and self.refiner.current_scale() == 1.0 and _is_identity(*wb):
            # An exact identity is no refinement; skipping it keeps the method bit for bit (the
            # norm-preserving rescaling would otherwise add rounding-level gradient terms).
            return None
        return wb

    def refined(self, logits: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        if wb is None:
            return logits
        return (logits * self.refiner.current_scale()) @ wb[0] + wb[1]

    @abc.abstractmethod
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Adapt on batch ``x`` as the method prescribes and return its predictions (logits)."""


def _is_identity(w: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(w, torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)) and not b.any())
