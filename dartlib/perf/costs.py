"""What test-time adaptation with and without DART costs (the appendix's cost table): parameters
held, parameters trained, FLOPs and wall-clock time over a test stream, measured on this machine.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from dartlib import tta
from dartlib.dart.refiner import Refiner
from dartlib.data.protocols import TEST_BATCH_SIZE, batches
from dartlib.data.augmentation import to_tensor

COST_METHODS = (("noadapt", "none"), ("bnadapt", "none"), ("bnadapt", "dart"), ("tent", "none"), ("tent", "dart"))


def _count(modules: list[nn.Module], *, trainable: bool = False) -> int:
    seen: set[int] = set()
    total = 0
    for module in modules:
        for p in module.parameters():
            if id(p) not in seen and (p.requires_grad or not trainable):
                seen.add(id(p))
                total += p.numel()
    return total


def networks(adapter: tta.Adapter) -> list[nn.Module]:
    """The networks an adapter runs forward at test time: the adapted model, and f_theta0_bar
    where it is a separate copy (BNAdapt+DART reads its own logits, Section 3)."""
    if adapter.refiner is not None and adapter.name != "bnadapt":
        return [adapter.model, adapter.source]
    return [adapter.model]


def held_modules(adapter: tta.Adapter) -> list[nn.Module]:
    """The networks of :func:`networks` and, with DART, g_phi."""
    return networks(adapter) + ([adapter.refiner.module] if adapter.refiner is not None else [])


def executed_flops(adapter: tta.Adapter, x: torch.Tensor) -> int:
    """FLOPs of one adapter call on batch ``x`` as executed (forward passes, and the backward pass
    and step of methods that train), counted by torch's FLOP counter."""
    counter = FlopCounterMode(display=False)
    with counter:
        adapter(x)
    return int(counter.get_total_flops())


def cost_table(model: nn.Module, refiner: Refiner, images: np.ndarray, *, batch_size: int = TEST_BATCH_SIZE, repeats: int = 3,
               device: str = "cpu") -> pd.DataFrame:
    """One row per (method, refiner) of :data:`COST_METHODS`: parameters held and trained (millions),
    forward GMACs per image (multiply-accumulates of the networks' forward passes: the paper's
    "FLOPs", 0.86 G for ResNet-26), executed GMACs per image (torch's FLOP count / 2, backward and
    optimiser included), and the best of ``repeats`` wall-clock times (s) over the
    stream ``images`` (each repeat from a fresh adapter). The repeats go round the methods in
    turn, so a slow spell of a shared machine falls on every method alike, not on one."""
    xs = [to_tensor(images[idx]) for idx in batches(np.arange(len(images)), batch_size=batch_size)]
    probe = xs[0].to(device)

    def fresh(method: str, ref: str) -> tta.Adapter:
        refiner_now = refiner.to(device) if ref == "dart" else None
        if refiner_now is not None:
            refiner_now.reset()
        return tta.make(method, copy.deepcopy(model).to(device), refiner=refiner_now)

    rows = []
    for method, ref in COST_METHODS:
        adapter = fresh(method, ref)
        modules = held_modules(adapter)
        forward = 0
        for network in networks(adapter):
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                network(probe)
            forward += counter.get_total_flops()
        executed = executed_flops(fresh(method, ref), probe)
        rows.append({"method": method, "refiner": ref, "params_m": _count(modules) / 1e6,
                     "trainable_params_m": _count([adapter.model], trainable=True) / 1e6 if method == "tent" else 0.0,
                     "gmac_forward_per_image": forward / 2 / len(probe) / 1e9,
                     "gmac_executed_per_image": executed / 2 / len(probe) / 1e9,
                     "wall_clock_s": float("inf"), "images": len(images), "device": str(device)})
    for _ in range(repeats):
        for row in rows:
            adapter = fresh(row["method"], row["refiner"])
            start = time.perf_counter()
            for x in xs:
                adapter(x.to(device)).argmax(1).cpu()
            row["wall_clock_s"] = min(row["wall_clock_s"], time.perf_counter() - start)
    return pd.DataFrame(rows)
