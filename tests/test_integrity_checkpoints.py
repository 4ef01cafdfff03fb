"""A source checkpoint and notebook 16's own model are what their names and MANIFEST.json say, or they
are refused and set aside (issue 62, item 1). Real files: the committed smoke and cpu models copied
into temporary folders with the committed manifest."""

from __future__ import annotations

import shutil

import pytest
import torch

from dartlib import cli
from dartlib.data import files
from dartlib.data.files import DamagedFileError
from dartlib.models.artefacts import COMMITTED_DIR
from dartlib.models.checkpoints import CheckpointMismatchError, load_checkpoint, load_weights, save_weights

SMOKE = "fmnist-small-cnn-smoke-seed0.pt"
W8 = "cifar10-resnet26-w8-cpu-seed0.pt"


@pytest.fixture()
def data_root(tmp_path, monkeypatch):
    """A data root whose checkpoints/ holds the smoke model, the w8 model and the committed manifest."""
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in (SMOKE, W8, "MANIFEST.json"):
        shutil.copy(COMMITTED_DIR / name, folder / name)
    return folder


def _scaled(path) -> None:
    """The weights scaled by 1.5, the metadata (and so the name) kept: only the manifest can tell."""
    blob = load_weights(path)
    blob["model"] = {k: v * 1.5 if v.is_floating_point() else v for k, v in blob["model"].items()}
    save_weights(blob, path=path)


def test_a_source_model_under_another_name_is_set_aside(data_root):
    """Unlisted (no manifest), the file's own metadata gives it away; listed, the manifest does first."""
    target = data_root / SMOKE
    shutil.copy(data_root / W8, target)
    with pytest.raises(DamagedFileError, match=rf"{SMOKE} is damaged: its sha256 differs from the one MANIFEST"):
        load_checkpoint(target)
    (data_root / "MANIFEST.json").unlink()
    next(data_root.glob(f"{SMOKE}.refused-*")).rename(target)
    with pytest.raises(CheckpointMismatchError, match=rf"{SMOKE} does not match: it holds resnet26-w8 .* would be "
                                                      rf"named {W8}; set aside as {SMOKE}\.refused-\d+-[0-9a-f]{{8}}"):
        load_checkpoint(target)
    assert not target.exists()
    (aside,) = data_root.glob(f"{SMOKE}.refused-*")
    assert aside.read_bytes() == (COMMITTED_DIR / W8).read_bytes()


def test_a_source_model_edited_under_its_own_name_is_refused_by_the_manifest(data_root):
    path = data_root / SMOKE
    load_checkpoint(path)  # intact: it loads (and is hashed once)
    _scaled(path)
    with pytest.raises(DamagedFileError, match=rf"{SMOKE} is damaged: its sha256 differs from the one MANIFEST\.json "
                                               rf"records for it .*; set aside as {SMOKE}\.refused-") as err:
        load_checkpoint(path)
    assert not path.exists() and len(list(data_root.glob(f"{SMOKE}.refused-*"))) == 1
    assert "git checkout --" in err.value.remedy and "artefacts manifest" in err.value.remedy


def test_a_model_not_what_the_caller_asks_for_is_left_in_place(data_root):
    path = data_root / SMOKE
    with pytest.raises(CheckpointMismatchError, match="its metadata has dataset 'fmnist' where 'cifar10' is asked for"):
        load_checkpoint(path, expect={"dataset": "cifar10"})
    assert path.is_file() and not list(data_root.glob("*.refused-*"))


def test_a_file_is_hashed_once_per_process_until_it_changes(data_root, monkeypatch):
    calls = []
    real = files.sha256_bytes_of
    monkeypatch.setattr(files, "sha256_bytes_of", lambda path: calls.append(path.name) or real(path))
    path = data_root / W8
    for _ in range(3):
        load_checkpoint(path)
    assert calls == [W8]
    _scaled(path)  # a new file under the name (a rename over it): a new inode and change time
    with pytest.raises(DamagedFileError, match="sha256 differs"):
        load_checkpoint(path)
    assert calls == [W8, W8]


def test_cli_refuses_an_edited_source_model_in_one_line(data_root, capsys):
    _scaled(data_root / SMOKE)
    assert cli.main(["bench", "dart", "--profile", "smoke", "--steps", "1", "--repeats", "1"]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"error: {data_root / SMOKE} is damaged: its sha256 differs from the one MANIFEST.json")
    assert not (data_root / SMOKE).exists()


# --------------------------------------------------------------------------- notebook 16's own model


@pytest.fixture(scope="module")
def smoke_training():
    from dartlib.data import load
    from dartlib.data.dataset import DataMissingError
    from dartlib.profiles import load_profile
    from dartlib.studies import own_model

    try:
        train = load("fmnist", split="train")
    except DataMissingError as err:
        pytest.skip(f"Fashion-MNIST is absent: {err}")
    smoke = load_profile("smoke")
    images, labels = own_model.training_subset(train, count=smoke["own_train_images"], seed=smoke["seed"])
    return images, labels, {"num_classes": train.num_classes, "seed": smoke["seed"],
                            "epochs": smoke["own_train_epochs"], "device": "cpu"}


@pytest.fixture()
def own_dir(tmp_path):
    """``<tmp>/MANIFEST.json`` and ``<tmp>/own-model/<the committed model>``, as in data/checkpoints/."""
    shutil.copy(COMMITTED_DIR / "MANIFEST.json", tmp_path / "MANIFEST.json")
    shutil.copytree(COMMITTED_DIR / "own-model", tmp_path / "own-model")
    return tmp_path / "own-model"


def test_the_own_model_under_another_recipes_name_is_refused(smoke_training, own_dir):
    from dartlib.studies import own_model

    images, labels, settings = smoke_training
    model, meta = own_model.load_or_train_briefly(images, labels, directory=own_dir, **settings)
    assert meta["reused"]
    longer = {**settings, "epochs": settings["epochs"] + 1}
    key = own_model.training_key(images, labels, num_classes=longer["num_classes"], seed=longer["seed"],
                                 epochs=longer["epochs"], batch_size=64, lr=1e-3)
    other = own_dir / f"resnet18-{key}.pt"
    shutil.copy(meta["path"], other)
    with pytest.raises(DamagedFileError, match=rf"{other.name} is damaged: it holds another model: epochs 1 where the "
                                               r"name asks for 2; set aside as "):
        own_model.load_or_train_briefly(images, labels, directory=own_dir, **longer)
    assert not other.exists()


def test_the_committed_own_model_edited_is_refused_by_the_manifest_above_its_folder(smoke_training, own_dir):
    from dartlib.studies import own_model

    images, labels, settings = smoke_training
    (path,) = own_dir.glob("resnet18-*.pt")
    blob = load_weights(path)
    blob["state"] = {k: v * 2 if v.is_floating_point() else v for k, v in blob["state"].items()}
    torch.save(blob, path)
    with pytest.raises(DamagedFileError, match=r"resnet18-.*\.pt is damaged: its sha256 differs from the one "
                                               r"MANIFEST\.json records"):
        own_model.load_or_train_briefly(images, labels, directory=own_dir, **settings)
    assert not path.exists()


# --------------------------------------------------------------------------- artefacts verify's documented statuses


def _documented_statuses() -> dict[int, str]:
    from dartlib.paths import REPO_ROOT

    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    table = text.split("<!-- artefacts-verify-statuses -->")[1].split("<!-- /artefacts-verify-statuses -->")[0]
    rows = [line.split("|")[1:3] for line in table.strip().splitlines()[2:]]
    return {int(status): when.strip() for status, when in rows}


def test_artefacts_verify_exits_with_the_documented_statuses(tmp_path, monkeypatch, capsys):
    """Each situation the docs name, made real in a copy of the smoke files: the status returned is
    the one docs/cli.md's table gives for it."""
    import json

    from dartlib.models import artefacts

    documented = _documented_statuses()
    assert sorted(documented) == [0, 1, 3, 4]
    refiners = sorted(COMMITTED_DIR.glob("fmnist-small-cnn-smoke-seed0.dart-*.pt"))[:2]
    for path in [COMMITTED_DIR / SMOKE, *refiners]:
        shutil.copy(path, tmp_path / path.name)
    manifest = json.loads((COMMITTED_DIR / "MANIFEST.json").read_text())
    manifest["files"] = [e for e in manifest["files"] if e["file"] in {SMOKE, refiners[0].name}]
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(artefacts.verify_manifest, "__defaults__", (tmp_path,))

    def status() -> int:
        code = cli.main(["artefacts", "verify"])
        capsys.readouterr()
        return code

    assert status() == 1 and "not list" in documented[1]  # the second refiner is not listed
    (tmp_path / refiners[1].name).unlink()
    assert status() == 0 and "every listed file present" in documented[0]
    (tmp_path / refiners[0].name).unlink()
    assert status() == 3 and "absent" in documented[3]
    _scaled(tmp_path / SMOKE)
    assert status() == 4 and "sha256 differs" in documented[4]  # damaged before missing


def test_a_listed_file_is_compared_with_the_manifest_before_it_is_unpickled(data_root, monkeypatch):
    """The sha256 check comes first: bytes that are not the committed ones never reach torch.load."""
    path = data_root / SMOKE
    _scaled(path)
    unpickled = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: unpickled.append(a[0]) or real(*a, **k))
    with pytest.raises(DamagedFileError, match="sha256 differs from the one MANIFEST.json records"):
        load_weights(path)
    assert unpickled == [] and not path.exists()
