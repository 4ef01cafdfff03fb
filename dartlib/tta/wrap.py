"""Any registered test-time method around a classifier of your own, with or without a fitted
DART refiner (:func:`dartlib.dart.fit.fit_refiner`), and its accuracy over a test stream.

    adapter = wrap("tent", model=model, refiner=fitted.refiner, device=device)
    logits = adapter(x)        # adapts on batch x, returns its (refined) logits (Algorithm 2)

The caller's model is never changed: the adapter works on a copy.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from dartlib.dart.fit import Data, SettingError, check_device, labelled_images
from dartlib.dart.refiner import Refiner
from dartlib.data.augmentation import to_tensor
from dartlib.tta import METHODS, Adapter, make

# Methods that read penultimate features: they need model.features(x) and model.head (nn.Linear).
FEATURE_METHODS = ("lame", "ods")


def wrap(method: str, *, model: nn.Module, refiner: Refiner | None, device: str | torch.device,
         **options) -> Adapter:
    """An adapter of registered ``method`` (``dartlib.tta.METHODS``: noadapt, bnadapt, tent, pl,
    note, delta, ods, lame, sar, memo, roid) around a copy of ``model`` on ``device``.

    With ``refiner`` every batch's W_B, b_B come from the frozen BN-adapted copy of ``model``
    (Algorithm 2) and the method uses the refined logits wherever it uses predictions; ``None``
    gives the method alone, for comparison. ``options`` go to the method (e.g. ``lr=``,
    ``optimizer=``; each class's signature in ``dartlib.tta`` lists them). The refiner is moved to
    ``device`` in place, and reset, so that its running state starts with the stream.
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
    return make(method, copy.deepcopy(model).to(device), refiner=refiner, **options)


def stream_accuracy(adapter: Adapter, data: Data, *, num_classes: int, batch_size: int, device: str | torch.device,
                    order: np.ndarray | None = None) -> float:
    """Accuracy (%) of the logits ``adapter`` returns over a test stream, batch by batch, adapting
    as it goes. ``data``: labelled test images in a layout of :func:`dartlib.dart.fit.labelled_images`
    (a class may be absent); ``order``: the stream's image indices (a label-shifted order, e.g.
    ``dartlib.data.protocols.long_tailed(labels, rho=100, seed=0)``), default every image in turn.
    The labels only score the predictions; the adapter never sees them."""
    device = check_device(device)
    test = labelled_images(data, num_classes=num_classes, every_class=False)
    order = np.arange(len(test)) if order is None else np.asarray(order)
    if len(order) == 0:
        raise SettingError("the test stream is empty: order= holds no index")
    correct = 0
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        predicted = adapter(to_tensor(test.images[idx]).to(device)).argmax(1).cpu().numpy()
        correct += int((predicted == test.labels[idx]).sum())
    return 100.0 * correct / len(order)
