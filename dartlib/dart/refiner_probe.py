"""Whether a saved refiner serves a given classifier: the probe of what the classifier computes
(f_theta0_bar's logits on a fixed batch of training images, :class:`Probe`), the revision of the
training code (:data:`INTERMEDIATE_REVISION`), both recorded in a refiner's metadata and compared
when it is read back (:func:`reusable`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dartlib.data.files import DamagedFileError
from dartlib.data.dataset import Dataset
from dartlib.models.backbones import frozen_bn_adapted
from dartlib.data.augmentation import to_tensor
from dartlib.models.checkpoints import load_weights


# The revision of the intermediate-training code (Algorithm 1, Algorithm 3): bumped whenever
# :mod:`dartlib.dart.refiner_training` trains a different g_phi from the same model, data and
# DartConfig, so that a refiner saved by the older code is not reused for the newer
# (:func:`reusable`).
# Saved in every refiner's metadata; it is not part of a refiner's file name
# (:func:`dartlib.dart.intermediate.refiner_path`), which stays a digest of the settings.
INTERMEDIATE_REVISION = "1"

PROBE_IMAGES = 16  # training images of the probe batch (:func:`model_probe`)


PROBE_SEED = 0  # which ones


# Two probes agree when every logit is within this fraction of the probe's largest |logit| (float
# noise of another device or kernel stays far below it; a changed layer or activation does not).
PROBE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Probe:
    """What a classifier computes, as DART sees it: the logits of its frozen BN-adapted copy
    f_theta0_bar (Section 3) on a fixed probe batch of :data:`PROBE_IMAGES` training images drawn
    with :data:`PROBE_SEED`, and their digest. Two models with the same weights and buffers but
    another forward (an activation, a layer's order) give other logits: a refiner trained for one
    is not reused for the other (:func:`reusable`)."""

    logits: torch.Tensor  # float32, on the CPU
    digest: str

    def agrees(self, logits: torch.Tensor) -> bool:
        """Whether ``logits`` (a saved probe's) are this probe's, within :data:`PROBE_TOLERANCE`."""
        if not isinstance(logits, torch.Tensor) or logits.shape != self.logits.shape:
            return False
        scale = float(self.logits.abs().max()) or 1.0
        return bool(torch.allclose(logits.float(), self.logits, rtol=0.0, atol=PROBE_TOLERANCE * scale))

    def meta(self) -> dict:
        """The entries a saved refiner's metadata holds for it (with the code revision)."""
        return {"probe_digest": self.digest, "probe_logits": self.logits, "probe_images": PROBE_IMAGES,
                "probe_seed": PROBE_SEED, "intermediate_revision": INTERMEDIATE_REVISION}


@torch.no_grad()
def model_probe(model: nn.Module, train: Dataset, *, device: str = "cpu") -> Probe:
    """The :class:`Probe` of ``model``: f_theta0_bar's logits on :data:`PROBE_IMAGES` images of
    ``train`` (chosen with :data:`PROBE_SEED`), computed on ``device`` in float32. The digest is
    sha256 over the logits rounded to 3 significant digits (an identifier; :meth:`Probe.agrees`
    decides with a tolerance)."""
    rng = np.random.default_rng(PROBE_SEED)
    idx = np.sort(rng.choice(len(train.labels), size=min(PROBE_IMAGES, len(train.labels)), replace=False))
    logits = frozen_bn_adapted(model).to(device)(to_tensor(train.images[idx]).to(device)).float().cpu()
    rounded = np.array([float(f"{v:.3g}") for v in logits.double().flatten().tolist()])
    digest = hashlib.sha256(json.dumps({"shape": list(logits.shape), "logits": rounded.tolist()}).encode()).hexdigest()
    return Probe(logits=logits, digest=digest[:16])


def saved_meta(path: Path) -> dict:
    """The metadata of the refiner saved at ``path`` (empty where it has none)."""
    return dict(load_weights(path, required=("module", "config")).get("meta") or {})


def reusable(path: Path, probe: Probe) -> bool:
    """Whether the refiner saved at ``path`` was trained for the model that ``probe`` describes, by
    this revision of the code (:data:`INTERMEDIATE_REVISION`): its file exists, its metadata holds
    the same revision and its probe logits agree with ``probe``'s. A refiner saved before the probe
    was recorded is not reusable (it is trained anew)."""
    if not path.is_file():
        return False
    try:
        meta = saved_meta(path)
    except DamagedFileError:
        return False
    return meta.get("intermediate_revision") == INTERMEDIATE_REVISION and probe.agrees(meta.get("probe_logits"))
