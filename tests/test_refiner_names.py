"""Every committed trained file is what its name says: the name recomputed from the settings stored
inside it (a refiner's config, an IABN copy's recipe, a source model's metadata) is its own name,
and the manifest records the same settings. No committed name may change: a change to how a name
is derived (:func:`dartlib.dart.intermediate.refiner_path`, :func:`dartlib.tta.note.iabn_path`,
:func:`dartlib.models.checkpoints.checkpoint_path`) fails here, file by file."""

from __future__ import annotations

import re

import pytest

from dartlib.dart.intermediate import refiner_path
from dartlib.dart.refiner import DartConfig
from dartlib.models.artefacts import COMMITTED_DIR, read_manifest
from dartlib.models.checkpoints import checkpoint_path, load_weights
from dartlib.tta.note import iabn_path

# <source stem>.<variant>[-<tag>]-<12 hex digits>.pt, where <source stem>.pt is the source checkpoint
REFINER_NAME = re.compile(r"^(?P<stem>.+-seed\d+)\.(?P<middle>dart(-[a-z0-9-]+)?)-(?P<key>[0-9a-f]{12})\.pt$")
IABN_NAME = re.compile(r"^(?P<stem>.+-seed\d+)\.iabn-k[0-9.]+-e\d+(-pc\d+)?\.pt$")

REFINERS = sorted([*COMMITTED_DIR.glob("*.dart-*.pt")])
IABN_COPIES = sorted(COMMITTED_DIR.glob("*.iabn-*.pt"))
SOURCES = sorted(p for p in COMMITTED_DIR.glob("*-seed*.pt") if p.name.count(".") == 1)
MANIFEST = {entry["file"]: entry for entry in read_manifest()["files"]}


def test_the_committed_files_are_found():
    assert len(REFINERS) >= 70 and len(IABN_COPIES) >= 3 and len(SOURCES) >= 3
    assert not [p for p in REFINERS if p.name.endswith(".partial.pt")]
    # notebook 16's own model and its g_phi live in own-model/, named by the digest of their training data
    assert {p.name for p in [*REFINERS, *IABN_COPIES, *SOURCES]} == {n for n in MANIFEST if not n.startswith("own-model/")}


@pytest.mark.parametrize("path", REFINERS, ids=lambda p: p.name)
def test_a_refiner_derives_to_its_own_name(path):
    match = REFINER_NAME.match(path.name)
    assert match, f"{path.name} is not <checkpoint stem>.<variant>[-<tag>]-<key>.pt"
    blob = load_weights(path, required=("config", "meta"))
    config = DartConfig(**blob["config"])
    checkpoint = path.with_name(f"{match['stem']}.pt")
    assert checkpoint.is_file() and blob["meta"]["source_checkpoint"] == checkpoint.name
    tag = match["middle"].removeprefix(config.variant).removeprefix("-")
    assert match["middle"] == config.variant + (f"-{tag}" if tag else "")
    assert refiner_path(checkpoint, config, tag=tag) == path
    assert MANIFEST[path.name]["config"] == blob["config"]


@pytest.mark.parametrize("path", IABN_COPIES, ids=lambda p: p.name)
def test_an_iabn_copy_derives_to_its_own_name(path):
    match = IABN_NAME.match(path.name)
    assert match, f"{path.name} is not <checkpoint stem>.iabn-k<k>-e<epochs>[-pc<n>].pt"
    meta = load_weights(path, required=("model", "meta"))["meta"]
    checkpoint = path.with_name(f"{match['stem']}.pt")
    assert checkpoint.is_file() and meta["source_checkpoint"] == checkpoint.name
    assert iabn_path(checkpoint, epochs=meta["epochs"], k=meta["k"], per_class=meta["per_class"]) == path
    assert len(meta["log"]) == meta["epochs"]
    recipe = MANIFEST[path.name]["recipe"]
    assert (recipe["epochs"], recipe["k"], recipe["per_class"]) == (meta["epochs"], meta["k"], meta["per_class"])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_a_source_checkpoint_derives_to_its_own_name(path):
    meta = load_weights(path, required=("model", "meta"))["meta"]
    named = checkpoint_path(dataset=meta["dataset"], arch=meta["arch"], recipe=meta["recipe"], seed=meta["seed"],
                            split=meta.get("train_split", "train"), directory=path.parent)
    assert named == path
    entry = MANIFEST[path.name]
    assert (entry["arch"], entry["dataset"], entry["recipe"]) == (meta["arch"], meta["dataset"], meta["recipe"])
