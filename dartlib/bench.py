"""Throughput benchmarks of the backbones (images/second on this machine)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch.nn import functional as F

from dartlib.models import build, use_batch_statistics, use_source_statistics


def _rate(fn: Callable[[], None], *, batch: int, repeats: int) -> float:
    fn()  # warm-up: allocator, kernels, caches
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return batch * repeats / (time.perf_counter() - start)


def model_throughput(
    archs: Sequence[str] = ("small-cnn", "resnet26-w16", "resnet26"), *, batch: int = 200, repeats: int = 3,
    num_classes: int = 10, size: int = 32, device: str = "cpu",
) -> pd.DataFrame:
    """Eval-mode forward, BN-adapt forward and one SGD training step per backbone."""
    rows = []
    x = torch.rand(batch, 3, size, size, device=device)
    y = torch.randint(0, num_classes, (batch,), device=device)
    for arch in archs:
        model = build(arch, num_classes=num_classes).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

        @torch.no_grad()
        def forward() -> None:
            model(x)

        def train_step() -> None:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        use_source_statistics(model)
        eval_rate = _rate(forward, batch=batch, repeats=repeats)
        use_batch_statistics(model)
        adapt_rate = _rate(forward, batch=batch, repeats=repeats)
        model.train()
        train_rate = _rate(train_step, batch=batch, repeats=repeats)
        rows.append({"arch": arch, "device": device, "batch": batch, "eval_img_per_s": eval_rate,
                     "bnadapt_img_per_s": adapt_rate, "train_img_per_s": train_rate})
    return pd.DataFrame(rows)
