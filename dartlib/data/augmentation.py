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
        # One affine sampling grid per image.
        area = torch.empty(n).uniform_(0.2, 1.0, generator=generator)
        log_ratio = torch.empty(n).uniform_(math.log(3 / 4), math.log(4 / 3), generator=generator)
        ratio = log_ratio.exp()
        sw = torch.sqrt(area * ratio).clamp(max=1.0)
        sh = torch.sqrt(area / ratio).clamp(max=1.0)
        cx = (torch.rand(n, generator=generator) * 2 - 1) * (1 - sw)
        cy = (torch.rand(n, generator=generator) * 2 - 1) * (1 - sh)
        theta = torch.zeros(n, 2, 3)
        theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sw, cx, sh, cy
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    raise ValueError(f"unknown augmentation {kind!r}; valid: {', '.join(AUGMENTATIONS)}")
