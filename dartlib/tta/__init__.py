"""Test-time adaptation methods behind one interface: ``make(name, model, refiner=..., **options)``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from dartlib.dart.refiner import Refiner
from dartlib.tta.base import METHODS, Adapter, Predictions, Refinement
from dartlib.tta.basic import BNAdapt, NoAdapt, PseudoLabel, Tent, entropy
from dartlib.tta.delta import Delta
from dartlib.tta.lame import Lame
from dartlib.tta.memo import Memo
from dartlib.tta.note import Note
from dartlib.tta.ods import Ods
from dartlib.tta.roid import Roid
from dartlib.tta.sar import Sar

for _cls in (NoAdapt, BNAdapt, Tent, PseudoLabel, Note, Delta, Ods, Lame, Sar, Memo, Roid):  # the documented order
    METHODS.register(_cls.name, _cls)
del _cls


def make(name: str, model: nn.Module, *, refiner: Refiner | None = None,
         source_logits: Callable[[torch.Tensor], torch.Tensor] | None = None, **options) -> Adapter:
    """An adapter of method ``name`` around ``model`` (adapted in place; pass a copy to keep it).
    ``source_logits``: a shared provider of f_theta0_bar's logits (:meth:`Adapter.share_source`)."""
    cls = METHODS[name]
    try:
        adapter = cls(model, refiner=refiner, **options)
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None
    if source_logits is not None:
        adapter.share_source(source_logits)
    return adapter


__all__ = ["METHODS", "Adapter", "BNAdapt", "Delta", "Lame", "Memo", "NoAdapt", "Note", "Ods", "Predictions", "PseudoLabel",
           "Refinement", "Roid", "Sar", "Tent", "entropy", "make"]
