"""The array kernels the CIFAR-C corruptions share (:mod:`dartlib.data.corruptions`): the spec's
output rule (clip, scale, truncate to uint8) and 8-bit rounding, Gaussian filtering, the clipped
zoom, ImageMagick's motion blur re-implemented, reflect-101 indexing and bilinear sampling, and
scikit-image's RGB <-> HSV conversion. ``SIZE``: the side of a CIFAR image."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import ndimage

SIZE = 32


def _to_uint8(x: np.ndarray) -> np.ndarray:
    """Spec output rule: clip to [0, 1], scale by 255, truncate like ``np.uint8``."""
    return (np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def _round_to_uint8(x255: np.ndarray) -> np.ndarray:
    """Round a 0..255 float image to the nearest 8-bit level (as ImageMagick writes PNGs)."""
    return np.clip(np.floor(x255 + 0.5), 0, 255).astype(np.uint8)


def _gaussian_hw(x: np.ndarray, sigma: float) -> np.ndarray:
    """skimage ``gaussian`` defaults (mode 'nearest', truncate 4) over H and W of NHWC."""
    return ndimage.gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0)


@lru_cache(maxsize=None)
def _zoom_taps(zoom: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two-tap form of the official ``clipped_zoom`` along one axis: out[i] = w_lo[i] *
    x[lo[i]] + w_hi[i] * x[hi[i]].

    Centre crop of ``ceil(32/zoom)``, ``scipy.ndimage.zoom`` order 1 (grid_mode False:
    output i samples input ``i*(crop-1)/(out-1)``), then a centred trim back to 32.
    """
    crop = int(np.ceil(SIZE / zoom))
    top = (SIZE - crop) // 2
    out_len = int(round(crop * zoom))
    trim = (out_len - SIZE) // 2
    pos = (np.arange(SIZE) + trim) * ((crop - 1) / (out_len - 1))
    lo = np.minimum(np.floor(pos).astype(np.intp), crop - 1)
    frac = pos - lo
    hi = np.minimum(lo + 1, crop - 1)
    return top + lo, top + hi, 1.0 - frac, np.where(hi > lo, frac, 0.0)


def _clipped_zoom(x: np.ndarray, zoom: float, scratch: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Official ``clipped_zoom`` of a float64 (H, W, ...) array.

    Axes 0 and 1 are interpolated in turn with row/column gathers: with the planes last,
    each gather moves contiguous blocks, over the whole batch at once. ``scratch`` (three
    arrays shaped like ``x``) lets a caller looping over zooms reuse memory; the result is
    written to ``scratch[0]``. (``mode="clip"`` only stops ``np.take`` from buffering: the
    indices are always in range.)
    """
    lo, hi, w_lo, w_hi = _zoom_taps(zoom)
    out, rows, part = scratch if scratch is not None else tuple(np.empty_like(x) for _ in range(3))
    tail = (1,) * (x.ndim - 2)
    np.multiply(np.take(x, lo, axis=0, out=rows, mode="clip"), w_lo.reshape(-1, 1, *tail), out=rows)
    rows += np.multiply(np.take(x, hi, axis=0, out=part, mode="clip"), w_hi.reshape(-1, 1, *tail), out=part)
    np.multiply(np.take(rows, lo, axis=1, out=out, mode="clip"), w_lo.reshape(1, -1, *tail), out=out)
    out += np.multiply(np.take(rows, hi, axis=1, out=part, mode="clip"), w_hi.reshape(1, -1, *tail), out=part)
    return out


def _motion_taps(
    radius: float, sigma: float, angles: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights (T,) and per-image row/column offsets (N, T) of ImageMagick's motion kernel."""
    width = int(2 * math.ceil(radius) + 1)
    taps = np.arange(width, dtype=np.float64)
    weights = np.exp(-(taps**2) / (2.0 * sigma * sigma))
    weights /= weights.sum()
    theta = np.deg2rad(angles)[:, None]
    px, py = width * np.sin(theta), width * np.cos(theta)
    norm = np.hypot(px, py)
    d_col = np.ceil(taps * py / norm - 0.5).astype(np.intp)
    d_row = np.ceil(taps * px / norm - 0.5).astype(np.intp)
    return weights, d_row, d_col


def _motion_blur_u8(images: np.ndarray, radius: float, sigma: float, angles: np.ndarray) -> np.ndarray:
    """Motion blur substitute (module docstring, deviation 2) of uint8 NHWC images, C <= 4.

    A batched convolution whose line kernel has its own angle per image: one gather and
    accumulate per tap over the whole batch. Multi-channel pixels are packed into uint32 so
    that a gather moves whole pixels rather than single channel values.
    """
    n, h, w, c = images.shape
    weights, d_row, d_col = _motion_taps(radius, sigma, angles)
    if c == 1:
        pixels, lanes = images.ravel(), 1
    else:
        rgba = np.zeros((n, h, w, 4), dtype=np.uint8)
        rgba[..., :c] = images
        pixels, lanes = rgba.view(np.uint32).ravel(), 4
    start = (np.arange(n) * (h * w))[:, None, None]
    acc = np.zeros((n * h * w, lanes), dtype=np.float64)
    term = np.empty_like(acc)
    for t, weight in enumerate(weights):
        rows = np.clip(np.arange(h)[None, :] + d_row[:, t : t + 1], 0, h - 1)
        cols = np.clip(np.arange(w)[None, :] + d_col[:, t : t + 1], 0, w - 1)
        flat = (start + rows[:, :, None] * w + cols[:, None, :]).ravel()
        acc += np.multiply(np.take(pixels, flat).view(np.uint8).reshape(-1, lanes), weight, out=term)
    return _round_to_uint8(acc[:, :c].reshape(n, h, w, c))


def _reflect_index(idx: np.ndarray, n: int, *, repeat_edge: bool) -> np.ndarray:
    """Fold indices into [0, n): half-sample symmetric (SciPy 'reflect') if ``repeat_edge``,
    else whole-sample symmetric (OpenCV BORDER_REFLECT_101)."""
    if repeat_edge:
        period = 2 * n
        idx = np.mod(idx, period)
        return np.where(idx >= n, period - 1 - idx, idx)
    period = 2 * (n - 1)
    idx = np.mod(idx, period)
    return np.where(idx >= n, period - idx, idx)


def _bilinear(
    images: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, repeat_edge: bool, dtype: type = np.float64
) -> np.ndarray:
    """Bilinear sampling of NHWC ``images`` at per-image (N, H, W) coordinates.

    Corners are fetched with ``np.take`` on the (N*H*W, C) pixel list, much faster than
    three broadcast index arrays.
    """
    n, h, w, c = images.shape
    r0, c0 = np.floor(rows), np.floor(cols)
    fr = (rows - r0).astype(dtype).reshape(-1, 1)
    fc = (cols - c0).astype(dtype).reshape(-1, 1)
    r0, c0 = r0.astype(np.intp), c0.astype(np.intp)
    start = (np.arange(n) * (h * w))[:, None, None]
    ra = start + _reflect_index(r0, h, repeat_edge=repeat_edge) * w
    rb = start + _reflect_index(r0 + 1, h, repeat_edge=repeat_edge) * w
    ca = _reflect_index(c0, w, repeat_edge=repeat_edge)
    cb = _reflect_index(c0 + 1, w, repeat_edge=repeat_edge)
    pixels = images.reshape(-1, c)
    one = dtype(1)

    def at(row: np.ndarray, col: np.ndarray) -> np.ndarray:
        return np.take(pixels, (row + col).ravel(), axis=0)

    out = at(ra, ca) * ((one - fr) * (one - fc)) + at(ra, cb) * ((one - fr) * fc)
    out += at(rb, ca) * (fr * (one - fc))
    out += at(rb, cb) * (fr * fc)
    return out.reshape(n, h, w, c)


def _rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    """scikit-image's rgb2hsv formulas (ties go to blue, then green, then red)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = rgb.max(axis=-1)
    delta = v - rgb.min(axis=-1)
    flat = delta == 0
    safe = np.where(flat, 1.0, delta)
    s = np.where(flat, 0.0, delta / np.where(v == 0, 1.0, v))
    h = np.select([b == v, g == v], [4.0 + (r - g) / safe, 2.0 + (b - r) / safe], (g - b) / safe)
    h = np.where(flat, 0.0, (h / 6.0) % 1.0)
    return np.stack([h, s, v], axis=-1)


# Which of (v, p, q, t) gives (R, G, B) in each of the six hue sectors.
_HSV_SECTORS = np.array([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]])


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """scikit-image's hsv2rgb formulas."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    sector = np.floor(h * 6)
    f = h * 6 - sector
    candidates = np.stack([v, v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)], axis=-1)
    order = _HSV_SECTORS[sector.astype(np.intp) % 6]
    return np.take_along_axis(candidates, order, axis=-1)
