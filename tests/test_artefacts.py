"""The committed trained artefacts: listed, intact, and what the smoke notebooks use."""

import json

import pytest

from dartlib.models import artefacts


def test_every_committed_artefact_is_listed_with_its_sha256():
    assert artefacts.verify_manifest() == []


def test_manifest_states_provenance_of_each_file():
    manifest = json.loads(artefacts.MANIFEST.read_text())
    kinds = {e["kind"] for e in manifest["files"]}
    assert {"source", "refiner", "iabn"} <= kinds
    for entry in manifest["files"]:
        assert entry["train_digest"] and entry["dartlib_version"], entry["file"]
        assert entry["kind"] in ("source", "own-model") or entry["source_checkpoint"], entry["file"]
    assert manifest["total_bytes"] == sum(e["bytes"] for e in manifest["files"])


def test_smoke_source_model_is_committed():
    names = {e["file"] for e in json.loads(artefacts.MANIFEST.read_text())["files"]}
    assert "fmnist-small-cnn-smoke-seed0.pt" in names
    assert any(n.startswith("fmnist-small-cnn-smoke-seed0.dart-") for n in names)
    assert any(n.startswith("fmnist-small-cnn-smoke-seed0.iabn-") for n in names)


def test_a_damaged_artefact_is_named(tmp_path):
    source = artefacts.COMMITTED_DIR / "fmnist-small-cnn-smoke-seed0.pt"
    (tmp_path / source.name).write_bytes(source.read_bytes())
    artefacts.write_manifest(tmp_path)
    assert artefacts.verify_manifest(tmp_path) == []
    (tmp_path / source.name).write_bytes(source.read_bytes()[:-10])
    problems = artefacts.verify_manifest(tmp_path)
    assert len(problems) == 1 and source.name in problems[0] and "sha256 differs" in problems[0]


@pytest.mark.parametrize("committed, retrained, ok", [(89.07, 89.24, True), (89.07, 88.89, True), (89.07, 87.5, False)])
def test_retraining_tolerance(committed, retrained, ok):
    # 3 binomial SE over 10,000 images at 89%: 0.936 points; the kernel variants measured 88.89 to 89.24
    verdict, tol = artefacts.retrained_within_tolerance(committed=committed, retrained=retrained, n=10000)
    assert verdict is ok and tol == pytest.approx(0.936, abs=1e-3)


def test_every_committed_artefact_loads_without_running_code():
    """Checkpoints hold tensors and plain values only: ``torch.load(weights_only=True)`` reads each."""
    import torch

    for path in artefacts.committed_files():
        blob = torch.load(path, map_location="cpu", weights_only=True)
        assert isinstance(blob, dict), path.name


def test_weights_digest_follows_the_weights_in_any_dtype():
    import torch
    from torch import nn

    from dartlib.models.artefacts import weights_digest

    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    b = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    b.load_state_dict(a.state_dict())
    assert weights_digest(a) == weights_digest(b)
    with torch.no_grad():
        b[0].weight[0, 0] += 1e-6
    assert weights_digest(a) != weights_digest(b)
    half = weights_digest(a.to(torch.bfloat16))  # no numpy dtype for bf16: hashed as raw bytes
    assert len(half) == 64 and half != weights_digest(b)
