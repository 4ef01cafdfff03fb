"""Throughput of :mod:`dartlib.data.corruptions` against ``imagecorruptions.corrupt``.

The reference is the per-image ``corrupt(image, corruption_name=..., severity=...)`` of the
PyPI package ``imagecorruptions-imaug``. It carries the ImageNet-C constants, so at the same
severity number it does different work per image (e.g. JPEG quality 7 instead of 40,
pixelate to 25% with NEAREST up-sampling, other zoom factors and blur radii); the timing
compares generators, not identical outputs. Both run in this process on the same images.

Run ``python -m dartlib.perf.corruption_speed`` to time 1,000 CIFAR-10 test images.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from dartlib.data.corruptions import CORRUPTIONS, corrupt

DEFAULT_ROOT = Path("/work/shared/data/cifar10/test")
PROJECTED_IMAGES = 10_000
COLUMNS = ["corruption", "ours_img_per_s", "reference_img_per_s", "ratio", "ours_s_per_10k", "note"]


def load_cifar10_test_images(root: Path = DEFAULT_ROOT, limit: int = 1000) -> np.ndarray:
    """Up to ``limit`` images from ``root/<class>/NNNN.jpg``, spread evenly over the sorted list."""
    files = sorted(Path(root).glob("*/*.jpg"))
    if not files:
        raise FileNotFoundError(f"no CIFAR-10 test JPEGs under {root}")
    step = max(len(files) // limit, 1)
    chosen = files[::step][:limit]
    return np.stack([np.asarray(Image.open(path).convert("RGB")) for path in chosen])


def _time_ours(images: np.ndarray, name: str, severity: int, seed: int) -> float:
    """Images per second of one batched call (after a small warm-up that fills caches)."""
    corrupt(images[:8], corruption=name, severity=severity, seed=seed)
    start = time.perf_counter()
    corrupt(images, corruption=name, severity=severity, seed=seed)
    return len(images) / (time.perf_counter() - start)


def _time_reference(images: np.ndarray, name: str, severity: int, seed: int) -> tuple[float, str]:
    """Images per second of the per-image reference, or NaN and the reason."""
    try:
        import imagecorruptions
    except ImportError:
        return float("nan"), "imagecorruptions-imaug not installed"
    if name not in imagecorruptions.get_corruption_names("all"):
        return float("nan"), "not implemented by imagecorruptions"
    np.random.seed(seed)  # the reference draws from NumPy's global RNG
    with contextlib.redirect_stdout(io.StringIO()):  # it prints on some shape fallbacks
        try:
            imagecorruptions.corrupt(images[0], corruption_name=name, severity=severity)  # JIT / file warm-up
        except Exception as error:  # noqa: BLE001 - any failure on 32x32 input is reported, not raised
            return float("nan"), f"fails on 32x32 input: {type(error).__name__}: {error}"
        start = time.perf_counter()
        for image in images:
            imagecorruptions.corrupt(image, corruption_name=name, severity=severity)
        elapsed = time.perf_counter() - start
    return len(images) / elapsed, ""


def run_benchmark(images: np.ndarray, *, severity: int = 5, seed: int = 0) -> pd.DataFrame:
    """Time ours (one batched call) and the reference (image by image) per corruption.

    Returns one row per corruption with images per second for both, ``ratio`` = ours /
    reference, ``ours_s_per_10k`` = projected seconds for 10,000 images, and a note where the
    reference gives no number. ``df.attrs["ours_total_s_per_10k"]`` sums the projections.
    """
    rows = []
    for name in CORRUPTIONS:
        ours = _time_ours(images, name, severity, seed)
        reference, note = _time_reference(images, name, severity, seed)
        rows.append(
            {
                "corruption": name,
                "ours_img_per_s": ours,
                "reference_img_per_s": reference,
                "ratio": ours / reference,
                "ours_s_per_10k": PROJECTED_IMAGES / ours,
                "note": note,
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["ours_total_s_per_10k"] = float(table["ours_s_per_10k"].sum())
    table.attrs["n_images"] = len(images)
    table.attrs["severity"] = severity
    return table


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--severity", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    images = load_cifar10_test_images(args.root, args.limit)
    table = run_benchmark(images, severity=args.severity, seed=args.seed)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(table.to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
    total = table.attrs["ours_total_s_per_10k"]
    print(f"\n{len(images)} images, severity {args.severity}: ours projected {total:,.1f} s", end="")
    print(f" for {PROJECTED_IMAGES:,} images x {len(CORRUPTIONS)} corruptions")
    return table


if __name__ == "__main__":
    main()
