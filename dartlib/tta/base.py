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
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from dartlib.dart.fit import SettingError
from dartlib.dart.refiner import Refiner, norm_preserving
from dartlib.models.backbones import bn_layers, frozen_bn_adapted
from dartlib.registry import Registry

# Every method by name (``make``, ``wrap``, the profiles' method lists). The suite's own are added
# in dartlib.tta in a fixed order; a subclass defined elsewhere that sets ``name`` in its body is
# added when it is defined (:meth:`Adapter.__init_subclass__`).
METHODS: Registry[type["Adapter"]] = Registry("method")


def _same_class(held: type, new: type) -> bool:
    """A class defined again under its module and name (a notebook cell run twice)."""
    return (held.__module__, held.__qualname__) == (new.__module__, new.__qualname__)


class Adapter(abc.ABC):
    """Base class: holds the model being adapted, the frozen source copy and the refiner."""

    name = "base"
    # Bumped when a method's computation changes under unchanged options, so that stored results
    # of the old computation no longer match (it is part of a grid cell's input digest); 0 adds nothing.
    revision = 0
    # Whether DART is paired with this method in the paper's tables (NoAdapt: never).
    takes_refiner = True
    # Names of the context's trained inputs (``TestTimeContext.trained``, made by context_fields)
    # that the method reads (NOTE: "iabn", its IABN copy): part of its cells' digests.
    reads_context: tuple[str, ...] = ()
    # Options a grid cell may set through its ``params`` (NOTE's ``dart_use=report``), so that a
    # grid can hold rows of both readings of a method side by side.
    cell_options: tuple[str, ...] = ()
    # Whether the method works through BatchNorm layers (normalises with the test batch's
    # statistics or trains their affine parameters): a model without any is refused.
    needs_batchnorm = True
    # A check of every batch before it is adapted on (:func:`dartlib.tta.wrap.wrap` sets one that
    # refuses a batch of the wrong dtype, range or channel count); None: no check.
    input_check: Callable[[torch.Tensor], None] | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        """A method of your own is usable by name once defined: ``class Mine(Adapter): name = "mine"``
        makes ``wrap("mine", ...)`` work (a name a method already holds is refused)."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__ and not cls.__module__.startswith("dartlib.tta."):
            METHODS.register(cls.name, cls, same=_same_class)

    @classmethod
    def context_files(cls, *, settings, checkpoint: Path) -> list[Path]:
        """The trained files this method adds to a test-time context (those of
        :meth:`context_fields`), from the profile's ``settings``; [] for most methods."""
        return []

    @classmethod
    def context_fields(cls, *, settings, checkpoint: Path, model: nn.Module, train, device: str,
                       progress: bool) -> dict:
        """The context fields this method reads (:attr:`reads_context`), made from the profile's
        ``settings`` for the source model ``model`` saved at ``checkpoint`` (trained on ``train``,
        on ``device``, where absent; ``train`` is None when they must be loaded); {} for most."""
        return {}

    @classmethod
    def profile_options(cls, settings) -> dict:
        """This method's keyword options that the profile's ``settings`` set; {} for most."""
        return {}

    @classmethod
    def from_context(cls, context) -> tuple[nn.Module, dict]:
        """The model this method adapts (a fresh copy) and the options it takes from a test-time
        context (:class:`dartlib.experiments.engine.TestTimeContext`): by default the source
        model and no options."""
        return copy.deepcopy(context.source), {}

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None) -> None:
        if (self.needs_batchnorm or refiner is not None) and not any(True for _ in bn_layers(model)):
            why = ("DART reads the batch's statistics from the BN-adapted model (Section 3)" if refiner is not None
                   else f"{self.name} adapts through BatchNorm layers (their batch statistics or affine parameters)")
            raise SettingError(f"{type(model).__name__} has no BatchNorm1d/2d/3d layer and {why}: use a model with "
                               "BatchNorm layers, or a method that needs none (noadapt, lame) without a refiner")
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

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Adapt on batch ``x`` and return its predictions (logits): this batch's refinement is read
        from f_theta0_bar first, then the method adapts with it (:meth:`adapt`)."""
        if self.input_check is not None:
            self.input_check(x)
        return self.adapt(x, self.refinement(x))

    def refinement(self, x: torch.Tensor) -> Refinement:
        """DART's refinement of batch ``x`` (Algorithm 2): (W_B, b_B) from the logits of
        f_theta0_bar on it; none without a refiner or where DART-split's detector says no."""
        if self.refiner is None:
            return Refinement(refiner=None, params=None)
        with torch.no_grad():
            params = self.refiner.transform(self.source(x))
        if params is not None and self.refiner.current_scale() == 1.0 and _is_identity(*params):
            # An exact identity is no refinement; skipping it keeps the method bit for bit (the
            # norm-preserving rescaling would otherwise add rounding-level gradient terms).
            params = None
        return Refinement(refiner=self.refiner, params=params)

    @abc.abstractmethod
    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        """The method's loss and update on batch ``x``, using ``refine`` wherever it uses
        predictions of the test data; returns the batch's predictions (logits)."""


@dataclass(frozen=True)
class Predictions:
    """One forward's logits f_theta(x) beside their refined form (the logits themselves where the
    batch has no refinement)."""

    logits: torch.Tensor
    refined: torch.Tensor
    active: bool

    def for_loss(self) -> torch.Tensor:
        """What entropy-style losses see: the refined logits rescaled to the norm of the unrefined
        ones (Appendix A, "Details about test-time adaptation"), or the logits unrefined."""
        return norm_preserving(self.refined, self.logits) if self.active else self.logits


@dataclass(frozen=True)
class Refinement:
    """One batch's refinement: ``params`` (W_B, b_B) from f_theta0_bar, or None for none."""

    refiner: Refiner | None
    params: tuple[torch.Tensor, ...] | None

    @property
    def active(self) -> bool:
        return self.params is not None

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """The refined ``logits`` (unchanged without a refinement)."""
        return self.refiner.apply(logits, self.params) if self.active else logits

    def predictions(self, logits: torch.Tensor) -> Predictions:
        return Predictions(logits=logits, refined=self(logits), active=self.active)


def _is_identity(w: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(w, torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)) and not b.any())
