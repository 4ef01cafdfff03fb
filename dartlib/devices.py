"""Where the heavy computations run: ``$DART_DEVICE`` when set (e.g. ``cpu`` to keep a GPU
machine's results comparable with CPU ones), else the GPU when torch sees one, else the CPU.
``DART_TF32=0`` turns TensorFloat-32 off on the GPU (convolutions and matrix products in true
fp32), so that cells of a CPU-scale profile computed on a GPU agree with the CPU's."""

from __future__ import annotations

import os

import torch


def default_device() -> str:
    """``$DART_DEVICE``, else ``"cuda"`` when available, else ``"cpu"`` (``$DART_TF32`` applied)."""
    if os.environ.get("DART_TF32", "").strip() == "0":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    chosen = os.environ.get("DART_DEVICE", "").strip()
    if chosen:
        if chosen != "cpu" and not chosen.startswith("cuda"):
            raise ValueError(f"DART_DEVICE={chosen!r}; valid: cpu, cuda, cuda:<index>")
        if chosen.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"DART_DEVICE={chosen!r} but torch sees no GPU")
        return chosen
    return "cuda" if torch.cuda.is_available() else "cpu"
