"""Checkpoints checked against their metadata, their name and what the profile asks for before any
weight is used, and the committed-artefact manifest read strictly. The fixtures are real files in
the real formats: the committed checkpoints copied into a temporary data root, checkpoints written
by ``save_source``, MANIFEST.json copied and damaged."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from dartlib import cli
from dartlib.data.files import DamagedFileError
from dartlib.models import artefacts
from dartlib.models.backbones import build
from dartlib.models.checkpoints import CheckpointMismatchError, load_checkpoint, save_source
from dartlib.paths import REPO_ROOT

COMMITTED = REPO_ROOT / "data" / "checkpoints"
SMOKE_NAME = "fmnist-small-cnn-smoke-seed0.pt"


@pytest.fixture()
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    return tmp_path


def test_checkpoint_of_another_architecture_in_the_smoke_models_place(data_root):
    """The cpu profile's ResNet-26 (w8) copied over the smoke model: it loaded and failed later with
    hundreds of keys in a traceback; now one line names the file and what it holds."""
    target = data_root / "checkpoints" / SMOKE_NAME
    shutil.copy(COMMITTED / "cifar10-resnet26-w8-cpu-seed0.pt", target)
    with pytest.raises(CheckpointMismatchError, match=rf"{SMOKE_NAME} does not match: it holds resnet26-w8 trained on "
                                                      r"cifar10 \(recipe cpu, seed 0\), which would be named "
                                                      r"cifar10-resnet26-w8-cpu-seed0.pt"):
        load_checkpoint(target)


def test_cli_names_the_misplaced_checkpoint_in_one_line(data_root, capsys):
    shutil.copy(COMMITTED / "cifar10-resnet26-w8-cpu-seed0.pt", data_root / "checkpoints" / SMOKE_NAME)
    assert cli.main(["bench", "dart", "--profile", "smoke", "--steps", "1", "--repeats", "1"]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"error: {data_root / 'checkpoints' / SMOKE_NAME} does not match: it holds resnet26-w8")


def test_weights_of_the_wrong_shape_name_the_file_and_the_weight(tmp_path):
    """A 3-class small CNN whose metadata says 10 classes: no size-mismatch traceback."""
    path = save_source(build("small-cnn", num_classes=3), {"arch": "small-cnn", "num_classes": 10}, tmp_path / "m.pt")
    with pytest.raises(CheckpointMismatchError, match=r"m\.pt does not match: weight linear\.weight has shape "
                                                      r"\[3.*small-cnn with 10 classes \(as its metadata says\) needs \[10"):
        load_checkpoint(path)


def test_weights_of_another_architecture_under_its_metadata(tmp_path):
    path = save_source(build("resnet26-w8", num_classes=10), {"arch": "small-cnn", "num_classes": 10}, tmp_path / "m.pt")
    with pytest.raises(CheckpointMismatchError, match=r"m\.pt does not match: its weights are not those of small-cnn "
                                                      r"with 10 classes .*entries missing.*unexpected"):
        load_checkpoint(path)


@pytest.mark.parametrize("meta, message", [
    ({"arch": "resnet62", "num_classes": 10}, "its metadata names architecture 'resnet62', not one of resnet26"),
    ({"arch": "small-cnn", "num_classes": 0}, "its metadata gives num_classes 0, not a positive integer"),
    ({"arch": "small-cnn", "num_classes": "10"}, "its metadata gives num_classes '10'"),
])
def test_unusable_metadata_is_named(tmp_path, meta, message):
    path = tmp_path / "m.pt"
    torch.save({"model": build("small-cnn", num_classes=10).state_dict(), "meta": meta}, path)
    with pytest.raises(CheckpointMismatchError, match=message):
        load_checkpoint(path)


def test_what_the_profile_asks_for_is_checked(tmp_path):
    path = save_source(build("small-cnn", num_classes=10), {"arch": "small-cnn", "num_classes": 10, "dataset": "fmnist"},
                       tmp_path / "m.pt")
    with pytest.raises(CheckpointMismatchError, match="its metadata has dataset 'fmnist' where 'cifar10' is asked for"):
        load_checkpoint(path, expect={"arch": "small-cnn", "dataset": "cifar10"})
    load_checkpoint(path, expect={"arch": "small-cnn", "dataset": "fmnist"})  # the right one loads


def test_committed_checkpoints_pass_the_checks():
    for name in ("fmnist-small-cnn-smoke-seed0.pt", "cifar10-resnet26-w8-cpu-seed0.pt"):
        load_checkpoint(COMMITTED / name)


# --------------------------------------------------------------------------- MANIFEST.json


@pytest.fixture()
def manifest_dir(tmp_path):
    """A copy of the committed manifest and the smoke model, the manifest cut to that one file."""
    shutil.copy(COMMITTED / SMOKE_NAME, tmp_path / SMOKE_NAME)
    manifest = json.loads((COMMITTED / "MANIFEST.json").read_text())
    manifest["files"] = [e for e in manifest["files"] if e["file"] == SMOKE_NAME]
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    assert artefacts.verify_manifest(tmp_path) == []
    return tmp_path


def test_invalid_manifest_names_the_file_and_the_place(manifest_dir):
    path = manifest_dir / "MANIFEST.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # cut short
    (problem,) = artefacts.verify_manifest(manifest_dir)
    assert problem.startswith(f"{path} is damaged: not valid JSON at line ")
    assert "python -m dartlib artefacts manifest" in problem


def test_manifest_entry_without_a_sha256_is_named(manifest_dir):
    path = manifest_dir / "MANIFEST.json"
    manifest = json.loads(path.read_text())
    del manifest["files"][0]["sha256"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(DamagedFileError, match=r"MANIFEST\.json is damaged: entry 1 of `files` lacks a file name or a "
                                               r"64-digit sha256"):
        artefacts.read_manifest(path)


def test_cli_artefacts_verify_on_an_invalid_manifest_in_one_line(manifest_dir, monkeypatch, capsys):
    (manifest_dir / "MANIFEST.json").write_text('{"files": [')
    monkeypatch.setattr(artefacts.verify_manifest, "__defaults__", (manifest_dir,))
    assert cli.main(["artefacts", "verify"]) == 4  # a damaged file (docs/cli.md)
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {manifest_dir / 'MANIFEST.json'} is damaged: not valid JSON at line 1 column 12 "
                   f"(Expecting value). Remedy: restore it with `git checkout -- {manifest_dir / 'MANIFEST.json'}`, or "
                   "rewrite it from the files with `python -m dartlib artefacts manifest`")
