"""Test-time adaptation methods behind one interface: ``make(name, model, refiner=..., **options)``."""

from __future__ import annotations

from torch import nn

from dartlib.dart import Refiner
from dartlib.registry import Registry
from dartlib.tta.base import Adapter
from dartlib.tta.basic import BNAdapt, NoAdapt, PseudoLabel, Tent, entropy
from dartlib.tta.delta import Delta
from dartlib.tta.lame import Lame
from dartlib.tta.memo import Memo
from dartlib.tta.note import Note
from dartlib.tta.ods import Ods
from dartlib.tta.roid import Roid
from dartlib.tta.sar import Sar

METHODS: Registry[type[Adapter]] = Registry(
    "method",
    {"noadapt": NoAdapt, "bnadapt": BNAdapt, "tent": Tent, "pl": PseudoLabel, "note": Note, "delta": Delta, "ods": Ods,
     "lame": Lame, "sar": Sar, "memo": Memo, "roid": Roid},
)


def make(name: str, model: nn.Module, *, refiner: Refiner | None = None, **options) -> Adapter:
    """An adapter of method ``name`` around ``model`` (adapted in place; pass a copy to keep it)."""
    cls = METHODS[name]
    try:
        return cls(model, refiner=refiner, **options)
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None


__all__ = ["METHODS", "Adapter", "BNAdapt", "Delta", "Lame", "Memo", "NoAdapt", "Note", "Ods", "PseudoLabel", "Roid", "Sar",
           "Tent", "entropy", "make"]
