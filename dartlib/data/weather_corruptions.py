"""The weather corruptions of CIFAR-C (:mod:`dartlib.data.corruptions`): snow, frost (over the
frost photographs of the PyPI package ``imagecorruptions-imaug``) and fog (a plasma fractal),
with their per-severity constants."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from dartlib.data.corruption_kernels import SIZE, _clipped_zoom, _motion_blur_u8, _to_uint8

# Per-severity constants (spec table), index = severity - 1.
SNOW = (
    (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
    (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
    (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
    (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
    (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
)
FROST = ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45))
FOG = ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75))
FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")
FROST_PACKAGE = "imagecorruptions-imaug"


def _snow(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Zoomed, thresholded, motion-blurred snow layer added twice (spec: snow)."""
    mean, std, zoom, thresh, radius, sigma, mix = SNOW[severity - 1]
    n = len(images)
    x = images.astype(np.float32) / np.float32(255)
    layer = rng.normal(loc=mean, scale=std, size=(n, SIZE, SIZE))
    layer = _clipped_zoom(np.ascontiguousarray(layer.transpose(1, 2, 0)), float(zoom))  # (H, W, N)
    layer = np.ascontiguousarray(layer.transpose(2, 0, 1))
    layer[layer < thresh] = 0
    layer_u8 = (np.clip(layer, 0, 1) * 255).astype(np.uint8)  # the official layer is an 8-bit PNG
    angles = rng.uniform(-135, -45, size=n)
    flakes = _motion_blur_u8(layer_u8[..., None], radius, sigma, angles) / 255.0
    # elementwise, not x @ weights: BLAS picks its dot-product kernel by CPU type and the rounding
    # follows it, so the same seed gave other snow images on another CPU
    r, g, b = (np.float32(w) for w in (0.299, 0.587, 0.114))
    gray = (x[..., 0] * r + x[..., 1] * g + x[..., 2] * b)[..., None]
    x = mix * x + (1 - mix) * np.maximum(x, gray * 1.5 + 0.5)
    return _to_uint8(x + flakes + flakes[:, ::-1, ::-1])


def _frost_folder() -> Path:
    """Folder of the frost photographs shipped by ``imagecorruptions-imaug`` (not imported)."""
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"frost needs the frost photographs of the PyPI package '{FROST_PACKAGE}' "
            f"(module 'imagecorruptions'); install it with: pip install {FROST_PACKAGE}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "frost"
    missing = [name for name in FROST_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {missing}; reinstall with: pip install {FROST_PACKAGE}")
    return folder


@lru_cache(maxsize=1)
def _frost_layers() -> tuple[np.ndarray, ...]:
    """The five frost photographs as RGB uint8, resized by 0.2 like ``cv2.resize`` does.

    OpenCV's INTER_LINEAR with factor 0.2 samples source coordinate (k + 0.5) * 5 - 0.5 =
    5k + 2, an integer, so it reduces to picking pixels; the output size is round(0.2 * n).
    Alpha channels are dropped (as ``cv2.imread`` does), not composited.
    """
    folder = _frost_folder()
    layers = []
    for name in FROST_FILES:
        with Image.open(folder / name) as photo:
            rgb = np.asarray(photo.convert("RGB"))
        rows = np.minimum(5 * np.arange(round(rgb.shape[0] * 0.2)) + 2, rgb.shape[0] - 1)
        cols = np.minimum(5 * np.arange(round(rgb.shape[1] * 0.2)) + 2, rgb.shape[1] - 1)
        layers.append(np.ascontiguousarray(rgb[rows[:, None], cols[None, :]]))
    return tuple(layers)


def _frost(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """a*x + b*random 32x32 crop of a frost photograph, 0..255 scale (spec: frost)."""
    a, b = FROST[severity - 1]
    layers = _frost_layers()
    n = len(images)
    which = rng.integers(len(layers), size=n)
    heights = np.array([layer.shape[0] for layer in layers])[which]
    widths = np.array([layer.shape[1] for layer in layers])[which]
    top = rng.integers(0, heights - SIZE)
    left = rng.integers(0, widths - SIZE)
    crops = np.empty_like(images)
    span = np.arange(SIZE)
    for k, layer in enumerate(layers):
        sel = np.flatnonzero(which == k)
        rows = (top[sel, None] + span)[:, :, None]
        cols = (left[sel, None] + span)[:, None, :]
        crops[sel] = layer[rows, cols]
    return np.clip(a * images.astype(np.float64) + b * crops, 0, 255).astype(np.uint8)


def _plasma_fractal(n: int, decay: float, rng: np.random.Generator, size: int = SIZE) -> np.ndarray:
    """(n, size, size) diamond-square height maps scaled to [0, 1] (spec: fog)."""
    grid = np.empty((n, size, size))
    grid[:, 0, 0] = 0.0
    step, wibble = size, 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = grid[:, ::step, ::step]
        squares = corners + np.roll(corners, -1, axis=1)
        squares += np.roll(squares, -1, axis=2)
        grid[:, half::step, half::step] = wibbled_mean(squares)
        centres = grid[:, half::step, half::step]
        corners = grid[:, ::step, ::step]
        left = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=2))
        grid[:, ::step, half::step] = wibbled_mean(left)
        upper = (centres + np.roll(centres, 1, axis=2)) + (corners + np.roll(corners, -1, axis=1))
        grid[:, half::step, ::step] = wibbled_mean(upper)
        step //= 2
        wibble /= decay
    grid -= grid.min(axis=(1, 2), keepdims=True)
    return grid / grid.max(axis=(1, 2), keepdims=True)


def _fog(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Add a*plasma to every channel, rescale by max/(max+a) (spec: fog)."""
    a, decay = FOG[severity - 1]
    x = images / 255.0
    peak = x.max(axis=(1, 2, 3), keepdims=True)
    x = x + a * _plasma_fractal(len(images), decay, rng)[..., None]
    return _to_uint8(x * peak / (peak + a))
