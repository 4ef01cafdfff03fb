"""Throughput benchmarks of the backbones (images/second on this machine)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from dartlib.data.protocols import TEST_BATCH_SIZE
from dartlib.models.backbones import build, use_batch_statistics, use_source_statistics


def _rate(fn: Callable[[], None], *, batch: int, repeats: int) -> float:
    fn()  # warm-up: allocator, kernels, caches
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return batch * repeats / (time.perf_counter() - start)


def model_throughput(
    archs: Sequence[str] = ("small-cnn", "resnet26-w16", "resnet26"), *, batch: int = TEST_BATCH_SIZE, repeats: int = 3,
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


def dart_overhead(
    model: torch.nn.Module, train, test, *, config, test_batch_size: int = TEST_BATCH_SIZE, n_steps: int = 30,
    stream_size: int = 4000, repeats: int = 3, device: str = "cpu",
) -> pd.DataFrame:
    """DART's cost relative to BNAdapt, measured in one process (issue criteria: intermediate
    training at >= 0.8x the images/second of a BN-adapt forward pass at the intermediate batch
    size; BNAdapt+DART at <= 1.05x the wall time of BNAdapt over the same test stream).

    ``train`` and ``test`` are :class:`dartlib.data.dataset.Dataset`; the test stream is the
    first ``stream_size`` test images in order. Each timing is the best of ``repeats``, the two
    members of a pair alternating so that machine noise hits both alike.
    """
    from dartlib.dart.refiner import RefinementModule, Refiner
    from dartlib.data.protocols import batches
    from dartlib.dart.refiner_training import train_refiner
    from dartlib.models.backbones import frozen_bn_adapted
    from dartlib.data.augmentation import to_tensor

    frozen = frozen_bn_adapted(model).to(device)
    k = train.num_classes
    # a forward pass over as many training images as the intermediate steps see (two batches each)
    order = np.random.default_rng(0).permutation(len(train.labels))[: 2 * n_steps * config.batch_size]
    train_x = [to_tensor(train.images[idx]) for idx in batches(order, batch_size=config.batch_size)]
    test_order = np.arange(min(stream_size, len(test.labels)))
    test_x = [to_tensor(test.images[idx]) for idx in batches(test_order, batch_size=test_batch_size)]
    refiner = Refiner(module=RefinementModule(k, hidden=config.hidden), config=config)

    @torch.no_grad()
    def bn_forward() -> None:
        for x in train_x:
            frozen(x.to(device))

    def intermediate() -> None:
        train_refiner(model, train, config, device=device, progress=False, max_steps=n_steps)

    @torch.no_grad()
    def bnadapt(refine: bool) -> None:
        for x in test_x:
            logits = frozen(x.to(device))
            out = refiner(logits, logits) if refine else logits
            out.argmax(1).cpu()

    best = {"bn_forward": float("inf"), "intermediate": float("inf"), "bnadapt": float("inf"), "bnadapt_dart": float("inf")}
    bn_forward()  # warm-up
    bnadapt(True)
    for _ in range(repeats):
        for name, fn in (("bn_forward", bn_forward), ("intermediate", intermediate),
                         ("bnadapt", lambda: bnadapt(False)), ("bnadapt_dart", lambda: bnadapt(True))):
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    n_train = 2 * n_steps * config.batch_size
    rows = [
        {"measure": "BN-adapt forward, intermediate batch size", "images": n_train, "seconds": best["bn_forward"],
         "img_per_s": n_train / best["bn_forward"]},
        {"measure": "intermediate training (Dirichlet + i.i.d. batch per step)", "images": n_train,
         "seconds": best["intermediate"], "img_per_s": n_train / best["intermediate"]},
        {"measure": "BNAdapt over the test stream", "images": len(test_order), "seconds": best["bnadapt"],
         "img_per_s": len(test_order) / best["bnadapt"]},
        {"measure": "BNAdapt+DART over the test stream", "images": len(test_order), "seconds": best["bnadapt_dart"],
         "img_per_s": len(test_order) / best["bnadapt_dart"]},
    ]
    table = pd.DataFrame(rows)
    table.attrs["intermediate_over_forward"] = rows[1]["img_per_s"] / rows[0]["img_per_s"]
    table.attrs["dart_over_bnadapt_wall"] = best["bnadapt_dart"] / best["bnadapt"]
    table.attrs["device"] = device
    return table


def shared_pass_speedup(model: torch.nn.Module, train, *, configs, n_steps: int = 20, repeats: int = 2,
                        device: str = "cpu") -> pd.DataFrame:
    """Training the refiners of ``configs`` (which share their intermediate batches) one after
    the other against in one pass (:func:`dartlib.dart.refiner_training.train_refiners`), ``n_steps`` steps
    each; best of ``repeats``, the two alternating so that machine noise hits both alike."""
    from dartlib.dart.refiner_training import train_refiner, train_refiners

    def alone() -> None:
        for config in configs:
            train_refiner(model, train, config, device=device, progress=False, max_steps=n_steps)

    def together() -> None:
        train_refiners(model, train, list(configs), device=device, progress=False, max_steps=n_steps)

    train_refiners(model, train, list(configs), device=device, progress=False, max_steps=1)  # warm-up
    best = {"alone": float("inf"), "together": float("inf")}
    for _ in range(repeats):
        for name, fn in (("alone", alone), ("together", together)):
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    table = pd.DataFrame([{"measure": f"{len(configs)} refiners one after the other", "seconds": best["alone"]},
                          {"measure": f"{len(configs)} refiners in one pass", "seconds": best["together"]}])
    table.attrs["speedup"] = best["alone"] / best["together"]
    table.attrs["device"] = device
    return table
