"""Any registered test-time method around a classifier of your own, with or without a fitted
DART refiner (:func:`dartlib.dart.fit.fit_refiner`), and its accuracy over a test stream.

    adapter = wrap("tent", model=model, refiner=fitted.refiner, device=device)
    logits = adapter(x)        # adapts on batch x, returns its logits (Algorithm 2)

What ``adapter(x)`` returns is the method's prediction: with a refiner, the DART-refined logits
f_theta(x) W_B + b_B for every method but NOTE, whose default (``dart_use="memory"``, Appendix A)
lets DART choose what enters its memory and returns NOTE's own, unrefined logits
(``wrap("note", ..., dart_use="report")`` returns the refined ones); ROID returns its
prior-corrected (refined) logits. The caller's model is never changed: the adapter works on a copy.
Everything is checked before use: a method that needs BatchNorm layers refuses a model without
them; every batch must be a float tensor N x C x H x W in [0, 1] with the model's channel count
(:class:`InputCheck`); :func:`stream_accuracy` refuses a ``num_classes`` the logits do not have.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from dartlib.dart.fit import Data, SettingError, check_device, labelled_images
from dartlib.dart.refiner import Refiner
from dartlib.models.streams import TestStream, percent_correct, stream_correct
from dartlib.tta import METHODS, Adapter, make

# Methods that read penultimate features: they need model.features(x) and model.head (nn.Linear).
FEATURE_METHODS = ("lame", "ods")
RANGE_SLACK = 1e-3  # how far past [0, 1] a batch may reach (rounding of a resize or a colour transform)


class InputCheck:
    """Refuses a test batch the model was not made for, with a sentence naming the fix: not a
    float tensor N x C x H x W, values outside [0, 1] (0..255, or normalised outside the model),
    or another channel count than the model's first convolution takes (``channels``; None: any)."""

    def __init__(self, *, channels: int | None) -> None:
        self.channels = channels

    @classmethod
    def of(cls, model: nn.Module) -> "InputCheck":
        """The check for ``model``: its first ``nn.Conv2d`` fixes the channel count."""
        conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
        return cls(channels=conv.in_channels if conv is not None else None)

    def __call__(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise SettingError(f"the batch is a {type(x).__name__}: pass a torch float tensor N x C x H x W in [0, 1] "
                               "(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255 for uint8 N x H x W x C)")
        if not torch.is_floating_point(x):
            raise SettingError(f"the batch has dtype {x.dtype}: pass float images in [0, 1] "
                               "(x.float() / 255 for uint8 pixels)")
        if x.ndim != 4:
            raise SettingError(f"the batch has shape {tuple(x.shape)}: pass N x C x H x W (x[None] for one image, "
                               "x[:, None] for grey images without a channel axis)")
        if self.channels is not None and x.shape[1] != self.channels:
            hint = (" (these look channels-last: x.permute(0, 3, 1, 2))" if x.shape[-1] == self.channels else "")
            raise SettingError(f"the batch has {x.shape[1]} channels (shape {tuple(x.shape)}) but the model's first "
                               f"convolution takes {self.channels}{hint}")
        low, high = float(x.min()), float(x.max())
        if low < -RANGE_SLACK:
            raise SettingError(f"the batch's values go down to {low:.3g}: pass the unnormalised images in [0, 1] and "
                               "put the normalisation (mean, std) inside the model")
        if high > 1.0 + RANGE_SLACK:
            raise SettingError(f"the batch's values reach {high:.3g}: pass images in [0, 1] (x / 255 for 0..255 "
                               "pixels), as the model was given them in fit_refiner")


def wrap(method: str, *, model: nn.Module, refiner: Refiner | None = None, device: str | torch.device,
         **options) -> Adapter:
    """An adapter of registered ``method`` (``dartlib.tta.METHODS``: noadapt, bnadapt, tent, pl,
    note, delta, ods, lame, sar, memo, roid, and any ``Adapter`` subclass of yours that sets
    ``name``) around a copy of ``model`` on ``device``.

    With ``refiner`` every batch's W_B, b_B come from the frozen BN-adapted copy of ``model``
    (Algorithm 2) and the method uses the refined logits wherever it uses predictions; ``None``
    gives the method alone, for comparison. ``options`` go to the method (e.g. ``lr=``,
    ``optimizer=``; each class's signature in ``dartlib.tta`` lists them). The refiner is moved to
    ``device`` in place, and reset, so that its running state starts with the stream.

    Refused with :class:`SettingError`: a method that adapts through BatchNorm layers (all but
    noadapt and lame), or any method with a refiner, on a model without them; LAME and ODS on a
    model without the ``features`` / ``head`` hook. The adapter refuses a batch that is not a float
    N x C x H x W in [0, 1] with the channels of the model's first convolution (:class:`InputCheck`).
    What ``adapter(x)`` returns: the module docstring.
    """
    device = check_device(device)
    METHODS[method]  # an unknown name raises here, listing the valid ones
    if method in FEATURE_METHODS:
        head = getattr(model, "head", None)
        if not callable(getattr(model, "features", None)) or not isinstance(head, nn.Linear):
            raise SettingError(f"{method} reads penultimate features: the model needs model.features(x) -> (N, F) and "
                               "model.head = nn.Linear(F, K) with model(x) == model.head(model.features(x)); "
                               f"the methods without that hook: "
                               f"{', '.join(m for m in METHODS if m not in FEATURE_METHODS)}")
    if refiner is not None:
        refiner.to(device).reset()
    adapter = make(method, copy.deepcopy(model).to(device), refiner=refiner, **options)
    adapter.input_check = InputCheck.of(model)
    return adapter


def stream_accuracy(adapter: Adapter, data: Data, *, num_classes: int, batch_size: int, device: str | torch.device,
                    order: np.ndarray | None = None) -> float:
    """Accuracy (%) of the logits ``adapter`` returns over a test stream, batch by batch, adapting
    as it goes (:func:`dartlib.models.streams.run_stream`, the loop every evaluation runs).
    ``data``: labelled test images in a layout of :func:`dartlib.dart.fit.labelled_images`
    (a class may be absent); ``order``: the stream's image indices (a label-shifted order, e.g.
    ``dartlib.data.protocols.long_tailed(labels, rho=100, seed=0)``), default every image in turn.
    The labels only score the predictions; the adapter never sees them. Refused: logits of another
    width than ``num_classes`` (checked on the first batch)."""
    device = check_device(device)
    test = labelled_images(data, num_classes=num_classes, every_class=False)
    order = np.arange(len(test)) if order is None else np.asarray(order)
    if len(order) == 0:
        raise SettingError("the test stream is empty: order= holds no index")
    stream = TestStream(images=test.images, labels=test.labels, order=order, batch_size=batch_size, device=device)
    return percent_correct(stream_correct(WidthCheck(adapter, num_classes=num_classes), stream))


class WidthCheck:
    """``adapter`` with the width of the logits it returns for the first batch checked against
    ``num_classes`` (a stream scored against labels 0..num_classes-1)."""

    def __init__(self, adapter: Adapter, *, num_classes: int) -> None:
        self.adapter, self.num_classes, self.checked = adapter, num_classes, False

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.adapter(x)
        if not self.checked and (logits.ndim != 2 or logits.shape[1] != self.num_classes):
            raise SettingError(f"the adapter returns logits of shape {tuple(logits.shape)} but num_classes="
                               f"{self.num_classes}: pass the number of the model's outputs (num_classes="
                               f"{logits.shape[-1]}), with labels 0..{logits.shape[-1] - 1}")
        self.checked = True
        return logits
