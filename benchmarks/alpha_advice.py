"""Does select_alpha's advice predict the test streams? For three Fashion-MNIST models a user
might bring, the chooser's held-out estimate of DART's gain over BNAdapt (without label shift and
under it) beside the same gains measured on the test set's streams (i.i.d., long-tailed rho 10 and
100; clean images) by a refiner fitted with fit_refiner at the chosen alpha on all the data.

- ``smoke``: the suite's committed smoke model (small CNN, RGB 32 x 32, data/checkpoints/);
- ``grey``: a 1-channel 28 x 28 CNN of a user's own, trained here for 300 steps;
- ``docs``: the model of docs/using-dart.md (2,000 images, two epochs), its select_alpha call as
  written there.

Each model is scored twice where it can be: held-out images taken from the data it was trained on
(the default), and ``validation=`` images it never saw. Usage (one thread, a few minutes):
``python benchmarks/alpha_advice.py [smoke grey docs] [--out results.csv]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib.dart.fit import fit_refiner, labelled_images
from dartlib.dart.refiner import DartConfig
from dartlib.data import load
from dartlib.studies.alpha_choice import AlphaSearch, heldout_outcomes, scored_candidates, select_alpha


def nchw(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255


def train_cnn(x: torch.Tensor, y: torch.Tensor, *, channels: int, steps: int, lr: float, batch: int = 100) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(steps):
        i = (step * batch) % len(x)
        loss = nn.functional.cross_entropy(model(x[i:i + batch]), y[i:i + batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def grey(images: np.ndarray) -> np.ndarray:
    """The suite's padded 32 x 32 x 3 Fashion-MNIST back to 28 x 28 x 1."""
    return np.ascontiguousarray(images[:, 2:30, 2:30, :1])


def case(name: str):
    """(model, training data, validation data or None, test Dataset, config, search)."""
    train, test = load("fmnist", split="train"), load("fmnist", split="test")
    if name == "smoke":
        from dartlib.models.backbones import build

        state = torch.load("data/checkpoints/fmnist-small-cnn-smoke-seed0.pt", map_location="cpu", weights_only=False)
        model = build(state["meta"]["arch"], num_classes=10)
        model.load_state_dict(state["model"])
        data = (train.images[:5000], train.labels[:5000])
        return model.eval(), data, None, test, DartConfig(n_dir=25, epochs=3, per_class=300), AlphaSearch()
    if name == "grey":
        x, y = nchw(grey(train.images[:10000])), torch.from_numpy(train.labels[:10000])
        model = train_cnn(x, y, channels=1, steps=300, lr=3e-3)
        data = (grey(train.images[:10000]), train.labels[:10000])
        validation = (grey(train.images[10000:12000]), train.labels[10000:12000])
        test = labelled_images((grey(test.images), test.labels), num_classes=10, every_class=False)
        return model, data, validation, test, DartConfig(n_dir=25, epochs=3, per_class=600), AlphaSearch()
    x, y = nchw(train.images[:2000]), torch.from_numpy(train.labels[:2000])
    model = train_cnn(x, y, channels=3, steps=40, lr=1e-2)  # docs: two epochs of 20 batches of 100
    validation = (train.images[2000:3000], train.labels[2000:3000])
    return (model, (x, y), validation, test, DartConfig(n_dir=5, epochs=2),
            AlphaSearch(alphas=[0.1, 1, 10], heldout_per_class=40))


def test_gains(model: nn.Module, data, test, *, alpha: float, config: DartConfig, search: AlphaSearch, cache) -> pd.Series:
    """DART's gain over BNAdapt on the test streams with a refiner fitted on all of ``data`` at ``alpha``."""
    from dataclasses import replace

    fitted = fit_refiner(model=model, data=data, num_classes=10, device="cpu", config=replace(config, alpha=alpha),
                         cache_dir=cache, progress=False)
    table, outcomes = heldout_outcomes(model, {alpha: fitted.refiner}, test, rhos=search.rhos,
                                       batch_size=search.batch_size, seed=config.seed, device="cpu")
    summary, _ = scored_candidates(table, outcomes, kept=alpha, shift_weight=search.shift_weight)
    return summary.loc[alpha]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=["smoke", "grey", "docs"])
    parser.add_argument("--out")
    parser.add_argument("--cache", default="/tmp/alpha-advice-cache")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in args.cases:
        model, data, validation, test, config, search = case(name)
        for held_from in (["training data", "validation"] if validation is not None else ["training data"]):
            start = time.time()
            choice = select_alpha(model=model, data=data, num_classes=10, device="cpu", config=config, search=search,
                                  validation=validation if held_from == "validation" else None, cache_dir=args.cache,
                                  progress=False)
            on_test = test_gains(model, data, test, alpha=choice.alpha, config=config, search=search, cache=args.cache)
            said = choice.summary.loc[choice.alpha]
            print(f"\n== {name}, held out from {held_from} ({time.time() - start:.0f} s)")
            print(choice.report())
            print(choice)
            row = {"model": name, "held_out_from": held_from, "alpha": choice.alpha, "separable": choice.separable,
                   "helps": choice.helps}
            for part in ("iid", "shifted"):
                se = math.hypot(said[f"{part}_se"], on_test[f"{part}_se"])
                row |= {f"{part}_heldout": said[part], f"{part}_heldout_se": said[f"{part}_se"],
                        f"{part}_test": on_test[part], f"{part}_test_se": on_test[f"{part}_se"],
                        f"{part}_within_2se": abs(on_test[part] - said[part]) <= 2 * se}
                print(f"{part:>8}: held-out {said[part]:+.2f} ± {said[f'{part}_se']:.2f}, test "
                      f"{on_test[part]:+.2f} ± {on_test[f'{part}_se']:.2f}: difference "
                      f"{on_test[part] - said[part]:+.2f} ({abs(on_test[part] - said[part]) / se:.1f} SE of the difference)")
            rows.append(row)
    frame = pd.DataFrame(rows)
    print("\n" + frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.out:
        frame.to_csv(args.out, index=False, float_format="%.3f")


if __name__ == "__main__":
    main()
