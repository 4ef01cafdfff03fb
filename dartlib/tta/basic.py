"""NoAdapt, BNAdapt, TENT and PL (Appendix A)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.dart.refiner import Refiner
from dartlib.models.backbones import set_trainable, use_batch_statistics, use_source_statistics
from dartlib.tta.base import Adapter, Refinement

ENTROPY_NORMALISATIONS = ("sum", "mean")


def entropy(logits: torch.Tensor, *, normalisation: str = "sum") -> torch.Tensor:
    """Batch-mean Shannon entropy of softmax(logits).

    "sum": sum over classes, mean over the batch (the official TENT, SAR); "mean": the mean over
    all B x K terms (NOTE's HLoss), i.e. divided by K, which acts like a smaller learning rate.
    """
    if normalisation not in ENTROPY_NORMALISATIONS:
        raise ValueError(f"unknown entropy normalisation {normalisation!r}; valid: {', '.join(ENTROPY_NORMALISATIONS)}")
    p_log_p = F.softmax(logits, 1) * F.log_softmax(logits, 1)
    per_sample = -p_log_p.sum(1)
    return per_sample.mean() if normalisation == "sum" else per_sample.mean() / logits.shape[1]


def make_optimizer(params: list[nn.Parameter], *, optimizer: str, lr: float | None) -> torch.optim.Optimizer:
    """Adam 1e-3 (CIFAR, PACS, OfficeHome) or SGD 5e-4 with momentum 0.9 (ImageNet), Appendix A."""
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=1e-3 if lr is None else lr, betas=(0.9, 0.999))
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=5e-4 if lr is None else lr, momentum=0.9)
    raise ValueError(f"unknown optimizer {optimizer!r}; valid: adam, sgd")


class NoAdapt(Adapter):
    """The source model with its stored BN statistics."""

    name = "noadapt"
    takes_refiner = False  # the paper pairs DART with adapted models only (Table 1)
    needs_batchnorm = False  # the model as it is

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None) -> None:
        super().__init__(model, refiner=refiner)
        use_source_statistics(self.model)

    @torch.no_grad()
    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        return refine(self.model(x))


class BNAdapt(Adapter):
    """Normalise with the test batch's statistics; no parameter changes."""

    name = "bnadapt"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None) -> None:
        super().__init__(model, refiner=refiner)
        use_batch_statistics(self.model)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """f_theta is f_theta0_bar here: one forward gives both the logits and the statistics that
        refine them, so no separate source forward is taken. Where the context shares f_theta0_bar
        (:meth:`share_source`) that forward is read from it: the same computation, so BNAdapt and
        every refiner of a grid pay for one forward per batch."""
        if self.input_check is not None:
            self.input_check(x)
        if self.source is None:
            return self.model(x)
        logits = self.source(x)
        if self.refiner is None:
            return logits
        # the additive variant (Table 5) refines the penultimate features of the same forward
        features = self.model.features(x) if self.refiner.reads_features else None
        return self.refiner(logits, logits, features=features)

    def share_source(self, source_logits: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """BNAdapt's own forward is f_theta0_bar's, with or without a refiner: read it from the
        shared copy too, so that BNAdapt and every BNAdapt+DART of a grid share one forward."""
        self.source = source_logits

    @torch.no_grad()
    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        return refine(self.model(x))


class _GradientAdapter(Adapter):
    """Shared set-up of methods that train BN affine parameters on test batches."""

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None) -> None:
        super().__init__(model, refiner=refiner)
        use_batch_statistics(self.model)
        self.params = set_trainable(self.model, "bn-affine")
        self.optimizer_name, self.lr = optimizer, lr
        self.optimizer = self._new_optimizer()

    def _new_optimizer(self) -> torch.optim.Optimizer:
        return make_optimizer(self.params, optimizer=self.optimizer_name, lr=self.lr)

    def reset(self) -> None:
        super().reset()
        self.optimizer = self._new_optimizer()

    def step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


class Tent(_GradientAdapter):
    """TENT: entropy minimisation on the BN affine parameters; with DART the entropy is taken of
    the refined logits rescaled to the norm of the unrefined ones (Appendix A)."""

    name = "tent"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, entropy_normalisation: str = "sum") -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        entropy(torch.zeros(1, 2), normalisation=entropy_normalisation)  # validates the option
        self.entropy_normalisation = entropy_normalisation

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        out = refine.predictions(self.model(x))
        self.step(entropy(out.for_loss(), normalisation=self.entropy_normalisation))
        return out.refined.detach()


class PseudoLabel(_GradientAdapter):
    """PL: cross-entropy on the test samples whose (refined) confidence is >= ``threshold``."""

    name = "pl"

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, optimizer: str = "adam",
                 lr: float | None = None, threshold: float = 0.95) -> None:
        super().__init__(model, refiner=refiner, optimizer=optimizer, lr=lr)
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"threshold must lie in [0, 1), got {threshold}")
        self.threshold = threshold

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        out = refine.predictions(self.model(x))
        conf, labels = F.softmax(out.refined.detach(), 1).max(1)
        keep = conf >= self.threshold
        if keep.any():
            self.step(F.cross_entropy(out.for_loss()[keep], labels[keep]))
        return out.refined.detach()
