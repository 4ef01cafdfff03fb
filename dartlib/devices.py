"""Where the heavy computations run: ``$DART_DEVICE`` when set (e.g. ``cpu`` to keep a GPU
machine's results comparable with CPU ones), else the GPU when torch sees one, else the CPU."""

from __future__ import annotations

import os

import torch


def default_device() -> str:
    """``$DART_DEVICE``, else ``"cuda"`` when available, else ``"cpu"``."""
    chosen = os.environ.get("DART_DEVICE", "").strip()
    if chosen:
        if chosen != "cpu" and not chosen.startswith("cuda"):
            raise ValueError(f"DART_DEVICE={chosen!r}; valid: cpu, cuda, cuda:<index>")
        if chosen.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"DART_DEVICE={chosen!r} but torch sees no GPU")
        return chosen
    return "cuda" if torch.cuda.is_available() else "cpu"
