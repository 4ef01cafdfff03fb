"""The digital corruptions of CIFAR-C (:mod:`dartlib.data.corruptions`) but JPEG: brightness,
contrast, elastic_transform (OpenCV's affine warp re-implemented) and pixelate, with their
per-severity constants. jpeg_compression is in :mod:`dartlib.data.corruptions`, beside
:func:`dartlib.data.corruptions.jpeg_round_trip`, which serves other modules too."""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage

from dartlib.data.corruption_kernels import SIZE, _bilinear, _hsv_to_rgb, _rgb_to_hsv, _to_uint8

# Per-severity constants (spec table), index = severity - 1.
BRIGHTNESS = (0.05, 0.1, 0.15, 0.2, 0.3)
CONTRAST = (0.75, 0.5, 0.4, 0.3, 0.15)
ELASTIC_TRANSFORM = tuple(
    (SIZE * a, SIZE * s, SIZE * d)
    for a, s, d in ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05), (0.1, 0.03, 0.03))
)
PIXELATE = (0.95, 0.9, 0.85, 0.75, 0.65)


def _brightness(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """V := clip(V + c, 0, 1) in HSV (spec: brightness)."""
    hsv = _rgb_to_hsv(images / 255.0)
    hsv[..., 2] = np.clip(hsv[..., 2] + BRIGHTNESS[severity - 1], 0, 1)
    return _to_uint8(_hsv_to_rgb(hsv))


def _contrast(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """(x - per-channel mean) * c + mean (spec: contrast)."""
    x = images / 255.0
    means = x.mean(axis=(1, 2), keepdims=True)
    return _to_uint8((x - means) * CONTRAST[severity - 1] + means)


def _affine_warp_reflect101(x: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``cv2.warpAffine`` of NHWC float32 images by the affine maps src -> dst, per image.

    OpenCV inverts the map, evaluates source coordinates in fixed point (1/1024, rounded,
    then floored to a 1/32-pixel grid), samples bilinearly with float32 weights and reflects
    out-of-range neighbours (BORDER_REFLECT_101). The same steps are done here.
    """
    homog = np.concatenate([src, np.ones((3, 1))], axis=1).astype(np.float64)
    fwd = np.swapaxes(np.linalg.solve(homog[None], dst.astype(np.float64)), 1, 2)  # (N, 2, 3)
    lin, shift = fwd[:, :, :2], fwd[:, :, 2]
    det = lin[:, 0, 0] * lin[:, 1, 1] - lin[:, 0, 1] * lin[:, 1, 0]
    det = np.where(det != 0, 1.0 / np.where(det != 0, det, 1.0), 0.0)
    inv = np.empty_like(lin)
    inv[:, 0, 0], inv[:, 1, 1] = lin[:, 1, 1] * det, lin[:, 0, 0] * det
    inv[:, 0, 1], inv[:, 1, 0] = -lin[:, 0, 1] * det, -lin[:, 1, 0] * det
    offset = -np.einsum("nij,nj->ni", inv, shift)
    pix = np.arange(SIZE, dtype=np.float64)

    def fixed(k: int) -> np.ndarray:
        base = np.rint((inv[:, k, 1, None] * pix + offset[:, k, None]) * 1024) + 16  # per row
        step = np.rint(inv[:, k, 0, None] * pix * 1024)  # per column
        return np.floor_divide(base[:, :, None] + step[:, None, :], 32)

    cols, rows = fixed(0) / 32.0, fixed(1) / 32.0
    return _bilinear(x, rows, cols, repeat_edge=False, dtype=np.float32).astype(np.float32)


def _elastic_transform(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Random affine warp, then smoothed random displacement fields (spec: elastic_transform)."""
    alpha, sigma, jitter = ELASTIC_TRANSFORM[severity - 1]
    n = len(images)
    x = images.astype(np.float32) / np.float32(255)
    centre, half = float(SIZE // 2), SIZE // 3
    src = np.array(
        [[centre + half, centre + half], [centre + half, centre - half], [centre - half, centre - half]],
        dtype=np.float32,
    )  # (x, y) control points, as OpenCV takes them
    dst = src + rng.uniform(-jitter, jitter, size=(n, 3, 2)).astype(np.float32)
    x = _affine_warp_reflect101(x, src, dst)
    noise = rng.uniform(-1, 1, size=(n, 2, SIZE, SIZE))
    fields = ndimage.gaussian_filter(noise, sigma=(0, 0, sigma, sigma), mode="reflect", truncate=3.0)
    fields = (fields * alpha).astype(np.float32)
    grid = np.arange(SIZE, dtype=np.float64)
    rows = grid[None, :, None] + fields[:, 1]
    cols = grid[None, None, :] + fields[:, 0]
    return _to_uint8(_bilinear(x, rows, cols, repeat_edge=True).astype(np.float32))


def _pixelate(images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """BOX down to int(32*c), BOX back up to 32 with Pillow (spec: pixelate).

    The batch is laid side by side as one 32 x 32N strip and resized in one call per
    direction. Pillow's BOX taps for output k of image n are those of output k of a single
    image shifted by 32n (sizes are exact multiples, and no tap of these scales sits on a
    filter edge), so the result is bit-identical to resizing image by image.
    """
    n = len(images)
    small = int(SIZE * PIXELATE[severity - 1])
    strip = Image.fromarray(np.ascontiguousarray(images.transpose(1, 0, 2, 3).reshape(SIZE, n * SIZE, 3)))
    strip = strip.resize((n * small, small), Image.Resampling.BOX)
    strip = strip.resize((n * SIZE, SIZE), Image.Resampling.BOX)
    return np.asarray(strip).reshape(SIZE, n, SIZE, 3).transpose(1, 0, 2, 3)
