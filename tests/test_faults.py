"""Faults and bad input, each injected into a temporary data root or a copy of real files: shared
temporary names, interrupted writes, damaged caches, checkpoints and results, data that changed
since a model was trained, invalid arguments. Each case asserts the behaviour a user should see:
one error type naming the file and the remedy, nothing half-written, nothing silently trusted."""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing
import os
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from PIL import Image

from dartlib import cli, runner
from dartlib.data import corrupted_sets, dataset, image_folders, sources
from dartlib.data.files import DamagedFileError, atomic_path, temporary_name
from dartlib.data.sources import load
from dartlib.experiments.grid import grid, read_results, run_grid
from dartlib.models.backbones import build
from dartlib.models.checkpoints import check_training_data, load_checkpoint, load_weights, save_source
from dartlib.paths import REPO_ROOT

# the smoke results as committed (results/smoke/ exists only after `make reproduce`)
SMOKE_RESULTS = REPO_ROOT / "tests" / "golden" / "smoke"


@pytest.fixture()
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    for var in ("DART_FMNIST_DIR", "DART_CIFAR10_DIR", "DART_CIFAR10C_DIR", "DART_FMNISTC_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sources, "FMNIST_DEBIAN_DIR", tmp_path / "no-debian-package")
    return tmp_path


def _image_folder(root: Path, *, per_class: int = 3, seed: int = 0) -> Path:
    """``root/test/<class>/<i>.png``: a CIFAR-style image folder of 32 x 32 PNGs."""
    rng = np.random.default_rng(seed)
    for cls in ("cat", "dog"):
        (root / "test" / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(root / "test" / cls / f"{i}.png")
    return root


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture()
def fmnist_files(data_root, monkeypatch):
    """Fashion-MNIST test files (IDX, gzip) of 6 images in a temporary folder."""
    folder = data_root / "fm"
    folder.mkdir()
    gray = np.random.default_rng(1).integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", gray)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(6) % 3)
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    return folder


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


# --------------------------------------------------------------------------- temporary names, concurrency


def test_temporary_names_are_unique_per_process_and_call(tmp_path):
    target = tmp_path / "cache.npz"
    a, b = temporary_name(target), temporary_name(target)
    assert a != b and str(os.getpid()) in a.name and a.suffix == ".npz" and a.parent == tmp_path


def test_atomic_path_leaves_nothing_behind_on_failure(tmp_path):
    target = tmp_path / "labels.npy"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        np.save(tmp, np.arange(3))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_second_writer_between_write_and_rename_of_the_image_cache(data_root, monkeypatch):
    """Another process writes the same cache while this one is between its write and its rename
    (two processes of `grid --shard i/n`, docs/cli.md): with a shared temporary name one of them
    lost its file."""
    monkeypatch.setenv("DART_CIFAR10_DIR", str(_image_folder(data_root / "c10")))
    real_savez, nested = np.savez, []

    def savez_then_other_writer(file, **arrays):
        real_savez(file, **arrays)
        if not nested:
            nested.append(True)
            image_folders._cached_folder("cifar10-test", data_root / "c10" / "test", None)  # the other writer

    monkeypatch.setattr(image_folders.np, "savez", savez_then_other_writer)
    ds = load("cifar10", split="test")
    assert len(ds) == 6 and nested
    assert not [p for p in (data_root / "cache").iterdir() if ".tmp" in p.name]


def _load_cifar10(root: str, barrier) -> None:
    os.environ["DART_DATA_DIR"] = root
    os.environ["DART_CIFAR10_DIR"] = str(Path(root) / "c10")
    barrier.wait()
    assert len(load("cifar10", split="test")) == 40


def test_two_processes_started_together_share_the_image_cache(data_root):
    _image_folder(data_root / "c10", per_class=20)
    ctx = multiprocessing.get_context("fork")
    for _ in range(3):
        shutil.rmtree(data_root / "cache", ignore_errors=True)
        barrier = ctx.Barrier(2)
        procs = [ctx.Process(target=_load_cifar10, args=(str(data_root), barrier)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0]


def test_note_iabn_copy_is_written_under_a_unique_name(tmp_path, monkeypatch):
    from dartlib.tta import note

    model = build("small-cnn", num_classes=3)
    checkpoint = tmp_path / "src.pt"
    monkeypatch.setattr(note, "finetune_iabn", lambda model, train, **kw: (note.to_iabn(model), [{"epoch": 1, "seconds": 0.0}]))
    written, real_save = [], torch.save
    monkeypatch.setattr(note.torch, "save", lambda obj, f: (written.append(Path(f)), real_save(obj, f)))
    net, meta = note.load_or_finetune_iabn(checkpoint, model, None, epochs=1, device="cpu", progress=False)
    assert str(os.getpid()) in written[0].name and written[0] != note.iabn_path(checkpoint, epochs=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [note.iabn_path(checkpoint, epochs=1).name]
    _truncate(note.iabn_path(checkpoint, epochs=1))
    with pytest.raises(DamagedFileError, match="iabn"):
        note.load_or_finetune_iabn(checkpoint, model, None, epochs=1, device="cpu", progress=False)


# --------------------------------------------------------------------------- refresh


def _committed_notebook(nb_dir: Path, *sources_: str) -> Path:
    nb_dir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources_]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path = nb_dir / "01_example.ipynb"
    nbformat.write(nb, path)
    return path


def test_interrupted_refresh_leaves_the_committed_notebook_as_it_was(tmp_path, monkeypatch):
    path = _committed_notebook(tmp_path / "notebooks", "x = 1")
    before = path.read_bytes()
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", tmp_path / "notebooks")

    def half_executed(src, output, parameters, *, log, **progress):
        Path(output).write_text('{"cells": [')  # the kernel was killed part-way
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_execute", half_executed)
    with pytest.raises(KeyboardInterrupt):
        runner.refresh_notebooks(["01"])
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == [path.name]


def test_failing_refresh_keeps_the_committed_notebook(tmp_path, monkeypatch):
    path = _committed_notebook(tmp_path / "notebooks", "x = 1", "raise ValueError('boom')")
    before = path.read_bytes()
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", tmp_path / "notebooks")
    runs = runner.refresh_notebooks(["01"])
    assert runs[0].status == "failed" and "boom" in runs[0].detail
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == [path.name]


# --------------------------------------------------------------------------- image-folder cache


def test_image_cache_sees_added_and_replaced_images(data_root, monkeypatch):
    root = _image_folder(data_root / "c10")
    monkeypatch.setenv("DART_CIFAR10_DIR", str(root))
    assert len(load("cifar10", split="test")) == 6
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(root / "test" / "cat" / "9.png")
    assert len(load("cifar10", split="test")) == 7
    Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(root / "test" / "cat" / "0.png")
    os.utime(root / "test" / "cat" / "0.png", ns=(1, 1))
    assert load("cifar10", split="test").images[0].min() == 200


def test_damaged_image_cache_is_named_discarded_and_rebuilt(data_root, monkeypatch):
    """The decoded cache is a cache: a truncated one is named in one warning and decoded again."""
    from dartlib.data.files import CacheDiscardedWarning

    monkeypatch.setenv("DART_CIFAR10_DIR", str(_image_folder(data_root / "c10")))
    first = load("cifar10", split="test")
    (cache,) = (data_root / "cache").glob("*.npz")
    _truncate(cache)
    with pytest.warns(CacheDiscardedWarning, match=f"{cache.name}: the decoded cache .* is unreadable"):
        assert load("cifar10", split="test").digest() == first.digest()


# --------------------------------------------------------------------------- results rows


@pytest.fixture()
def results(tmp_path) -> Path:
    path = tmp_path / "table1.csv"
    cells = grid(dataset=["fmnistc"], shift=["lt"], shift_param=[1.0], corruption=["fog", "snow", "frost"],
                 severity=[5], method=["bnadapt"])
    run_grid(cells, lambda cell: {"n": 100, "accuracy": 71.5}, path=path, experiment="table1", progress=False,
             inputs=lambda cell: "d" * 16)
    return path


def _damage_accuracy(path: Path, value: str, row: int = 1) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[row].split(",")
    fields[header.index("accuracy")] = value
    lines[row] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("value", ["7l.5", "nan", "", "150", "-3"])
def test_damaged_accuracy_is_reported_not_kept_as_current(results, value):
    _damage_accuracy(results, value, row=2)
    with pytest.raises(DamagedFileError, match=r"table1\.csv.*line 3 has accuracy.*delete the damaged row"):
        read_results(results)
    cells = grid(dataset=["fmnistc"], shift=["lt"], shift_param=[1.0], corruption=["fog"], severity=[5],
                 method=["bnadapt"])
    with pytest.raises(DamagedFileError):
        run_grid(cells, lambda cell: {"n": 100, "accuracy": 71.5}, path=results, experiment="table1", progress=False)


def test_truncated_results_file_is_reported(results):
    _truncate(results, keep=0.8)
    with pytest.raises(DamagedFileError, match=r"table1\.csv.*(cut short|line)"):
        read_results(results)


def test_garbage_results_file_names_the_file(results):
    results.write_bytes(b'\x00\x9f"unterminated\n1,2,3,4,5\n"x')
    with pytest.raises(DamagedFileError, match=r"table1\.csv.*recompute"):
        read_results(results)


def test_claims_on_a_damaged_results_file_raise_instead_of_not_run(tmp_path):
    from dartlib.book.claims import evaluate

    for f in SMOKE_RESULTS.glob("*.csv"):
        shutil.copy(f, tmp_path / f.name)
    intact = evaluate("smoke", corrupted_dataset="fmnistc", folder=tmp_path)
    assert (intact["status"] == "HOLDS").any()
    _damage_accuracy(tmp_path / "table1.csv", "x", row=5)
    with pytest.raises(DamagedFileError, match="table1.csv"):
        evaluate("smoke", corrupted_dataset="fmnistc", folder=tmp_path)


# --------------------------------------------------------------------------- corrupted sets, checkpoints


def test_truncated_corruption_file_names_file_and_remedy(tiny_corrupted):
    _truncate(tiny_corrupted / "gaussian_noise.npy")
    with pytest.raises(DamagedFileError, match=r"gaussian_noise\.npy is damaged.*prepare fmnistc"):
        load("fmnistc", corruption="gaussian_noise", severity=5)


def test_truncated_labels_file_names_it(tiny_corrupted):
    _truncate(tiny_corrupted / "labels.npy", keep=0.7)
    with pytest.raises(DamagedFileError, match=r"labels\.npy is damaged"):
        load("fmnistc", corruption="gaussian_noise", severity=5)


@pytest.mark.parametrize("text", ['{"severities": [5], "rows_per', '{"classes": []}', "[1, 2]"])
def test_damaged_manifest_names_it(tiny_corrupted, text):
    for array in tiny_corrupted.glob("*.npy"):  # a generated set records each file's sha256
        (tiny_corrupted / f"{array.name}.sha256").write_text(hashlib.sha256(array.read_bytes()).hexdigest() + "\n")
    (tiny_corrupted / "manifest.json").write_text(text)
    with pytest.raises(DamagedFileError, match=r"manifest\.json is damaged"):
        load("fmnistc", corruption="gaussian_noise", severity=5)


def test_truncated_checkpoint_names_file_and_remedy(tmp_path):
    path = save_source(build("small-cnn", num_classes=3), {"arch": "small-cnn", "num_classes": 3}, tmp_path / "m.pt")
    _truncate(path)
    with pytest.raises(DamagedFileError, match=r"m\.pt is damaged.*delete it"):
        load_checkpoint(path)


def test_checkpoint_without_metadata_names_what_it_lacks(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"model": build("small-cnn", num_classes=3).state_dict()}, path)
    with pytest.raises(DamagedFileError, match=r"lacks the entries \['meta'\]"):
        load_checkpoint(path)


def test_damaged_committed_checkpoint_says_git_checkout(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    path = save_source(build("small-cnn", num_classes=3), {"arch": "small-cnn", "num_classes": 3}, tmp_path / "m.pt")
    subprocess.run(["git", "add", "m.pt"], cwd=tmp_path, check=True)
    _truncate(path)
    with pytest.raises(DamagedFileError, match="git checkout -- "):
        load_weights(path)


def test_truncated_refiner_names_it(tmp_path):
    from dartlib.dart import intermediate

    path = tmp_path / "src.dart-0123456789ab.pt"
    path.write_bytes(b"PK\x03\x04 cut")
    with pytest.raises(DamagedFileError, match="dart-0123456789ab.pt is damaged"):
        intermediate._load(path, checkpoint=tmp_path / "src.pt")


def test_training_data_must_match_the_checkpoint_digest(tmp_path):
    rng = np.random.default_rng(0)
    train = dataset.Dataset("fmnist", "train", rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8),
                            np.arange(4) % 2, ("a", "b"))
    meta = {"dataset": "fmnist", "dataset_digest": train.digest()}
    check_training_data(checkpoint=tmp_path / "m.pt", meta=meta, train=train)
    changed = dataset.Dataset("fmnist", "train", train.images[::-1].copy(), train.labels, train.classes)
    with pytest.raises(ValueError, match=r"m\.pt was trained on fmnist.*data changed"):
        check_training_data(checkpoint=tmp_path / "m.pt", meta=meta, train=changed)


# --------------------------------------------------------------------------- validation before writing


def test_prepare_rejects_a_bad_severity_before_writing(fmnist_files, data_root):
    from dartlib.data.prepare import prepare_corrupted

    with pytest.raises(ValueError, match="severities must be among 1, 2, 3, 4, 5"):
        prepare_corrupted("fmnistc", severities=[9], corruptions=["contrast"])
    assert not corrupted_sets.corrupted_dir("fmnistc").exists()
    out = prepare_corrupted("fmnistc", severities=[5], corruptions=["contrast"])  # a valid call still works
    assert (out / "contrast.npy").is_file()


def test_cli_prepare_rejects_a_bad_severity_in_one_line(fmnist_files, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["data", "prepare", "fmnistc", "--severities", "9"])
    assert exit_.value.code == 2 and "invalid choice: 9" in capsys.readouterr().err
    assert not corrupted_sets.corrupted_dir("fmnistc").exists()


def test_download_never_replaces_a_folder_the_user_named(data_root, tmp_path, monkeypatch):
    from dartlib.data import download as dl

    mine = tmp_path / "my-cifar10c"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    monkeypatch.setenv("DART_CIFAR10C_DIR", str(mine))
    monkeypatch.setattr(dl, "zenodo_file", lambda *a, **k: pytest.fail("downloaded before checking the target"))
    with pytest.raises(FileExistsError, match="my-cifar10c exists and is not empty"):
        dl.download_corrupted("cifar10c")
    assert (mine / "notes.txt").read_text() == "mine"


def test_urlopen_calls_have_a_timeout(tmp_path, monkeypatch):
    from dartlib.data import download as dl

    seen = []
    real = dl.urllib.request.urlopen
    monkeypatch.setattr(dl.urllib.request, "urlopen", lambda url, **kw: (seen.append(kw.get("timeout")), real(url))[1])
    src = tmp_path / "src.bin"
    src.write_bytes(b"abc")
    dl._fetch(src.as_uri(), tmp_path / "dest.bin")
    (tmp_path / "1").write_text(json.dumps({"files": [{"key": "f", "checksum": "md5:0", "links": {"self": "u"}}]}))
    dl.zenodo_file("1", "f", api=tmp_path.as_uri() + "/")
    assert (tmp_path / "dest.bin").read_bytes() == b"abc" and seen and all(t and t > 0 for t in seen)


# --------------------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, message", [
    (["grid", "table1", "--threads", "-1"], "argument --threads: expected a positive integer, got -1"),
    (["validate-alpha", "--alphas", "a,b"], "argument --alphas: expected comma-separated numbers"),
    (["validate-alpha", "--threads", "0"], "argument --threads: expected a positive integer, got 0"),
    (["train", "--profile", "smoke", "--max-epochs", "0"], "argument --max-epochs: expected a positive integer"),
])
def test_cli_rejects_bad_arguments_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("command, argv", [
    ("dartlib.cli.grid._cmd_grid", ["grid", "table1", "--profile", "smoke", "--shard", "0/2"]),
    ("dartlib.cli.run._cmd_run", ["run", "--profile", "smoke", "06"]),
])
def test_ctrl_c_prints_the_resume_command(command, argv, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, interrupted)
    assert cli.main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == f"interrupted; resume with: python -m dartlib {' '.join(argv)}"


def test_cli_reports_a_damaged_results_file_in_one_line(results, monkeypatch, capsys):
    from dartlib.book import claims

    _damage_accuracy(results, "oops")
    monkeypatch.setattr(claims, "results_dir", lambda profile: results.parent)
    assert cli.main(["claims", "--profile", "smoke"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "table1.csv is damaged" in err and "Traceback" not in err


def test_tqdm_disable_silences_grid_and_training_bars(tmp_path, monkeypatch, capsys):
    from dartlib.models.training import EpochBatches, sgd_epoch

    monkeypatch.setenv("TQDM_DISABLE", "1")
    cells = grid(dataset=["d"], shift=["lt"], corruption=["fog"], severity=[5], method=["m"], shift_param=[1.0])
    run_grid(cells, lambda cell: {"n": 1, "accuracy": 50.0}, path=tmp_path / "r.csv", experiment="e", progress=True)
    model = build("small-cnn", num_classes=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images = np.zeros((8, 32, 32, 3), np.uint8)
    batches = EpochBatches(images, torch.zeros(8, dtype=torch.long), torch.arange(8), 2, 4, "flip",
                           torch.Generator().manual_seed(0))
    sgd_epoch(model, opt, batches, lr_of_step=lambda i: 0.01, device="cpu", desc="train", progress=True)
    assert capsys.readouterr().err == ""


def test_the_engines_test_set_cache_follows_the_data_root(tmp_path, monkeypatch):
    """A corrupted set cached by the engine is never served after the data root moved (the cache
    was keyed on the set's name alone: a second data root got the first one's images)."""
    from dartlib.experiments.cell_streams import cell_stream
    from dartlib.experiments.grid import Cell

    cell = Cell(dataset="fmnistc", shift="lt", shift_param=1.0, corruption="gaussian_noise", severity=5,
                method="bnadapt")
    sizes = []
    for root, per_class in ((tmp_path / "a", 3), (tmp_path / "b", 7)):
        monkeypatch.setenv("DART_DATA_DIR", str(root))
        folder = corrupted_sets.corrupted_dir("fmnistc")
        folder.mkdir(parents=True)
        labels = np.repeat(np.arange(10), per_class).astype(np.int64)
        np.save(folder / "gaussian_noise.npy", np.zeros((5 * len(labels), 32, 32, 3), dtype=np.uint8))
        np.save(folder / "labels.npy", np.tile(labels, 5))
        sizes.append(len(cell_stream(cell)[1]))
    assert sizes == [30, 70]
