"""Where the heavy computations run, and how: ``$DART_DEVICE`` when set (e.g. ``cpu`` to keep a GPU
machine's results comparable with CPU ones), else the GPU when torch sees one, else the CPU.

On a GPU the standard paths work device-resident (:func:`resident`): source training, g_phi's
intermediate training and the test-time cells keep their images on the GPU as uint8, augment and
count there, and read the device back once per epoch or cell, not per step. The backbone's
forwards run in bfloat16 autocast, channels-last, unless ``DART_PRECISION=fp32``
(:func:`precision`); ``DART_TF32=0`` also turns TensorFloat-32 off (convolutions and matrix products
in true fp32), so that cells of a CPU-scale profile computed on a GPU agree with the CPU's. On the
CPU every path is the one it always was: float32, host-side data, one batch at a time.
"""

from __future__ import annotations

import torch

from dartlib.environment import PRECISIONS, setting  # noqa: F401 (PRECISIONS: named here too)


def default_device() -> str:
    """``$DART_DEVICE``, else ``"cuda"`` when available, else ``"cpu"`` (``$DART_TF32`` applied)."""
    if setting("DART_TF32") == "0":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    chosen = setting("DART_DEVICE")
    if chosen:
        return chosen
    return "cuda" if torch.cuda.is_available() else "cpu"


def resident(device: str | torch.device) -> bool:
    """Whether the device-resident ways of working apply on ``device``: on a GPU, not on the CPU."""
    return str(device).startswith("cuda")


def precision(device: str | torch.device) -> str:
    """The backbone's forward precision on ``device``: ``"bf16"`` on a GPU unless
    ``$DART_PRECISION`` is ``fp32``; always ``"fp32"`` on the CPU."""
    chosen = setting("DART_PRECISION") or "bf16"
    return chosen if resident(device) else "fp32"


def autocast(device: str | torch.device):
    """bfloat16 autocast where :func:`precision` says bf16 on a GPU; else nothing."""
    enabled = resident(device) and precision(device) == "bf16"
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled)
