"""Images as tensors and the random views drawn from them: the source training recipes'
augmentations (Appendix A) and the augmented test views of MEMO and ROID."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

AUGMENTATIONS = ("flip", "crop-flip", "rrc-flip")


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 NHWC -> float NCHW in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float().div_(255.0)


def images_to_float(x: torch.Tensor) -> torch.Tensor:
    """uint8 NHWC images already on a device -> float NCHW in [0, 1] there (the values of
    :func:`to_tensor`); on a GPU the result stays channels-last in memory."""
    out = x.permute(0, 3, 1, 2).float().div_(255.0)
    return out if out.is_cuda else out.contiguous()


def augment_resident(x: torch.Tensor, *, kind: str, generator: torch.Generator) -> torch.Tensor:
    """:func:`augment` for a batch of uint8 NHWC images resident on a device (the training set on
    a GPU), done there: the same distribution of views, drawn from ``generator`` (on that device)
    in another order, so a resident run and a host-side run see different views. ``crop-flip`` is
    one gather from the padded images."""
    n, h, w, _ = x.shape
    dev = x.device
    flip = torch.rand(n, generator=generator, device=dev) < 0.5
    if kind in ("flip", "crop-flip"):
        pad = 4 if kind == "crop-flip" else 0
        dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        padded = F.pad(x, (0, 0, pad, pad, pad, pad)) if pad else x
        ar_h, ar_w = torch.arange(h, device=dev), torch.arange(w, device=dev)
        rows = dy[:, None] + ar_h
        cols = torch.where(flip[:, None], dx[:, None] + (w - 1) - ar_w, dx[:, None] + ar_w)
        return images_to_float(padded[torch.arange(n, device=dev)[:, None, None], rows[:, :, None], cols[:, None, :]])
    if kind == "rrc-flip":
        xf = images_to_float(x)
        return _random_resized_crop(torch.where(flip[:, None, None, None], xf.flip(3), xf), generator=generator)
    raise ValueError(f"unknown augmentation {kind!r}; valid: {', '.join(AUGMENTATIONS)}")


def _random_resized_crop(x: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """RandomResizedCrop(scale=(0.2, 1), ratio=(3/4, 4/3)) of every image of ``x`` (NCHW), on its
    device: one affine sampling grid per image."""
    n, dev = x.shape[0], x.device
    area = torch.empty(n, device=dev).uniform_(0.2, 1.0, generator=generator)
    log_ratio = torch.empty(n, device=dev).uniform_(math.log(3 / 4), math.log(4 / 3), generator=generator)
    ratio = log_ratio.exp()
    sw = torch.sqrt(area * ratio).clamp(max=1.0)
    sh = torch.sqrt(area / ratio).clamp(max=1.0)
    cx = (torch.rand(n, generator=generator, device=dev) * 2 - 1) * (1 - sw)
    cy = (torch.rand(n, generator=generator, device=dev) * 2 - 1) * (1 - sh)
    theta = torch.zeros(n, 2, 3, device=dev)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sw, cx, sh, cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def augment(x: torch.Tensor, *, kind: str, generator: torch.Generator) -> torch.Tensor:
    """One random view of every image of the CPU batch ``x`` (NCHW), drawn from ``generator``:
    a horizontal flip with probability 1/2, then for ``crop-flip`` a random 32-pixel crop of the
    4-pixel zero-padded image, for ``rrc-flip`` RandomResizedCrop(scale=(0.2, 1), ratio=(3/4, 4/3))."""
    n, _, h, w = x.shape
    flip = torch.rand(n, generator=generator) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    if kind == "flip":
        return x
    if kind == "crop-flip":
        padded = F.pad(x, (4, 4, 4, 4))
        dy = torch.randint(0, 9, (n,), generator=generator)
        dx = torch.randint(0, 9, (n,), generator=generator)
        rows = (dy[:, None] + torch.arange(h))[:, None, :, None].expand(n, 3, h, w + 8)
        x = padded.gather(2, rows)
        cols = (dx[:, None] + torch.arange(w))[:, None, None, :].expand(n, 3, h, w)
        return x.gather(3, cols)
    if kind == "rrc-flip":
        return _random_resized_crop(x, generator=generator)
    raise ValueError(f"unknown augmentation {kind!r}; valid: {', '.join(AUGMENTATIONS)}")


def _hsv_shift_hue(x: torch.Tensor, shift: float) -> torch.Tensor:
    """Rotate the hue of RGB images in [0, 1] by ``shift`` (a fraction of the colour circle)."""
    r, g, b = x.unbind(1)
    mx, _ = x.max(1)
    mn, _ = x.min(1)
    delta = mx - mn
    safe = delta.clamp_min(1e-12)
    h = torch.where(mx == r, ((g - b) / safe) % 6, torch.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4)) / 6
    h = torch.where(delta > 0, h, torch.zeros_like(h))
    s = torch.where(mx > 0, delta / mx.clamp_min(1e-12), torch.zeros_like(mx))
    h = (h + shift) % 1.0
    k = (torch.tensor([5.0, 3.0, 1.0], device=x.device)[None, :, None, None] + 6 * h[:, None]) % 6
    return mx[:, None] - mx[:, None] * s[:, None] * (torch.minimum(k, 4 - k).clamp(0, 1))


def cotta_view(x: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """ROID's augmented view (the official ``get_tta_transforms(padding_mode="reflect",
    cotta_augs=False)``), one draw of parameters for the whole batch as the reference applies it to
    the batch tensor: colour jitter in random order (brightness 0.6-1.4, contrast 0.7-1.3,
    saturation 0.5-1.5, hue +-0.06, gamma 0.7-1.3), reflect padding by half the image size, a
    random affine map (rotation +-15 degrees, translation 1/16, scale 0.9-1.1, bilinear, fill 0),
    the centre crop and a horizontal flip with probability 1/2, clipped to [0, 1]. Any image size;
    1 or 3 channels (on 1 channel saturation and hue change nothing, as in torchvision)."""
    def uniform(lo: float, hi: float) -> float:
        return float(torch.empty(1).uniform_(lo, hi, generator=generator))

    _check_channels(x, "ROID's augmented view")
    grey_image = x.shape[1] == 1  # as torchvision: saturation and hue leave a 1-channel image as it is
    x = x.clamp(0, 1)
    for op in torch.randperm(5, generator=generator).tolist():
        gray = x if grey_image else (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2])[:, None]
        if op == 0:
            x = (x * uniform(0.6, 1.4)).clamp(0, 1)
        elif op == 1:
            f = uniform(0.7, 1.3)
            x = (f * x + (1 - f) * gray.mean((2, 3), keepdim=True)).clamp(0, 1)
        elif op == 2:
            f = uniform(0.5, 1.5)
            x = x if grey_image else (f * x + (1 - f) * gray).clamp(0, 1)
        elif op == 3:
            shift = uniform(-0.06, 0.06)
            x = x if grey_image else _hsv_shift_hue(x, shift)
        else:
            x = x.clamp(1e-8, 1.0) ** uniform(0.7, 1.3)
    n, _, h, w = x.shape
    padded = F.pad(x, (w // 2, w // 2, h // 2, h // 2), mode="reflect")
    angle, scale = math.radians(uniform(-15, 15)), uniform(0.9, 1.1)
    size = padded.shape[-1]
    # torchvision rounds the translation to whole pixels of the padded image
    tx, ty = (round(uniform(-size / 16, size / 16)) * 2 / size for _ in range(2))
    cos, sin = math.cos(angle) / scale, math.sin(angle) / scale
    theta = torch.tensor([[cos, -sin, -(cos * tx - sin * ty)], [sin, cos, -(sin * tx + cos * ty)]],
                         dtype=x.dtype).expand(n, 2, 3)
    grid = F.affine_grid(theta, list(padded.shape), align_corners=False)
    warped = F.grid_sample(padded, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    x = warped[:, :, h // 2:h // 2 + h, w // 2:w // 2 + w]
    if float(torch.rand(1, generator=generator)) < 0.5:
        x = x.flip(3)
    return x.clamp(0, 1)


def _check_channels(x: torch.Tensor, what: str) -> None:
    """Refuse a batch that is not N x C x H x W with 1 or 3 channels, saying so."""
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"{what} takes a float batch N x C x H x W with 1 (grey) or 3 (RGB) channels in [0, 1], "
                         f"got shape {tuple(x.shape)}: pass images channels-first (x.permute(0, 3, 1, 2)), or use a "
                         "method without augmented views (tent, sar, ...) for other channel counts")


def _augmix_ops(rng: np.random.Generator, *, size: int = 32, fill: int | tuple[int, ...] = (128, 128, 128)):
    """AugMix's operations at severity 1 as MEMO's CIFAR code sets them (``third_party.py``, after
    google-research/augmix): each draws its level from U(0.1, 1) and a random sign. ``size``: the
    image's width (translations reach a third of it; MEMO's CIFAR value 32); ``fill``: the grey of
    uncovered pixels (one value for a 1-channel image)."""
    from PIL import Image, ImageOps

    def level(maxval: float) -> float:
        return rng.uniform(0.1, 1.0) * maxval / 10

    def sign() -> int:
        return -1 if rng.uniform() > 0.5 else 1

    def affine(img, coeffs):
        return img.transform(img.size, Image.AFFINE, coeffs, resample=Image.BILINEAR, fillcolor=fill)

    return [
        lambda img: ImageOps.autocontrast(img),
        lambda img: ImageOps.equalize(img),
        lambda img: img.rotate(sign() * int(level(30)), resample=Image.BILINEAR, fillcolor=fill),
        lambda img: ImageOps.solarize(img, 256 - int(level(256))),
        lambda img: affine(img, (1, sign() * level(0.3), 0, 0, 1, 0)),
        lambda img: affine(img, (1, 0, 0, sign() * level(0.3), 1, 0)),
        lambda img: affine(img, (1, 0, sign() * int(level(size / 3)), 0, 1, 0)),
        lambda img: affine(img, (1, 0, 0, 0, 1, sign() * int(level(size / 3)))),
        lambda img: ImageOps.posterize(img, 4 - int(level(4))),
    ]


def augmix_views(x: torch.Tensor, *, n_views: int, generator: torch.Generator) -> torch.Tensor:
    """``n_views`` AugMix views (V, B, C, H, W) of every image of the CPU batch ``x``, as MEMO's
    CIFAR code draws them (``_augmix_aug``): a random 32-pixel crop of the 4-pixel zero-padded
    image and a horizontal flip with probability 1/2; then three chains of 1-3 random AugMix
    operations mixed with Dirichlet(1, 1, 1) weights, and that mixture mixed with the cropped
    image by m ~ Beta(1, 1). Mixing happens on [0, 1] pixels: MEMO's normalisation is affine, so
    mixing after it gives the same image. Any image size (translations reach a third of the width,
    MEMO's 32-pixel value on CIFAR); 1 or 3 channels."""
    from PIL import Image

    _check_channels(x, "MEMO's AugMix views")
    grey_image = x.shape[1] == 1
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    ops = _augmix_ops(rng, size=x.shape[-1], fill=128 if grey_image else (128, 128, 128))
    pixels = (x.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    views = np.empty((n_views, *pixels.shape), dtype=np.float32)
    for v in range(n_views):
        for i, image in enumerate(pixels):
            dy, dx = rng.integers(0, 9, size=2)
            crop = np.pad(image, ((4, 4), (4, 4), (0, 0)))[dy:dy + image.shape[0], dx:dx + image.shape[1]]
            if rng.uniform() < 0.5:
                crop = crop[:, ::-1]
            img = Image.fromarray(np.ascontiguousarray(crop[..., 0] if grey_image else crop))
            weights, m = rng.dirichlet([1.0, 1.0, 1.0]), rng.beta(1.0, 1.0)
            mix = np.zeros(crop.shape, dtype=np.float32)
            for weight in weights:
                aug = img
                for _ in range(rng.integers(1, 4)):
                    aug = ops[rng.integers(len(ops))](aug)
                mix += weight * np.asarray(aug, dtype=np.float32).reshape(crop.shape)
            views[v, i] = m * crop + (1 - m) * mix
    return torch.from_numpy(views / 255.0).permute(0, 1, 4, 2, 3).contiguous()
