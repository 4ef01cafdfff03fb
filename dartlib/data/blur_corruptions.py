"""The blur corruptions of CIFAR-C (:mod:`dartlib.data.corruptions`): defocus_blur, glass_blur,
motion_blur and zoom_blur, with their per-severity constants."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import ndimage

from dartlib.data.corruption_kernels import SIZE, _clipped_zoom, _gaussian_hw, _motion_blur_u8, _to_uint8

# Per-severity constants (spec table), index = severity - 1.
DEFOCUS_BLUR = ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1))
GLASS_BLUR = ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2))
MOTION_BLUR = ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5))
ZOOM_BLUR = (1.06, 1.11, 1.16, 1.21, 1.26)


@lru_cache(maxsize=None)
def _defocus_kernel(radius: float, alias_sigma: float) -> np.ndarray:
    """Anti-aliased disk on the 17x17 grid (spec: defocus_blur), trimmed to its support.

    Built in float32 as the official code does; the all-zero rim is cut symmetrically,
    which changes nothing in the correlation.
    """
    grid = np.arange(-8, 9)
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    disk = (xx**2 + yy**2 <= radius**2).astype(np.float32)
    disk /= disk.sum()
    window = np.exp(-(np.array([-1.0, 0.0, 1.0]) ** 2) / (2.0 * alias_sigma**2))
    window = (window / window.sum()).astype(np.float32)
    kernel = ndimage.correlate1d(disk, window, axis=0, mode="mirror")
    kernel = ndimage.correlate1d(kernel, window, axis=1, mode="mirror")
    nz_r, nz_c = np.nonzero(kernel)
    half = int(max(np.abs(nz_r - 8).max(), np.abs(nz_c - 8).max()))
    return kernel[8 - half : 9 + half, 8 - half : 9 + half]


def _defocus_blur(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Per-channel correlation with the anti-aliased disk, border reflect-101 (spec)."""
    kernel = _defocus_kernel(*DEFOCUS_BLUR[severity - 1]).astype(np.float64)
    x = images / 255.0
    return _to_uint8(ndimage.correlate(x, kernel[None, :, :, None], mode="mirror"))


def _glass_blur(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Blur, local pixel moves, blur (spec: glass_blur; deviation 3 on the 'swap').

    The (h, w) loop stays sequential like the official one (rows, then columns, from 32-d
    down to d+1); each step moves one pixel in every image of the batch, with per-image
    offsets dx, dy drawn from [-d, d). Pixels are addressed by flat index.
    """
    sigma, d, passes = GLASS_BLUR[severity - 1]
    n = len(images)
    x = (_gaussian_hw(images / 255.0, sigma) * 255.0).astype(np.uint8)
    pixels = x.reshape(n * SIZE * SIZE, 3)
    positions = np.arange(SIZE - d, d, -1)
    hh, ww = np.meshgrid(positions, positions, indexing="ij")
    dst = (hh * SIZE + ww).reshape(-1, 1) + np.arange(n) * (SIZE * SIZE)  # (positions, N)
    offsets = rng.integers(-d, d, size=(passes, hh.size, 2, n))  # (dx, dy) per step and image
    src = dst + offsets[:, :, 1] * SIZE + offsets[:, :, 0]
    for p in range(passes):
        for k in range(hh.size):
            pixels[dst[k]] = pixels[src[p, k]]
    return _to_uint8(_gaussian_hw(x / 255.0, sigma))


def _motion_blur(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Motion blur at an angle uniform in [-45, 45] degrees (spec; deviation 2)."""
    radius, sigma = MOTION_BLUR[severity - 1]
    angles = rng.uniform(-45, 45, size=len(images))
    return _motion_blur_u8(images, radius, sigma, angles)


def _zoom_blur(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Average of the image and its centre zooms (spec: zoom_blur).

    ``np.arange(1, zmax, 0.01)`` is kept on purpose: its float steps include zmax itself for
    severities 1-2, as in the official code. Like the official code, each zoom is evaluated
    in float64, stored as float32 and summed in float32 (this decides how flat regions
    truncate); the result is bit-identical to it.
    """
    zooms = np.arange(1, ZOOM_BLUR[severity - 1], 0.01)
    x = np.ascontiguousarray((images / 255.0).astype(np.float32).transpose(1, 2, 0, 3))  # (H, W, N, C)
    x64 = x.astype(np.float64)
    scratch = (np.empty_like(x64), np.empty_like(x64), np.empty_like(x64))
    zoomed, total = np.empty_like(x), np.zeros_like(x)
    for zoom in zooms:
        np.copyto(zoomed, _clipped_zoom(x64, float(zoom), scratch), casting="same_kind")  # float64 -> float32
        total += zoomed
    out = (x + total) / np.float32(len(zooms) + 1)
    return _to_uint8(out.transpose(2, 0, 1, 3))
