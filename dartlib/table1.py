"""Table 1 cells: one test-time method, with or without DART, over one long-tailed test stream.

Every cell starts from a fresh copy of the source classifier (NOTE: from its IABN fine-tuned
copy), adapts online over the stream in batches, and scores the predictions it returns (the
refined ones with DART). Shared inputs (the source model, g_phi, the IABN model, the corrupted
test sets) are loaded once by the caller and passed in.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from dartlib import tta
from dartlib.dart import Refiner
from dartlib.data import load, protocols
from dartlib.data.protocols import batches
from dartlib.experiments import Cell, grid
from dartlib.training import to_tensor

# The paper's row order (Table 1); NOTE, DELTA and ODS are their TENT combinations (Appendix A).
TABLE1_METHODS = ("noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar")


def table1_cells(*, dataset: str, corruptions, rhos, methods=TABLE1_METHODS, severity: int = 5, seed: int = 0,
                 refiners=("none", "dart"), limit: int = 0) -> list[Cell]:
    """Every (method, refiner) pair on every (corruption, rho) LT stream; NoAdapt without DART
    only, as in the paper. ``limit`` > 0 keeps the first ``limit`` images of each (shuffled) LT
    stream, which keeps its class distribution in expectation (reduced profiles)."""
    params = [f"limit={limit}"] if limit else [""]
    cells = grid(dataset=[dataset], shift=["lt"], shift_param=[float(r) for r in rhos], corruption=list(corruptions),
                 severity=[severity], method=list(methods), refiner=list(refiners), params=params, seed=[seed])
    return [c for c in cells if not (c.method == "noadapt" and c.refiner != "none")]


@dataclass
class Table1Context:
    """What every cell shares."""

    source: nn.Module
    refiner: Refiner | None
    iabn: nn.Module | None = None
    batch_size: int = 200
    device: str = "cpu"
    options: dict = field(default_factory=dict)  # per-method keyword options
    refiners: dict = field(default_factory=dict)  # further named refiners (e.g. "dart-split")

    def adapter(self, cell: Cell) -> tta.Adapter:
        refiner = None
        if cell.refiner != "none":
            named = {name: r for name, r in {"dart": self.refiner, **self.refiners}.items() if r is not None}
            if cell.refiner not in named:
                raise ValueError(f"no refiner {cell.refiner!r} in this context; valid: none, {', '.join(named)}")
            refiner = named[cell.refiner].to(self.device)
            refiner.reset()
        options = dict(self.options.get(cell.method, {}))
        if cell.method == "note":
            if self.iabn is None:
                raise ValueError("NOTE needs the IABN fine-tuned model (dartlib.tta.note.load_or_finetune_iabn)")
            model = copy.deepcopy(self.iabn)
            options.setdefault("source", self.source)
            options.setdefault("memory", self.batch_size)
        else:
            model = copy.deepcopy(self.source)
        if "seed" in inspect.signature(tta.METHODS[cell.method].__init__).parameters:
            options.setdefault("seed", cell.seed)  # methods with their own randomness (memory, views)
        return tta.make(cell.method, model.to(self.device), refiner=refiner, **options)


@lru_cache(maxsize=4)
def _corrupted(dataset: str, corruption: str, severity: int):
    return load(dataset, corruption=corruption, severity=severity)


def stream_order(labels: np.ndarray, cell: Cell) -> np.ndarray:
    if cell.shift != "lt":
        raise ValueError(f"unknown shift {cell.shift!r} for Table 1; valid: lt")
    order = protocols.long_tailed(labels, rho=float(cell.shift_param), seed=cell.seed)
    options = dict(item.split("=") for item in cell.params.split(",") if item)
    limit = int(options.get("limit", 0))
    return order[:limit] if limit else order


def adapt_predictions(adapter: tta.Adapter, images: np.ndarray, order: np.ndarray, *, batch_size: int,
                      device: str = "cpu", progress: bool = False, desc: str = "") -> np.ndarray:
    """The class an adapter predicts for each image of the stream, batch by batch."""
    out = [adapter(to_tensor(images[idx]).to(device)).argmax(1).cpu().numpy()
           for idx in tqdm(list(batches(order, batch_size=batch_size)), desc=desc, disable=not progress, leave=False)]
    return np.concatenate(out)


def adapt_accuracy(adapter: tta.Adapter, images: np.ndarray, labels: np.ndarray, order: np.ndarray, *,
                   batch_size: int, device: str = "cpu", progress: bool = False, desc: str = "") -> float:
    """Accuracy (%) of the predictions an adapter returns over the stream."""
    preds = adapt_predictions(adapter, images, order, batch_size=batch_size, device=device, progress=progress, desc=desc)
    return 100.0 * float((preds == labels[order]).mean())


def cell_stream(cell: Cell) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels, order) of a cell's test stream (corrupted sets cached across cells)."""
    data = _corrupted(cell.dataset, cell.corruption, int(cell.severity))
    return data.images, data.labels, stream_order(data.labels, cell)


def evaluate_cell(cell: Cell, context: Table1Context, *, progress: bool = False) -> dict:
    """Run one cell; returns ``n`` and ``accuracy`` for :func:`dartlib.experiments.run_grid`."""
    torch.manual_seed(cell.seed)
    images, labels, order = cell_stream(cell)
    acc = adapt_accuracy(context.adapter(cell), images, labels, order, batch_size=context.batch_size,
                         device=context.device, progress=progress, desc=cell.label())
    return {"n": len(order), "accuracy": acc}
