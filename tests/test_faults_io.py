"""The machine's faults: an unwritable folder or a full disk is one line naming the path and what
to free or change, said before any work where it can be known, and leaves nothing half-written;
a CIFAR-10 folder of non-images is reported, not "present"; an interrupted book leaves the
previous one whole; killing make ends its python child; Ctrl-C on a command that resumes says how.

How the faults are planted. The tests run as root here, and root writes through ``chmod a-w``, so
chmod alone would not make a folder unwritable; a read-only bind mount or a small full tmpfs would,
but mounting needs privileges a CI runner or a developer's machine may not grant. So the faults are
planted where the suite meets the operating system: ``os.open`` (what the writability probe and
``atomic_path``'s writers reach) refuses files under a chosen folder with EACCES, EROFS or ENOSPC,
exactly the error a read-only, unwritable or full device gives, and a writer (``Path.write_text``,
``torch.save``) fails half-way with ENOSPC as on a full disk. /tmp/faults_io_summary.md shows the
same commands against a real read-only bind mount and a real full tmpfs.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dartlib import cli
from dartlib.data import files
from dartlib.paths import REPO_ROOT


@pytest.fixture()
def refuse(monkeypatch):
    """``refuse(folder, code)``: creating or writing a file under ``folder`` fails with ``code``
    (EACCES by default), as on an unwritable, read-only (EROFS) or full (ENOSPC) device."""
    blocked: dict[Path, int] = {}
    real_open = os.open

    def guarded_open(path, flags, mode=0o777, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            for folder, code in blocked.items():
                if Path(path).absolute().is_relative_to(folder):
                    raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)

    def block(folder: Path, code: int = errno.EACCES) -> Path:
        Path(folder).mkdir(parents=True, exist_ok=True)  # an unwritable folder is there, refusing new files
        blocked[Path(folder).absolute()] = code
        return folder

    return block


def _must_not_run(*args, **kwargs):
    pytest.fail("the command computed before finding that it cannot write its results")


def _patch_table1_prepare(monkeypatch, fake) -> None:
    """The table1 grid's prepare step replaced by ``fake`` (in the engine and, where the grids are
    registered in dartlib.studies.grids, in its spec), and its training stage by ``fake`` too where
    ``fake`` must not run, else by nothing (the inputs taken as trained)."""
    import dataclasses

    import dartlib.experiments.engine as engine

    monkeypatch.setattr(engine, "prepare_context", fake)
    try:
        from dartlib.studies import grids
    except ImportError:
        return
    train = fake if fake is _must_not_run else (lambda **kw: None)
    monkeypatch.setitem(grids.GRIDS._items, "table1", dataclasses.replace(grids.GRIDS["table1"], prepare=fake, train=train))


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and lines[0].startswith("error: cannot write ")
    return lines[0]


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """The repository's output folders (results/, figures/, runs/, tests/golden/) and the data root
    under ``tmp_path``, so that a blocked folder is a temporary one."""
    import dartlib.paths

    monkeypatch.setattr(dartlib.paths, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(dartlib.paths, "from_checkout", lambda: True)  # a checkout's layout under tmp_path
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


# --------------------------------------------------------------------------- the probe and atomic writes


@pytest.mark.parametrize("code, words", [
    (errno.EACCES, ["permission denied", "chmod -R u+w"]),
    (errno.EROFS, ["read-only file system", "remount it read-write"]),
    (errno.ENOSPC, ["no space left", "df -h"]),
])
def test_check_writable_names_the_folder_and_the_remedy(tmp_path, refuse, code, words):
    refuse(tmp_path / "out", code)  # "deep" would be created in it
    with pytest.raises(files.NotWritableError) as caught:
        files.check_writable(tmp_path / "out" / "deep", change="give another folder with --out DIR")
    message = str(caught.value)
    assert caught.value.errno == code and "\n" not in message
    assert message.startswith(f"cannot write {tmp_path / 'out' / 'deep'}:")
    assert all(w in message for w in words) and "give another folder with --out DIR" in message
    assert not (tmp_path / "out" / "deep").exists()  # the check creates nothing


def test_check_writable_leaves_no_probe_behind(tmp_path):
    files.check_writable(tmp_path / "new" / "folder")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_a_write_keeps_the_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    target.write_text("a,b\n1,2\n")

    def half_then_full(self, text, *a, **k):
        with open(self, "w") as fh:  # half the file reaches the disk, then the device is full
            fh.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(files.NotWritableError) as caught:
        files.write_text_atomic(target, "a,b\n1,2\n3,4\n5,6\n")
    assert f"cannot write {target}: no space left" in str(caught.value)  # the target, not the temporary name
    assert target.read_text() == "a,b\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_figure_on_a_full_disk_keeps_the_previous_one(repo, monkeypatch):
    """Notebooks (``run``) write their figures through save_figure: a full disk leaves the previous
    PDF and PNG, not half a file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dartlib.reporting.figures import save_figure

    folder = repo / "figures" / "smoke"
    folder.mkdir(parents=True)
    for ext in ("pdf", "png"):
        (folder / f"f.{ext}").write_text(f"previous {ext}")
    fig = plt.figure()

    def half_then_full(path, **kw):
        Path(path).write_bytes(b"%PDF-1.4 half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(fig, "savefig", half_then_full)
    with pytest.raises(files.NotWritableError, match=f"cannot write {folder / 'f.pdf'}: no space left"):
        save_figure(fig, profile="smoke", name="f")
    plt.close(fig)
    assert sorted(p.name for p in folder.iterdir()) == ["f.pdf", "f.png"]
    assert (folder / "f.pdf").read_text() == "previous pdf"


def test_a_writer_reporting_a_full_disk_its_own_way_is_a_full_disk(tmp_path, monkeypatch):
    """torch.save's zip writer says "unexpected pos ..." (a RuntimeError) when the device fills up."""
    monkeypatch.setattr(files, "_device_full", lambda folder: True)
    with pytest.raises(files.NotWritableError, match=f"cannot write {tmp_path / 'm.pt'}: no space left"):
        with files.atomic_path(tmp_path / "m.pt") as tmp:
            tmp.write_bytes(b"PK half")
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 37696 vs 37592")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- each entry point, before any work


def test_run_refuses_an_unwritable_results_folder_before_any_notebook(repo, refuse, monkeypatch, capsys):
    import dartlib.runner

    monkeypatch.setattr(dartlib.runner, "run_profile", _must_not_run)
    refuse(repo / "results")
    assert cli.main(["run", "--profile", "smoke", "01"]) == 5
    line = _one_line_error(capsys)
    assert f"cannot write {repo / 'results' / 'smoke'}: permission denied" in line
    assert not (repo / "runs").exists()


def test_run_refuses_a_full_data_root(repo, refuse, monkeypatch, capsys):
    import dartlib.runner

    monkeypatch.setattr(dartlib.runner, "run_profile", _must_not_run)
    refuse(repo / "data", errno.ENOSPC)
    assert cli.main(["run", "--profile", "smoke"]) == 5
    line = _one_line_error(capsys)
    assert f"cannot write {repo / 'data'}: no space left" in line and "DART_DATA_DIR" in line


def test_grid_refuses_a_read_only_results_folder_before_preparing(repo, refuse, monkeypatch, capsys):
    _patch_table1_prepare(monkeypatch, _must_not_run)
    refuse(repo / "results", errno.EROFS)
    assert cli.main(["grid", "table1", "--profile", "smoke"]) == 5
    assert "read-only file system" in _one_line_error(capsys)


def test_train_refuses_an_unwritable_directory_before_training(repo, refuse, monkeypatch, capsys):
    import dartlib.models.training as training

    monkeypatch.setattr(training, "train_source", _must_not_run)
    refuse(repo / "ckpt")
    assert cli.main(["train", "--profile", "smoke", "--directory", str(repo / "ckpt")]) == 5
    line = _one_line_error(capsys)
    assert f"cannot write {repo / 'ckpt'}" in line and "--directory DIR" in line


def test_train_on_a_disk_that_fills_up_names_the_checkpoint_and_leaves_no_file(repo, monkeypatch, capsys):
    import torch

    import dartlib.models.checkpoints as checkpoints
    import dartlib.models.training as training

    target = repo / "ckpt" / "model.pt"

    def train_then_save(**kw):
        checkpoints.save_weights({"w": torch.zeros(3)}, path=target)
        return target

    def full(obj, path, *a, **k):
        Path(path).write_bytes(b"PK\x03\x04 half")  # a partial archive, then the device is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(training, "train_source", train_then_save)
    monkeypatch.setattr(torch, "save", full)
    assert cli.main(["train", "--profile", "smoke", "--directory", str(repo / "ckpt")]) == 5
    assert f"cannot write {target}: no space left" in _one_line_error(capsys)
    assert list((repo / "ckpt").iterdir()) == []


def test_book_refuses_an_unwritable_output_folder_before_building(tmp_path, refuse, monkeypatch, capsys):
    import dartlib.book.site as book

    monkeypatch.setattr(book, "build_book", _must_not_run)
    refuse(tmp_path / "site")
    assert cli.main(["book", "--profile", "smoke", "--out", str(tmp_path / "site" / "smoke")]) == 5
    line = _one_line_error(capsys)
    assert f"cannot write {tmp_path / 'site'}" in line and "--out DIR" in line


def test_reference_update_refuses_a_read_only_golden_folder(repo, refuse, monkeypatch, capsys):
    from dartlib.reporting import reference

    monkeypatch.setattr(reference, "update_reference", _must_not_run)
    refuse(repo / "tests", errno.EROFS)
    assert cli.main(["reference", "update", "--profile", "smoke"]) == 5
    assert f"cannot write {repo / 'tests' / 'golden' / 'smoke'}: " in _one_line_error(capsys)


def test_reference_check_and_claims_write_nothing(refuse, capsys):
    """Both only read: a read-only repository does not stop them."""
    refuse(REPO_ROOT, errno.EROFS)
    assert cli.main(["claims", "--profile", "smoke"]) == 0
    assert cli.main(["reference", "check", "--profile", "smoke"]) in (0, 1)  # differences, if any, are not our fault
    assert "cannot write" not in capsys.readouterr().err


def test_artefacts_manifest_on_a_full_disk_keeps_the_manifest(tmp_path, monkeypatch, capsys):
    from dartlib.models import artefacts

    manifest = tmp_path / "MANIFEST.json"
    manifest.write_text('{"files": []}\n')
    real = artefacts.write_manifest
    monkeypatch.setattr(artefacts, "MANIFEST", manifest)
    monkeypatch.setattr(artefacts, "write_manifest", lambda: real(tmp_path))

    def half_then_full(self, text, *a, **k):
        with open(self, "w") as fh:
            fh.write(text[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", half_then_full)
    assert cli.main(["artefacts", "manifest"]) == 5
    assert f"cannot write {manifest}: no space left" in _one_line_error(capsys)
    assert manifest.read_text() == '{"files": []}\n' and [p.name for p in tmp_path.iterdir()] == ["MANIFEST.json"]


def test_artefacts_manifest_refuses_an_unwritable_folder(tmp_path, refuse, monkeypatch, capsys):
    from dartlib.models import artefacts

    monkeypatch.setattr(artefacts, "MANIFEST", tmp_path / "MANIFEST.json")
    monkeypatch.setattr(artefacts, "write_manifest", _must_not_run)
    refuse(tmp_path)
    assert cli.main(["artefacts", "manifest"]) == 5
    assert f"cannot write {tmp_path}: permission denied" in _one_line_error(capsys)


@pytest.mark.parametrize("argv", [["data", "prepare", "fmnistc", "--corruptions", "fog"], ["data", "download", "fmnist"]])
def test_data_commands_refuse_a_full_data_root_before_generating(repo, refuse, monkeypatch, capsys, argv):
    import dartlib.data.download as download
    import dartlib.data.prepare as prepare

    monkeypatch.setattr(prepare, "prepare_corrupted", _must_not_run)
    monkeypatch.setattr(download, "download", _must_not_run)
    refuse(repo / "data", errno.ENOSPC)
    assert cli.main(argv) == 5
    assert "no space left" in _one_line_error(capsys)


# --------------------------------------------------------------------------- data status reads what it finds


def _cifar_folder(root: Path, *, write) -> Path:
    for split in ("train", "test"):
        for c in range(10):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True)
            write(folder / "0.png")
    return root


def _status_of(root: Path, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("DART_CIFAR10_DIR", str(root))
    code = cli.main(["data", "status"])
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("cifar10 ")]
    return code, "\n".join(line)


def test_data_status_reports_a_cifar10_folder_of_non_images(tmp_path, monkeypatch, capsys):
    root = _cifar_folder(tmp_path / "c10", write=lambda p: p.write_text("not an image"))
    monkeypatch.setenv("DART_CIFAR10_DIR", str(root))
    assert cli.main(["data", "status"]) == 1
    out = capsys.readouterr().out
    assert f"cifar10       DAMAGED  {root / 'test'}" in out
    assert f"wrong: {root / 'test' / 'class0' / '0.png'} is not a readable image" in out


def test_data_status_reports_images_of_the_wrong_shape(tmp_path, monkeypatch, capsys):
    from PIL import Image

    root = _cifar_folder(tmp_path / "c10", write=lambda p: Image.new("RGB", (64, 48)).save(p))
    monkeypatch.setenv("DART_CIFAR10_DIR", str(root))
    assert cli.main(["data", "status"]) == 1
    assert f"{root / 'test' / 'class0' / '0.png'} is 64 x 48 pixels, expected 32 x 32" in capsys.readouterr().out


def test_data_status_accepts_a_sound_cifar10_folder(tmp_path, monkeypatch, capsys):
    from PIL import Image

    root = _cifar_folder(tmp_path / "c10", write=lambda p: Image.new("RGB", (32, 32)).save(p))
    monkeypatch.setenv("DART_CIFAR10_DIR", str(root))
    cli.main(["data", "status"])
    assert f"cifar10       present  {root / 'test'}" in capsys.readouterr().out


def test_data_status_reports_a_folder_without_class_folders(tmp_path, monkeypatch, capsys):
    (tmp_path / "c10" / "test").mkdir(parents=True)
    (tmp_path / "c10" / "test" / "README").write_text("images go here")
    monkeypatch.setenv("DART_CIFAR10_DIR", str(tmp_path / "c10"))
    assert cli.main(["data", "status"]) == 1
    assert "holds 0 class folders, expected 10" in capsys.readouterr().out


def test_loading_a_folder_with_a_non_image_names_the_file(tmp_path):
    from PIL import Image

    from dartlib.data.image_folders import read_image_folder

    root = tmp_path / "set"
    (root / "a").mkdir(parents=True)
    Image.new("RGB", (32, 32)).save(root / "a" / "0.png")
    (root / "a" / "1.png").write_text("no")
    with pytest.raises(files.DamagedFileError, match=r"1\.png is damaged: not a readable image"):
        read_image_folder(root)


# --------------------------------------------------------------------------- the book, built aside


@pytest.fixture()
def small_book(monkeypatch):
    """build_book with a two-file source tree instead of the profile's pages; ``sphinx`` is the
    stand-in for Sphinx's build_main (it gets the output folder)."""
    import sphinx.cmd.build

    import dartlib.book.site as book

    def source(*, profile, out, **options):  # options: progress, stage
        out.mkdir(parents=True)
        (out / "index.md").write_text("# new\n")
        return out

    monkeypatch.setattr(book, "write_book_source", source)
    state = {}

    def build_main(args):
        html = Path(args[-1])
        html.mkdir(parents=True)
        (html / "index.html").write_text("half")
        return state["sphinx"](html)

    monkeypatch.setattr(sphinx.cmd.build, "build_main", build_main)
    return book, state


def _old_book(root: Path) -> None:
    (root / "html").mkdir(parents=True)
    (root / "html" / "index.html").write_text("old book")


def test_an_interrupted_book_leaves_the_previous_one_whole(tmp_path, small_book):
    book, state = small_book

    def interrupted(html):
        raise KeyboardInterrupt

    state["sphinx"] = interrupted
    _old_book(tmp_path / "smoke")
    with pytest.raises(KeyboardInterrupt):
        book.build_book(profile="smoke", out=tmp_path / "smoke")
    assert (tmp_path / "smoke" / "html" / "index.html").read_text() == "old book"
    assert [p.name for p in tmp_path.iterdir()] == ["smoke"]  # nothing left aside


def test_a_failed_book_leaves_the_previous_one_and_keeps_its_source(tmp_path, small_book):
    book, state = small_book
    state["sphinx"] = lambda html: 1
    _old_book(tmp_path / "smoke")
    with pytest.raises(RuntimeError, match="the previous book is unchanged"):
        book.build_book(profile="smoke", out=tmp_path / "smoke")
    assert (tmp_path / "smoke" / "html" / "index.html").read_text() == "old book"
    assert (tmp_path / ".smoke.failed" / "src" / "index.md").is_file()


def test_a_finished_book_replaces_the_previous_one_whole(tmp_path, small_book):
    book, state = small_book

    def finished(html):
        (html / "index.html").write_text("new book")
        return 0

    state["sphinx"] = finished
    _old_book(tmp_path / "smoke")
    (tmp_path / "smoke" / "html" / "stale.html").write_text("a page the new book lacks")
    index = book.build_book(profile="smoke", out=tmp_path / "smoke")
    assert index == tmp_path / "smoke" / "html" / "index.html" and index.read_text() == "new book"
    assert not (tmp_path / "smoke" / "html" / "stale.html").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["smoke"]


# --------------------------------------------------------------------------- Ctrl-C and killing make


def test_ctrl_c_on_run_prints_the_resume_command(monkeypatch, capsys):
    import dartlib.runner

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(dartlib.runner, "_execute", interrupted)
    argv = ["run", "--profile", "smoke", "01"]
    assert cli.main(argv) == 130
    assert capsys.readouterr().err.strip() == f"interrupted; resume with: python -m dartlib {' '.join(argv)}"


def test_ctrl_c_on_grid_prints_the_resume_command(monkeypatch, capsys):
    from types import SimpleNamespace

    import dartlib.experiments.grid as grid

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    context = SimpleNamespace(inputs=lambda cell: "")
    _patch_table1_prepare(monkeypatch, lambda **kw: (context, {"arch": "x", "clean_test_accuracy": 0.0}))
    monkeypatch.setattr(grid, "run_grid", interrupted)
    argv = ["grid", "table1", "--profile", "smoke", "--methods", "bnadapt"]
    assert cli.main(argv) == 130
    assert capsys.readouterr().err.strip().endswith(f"interrupted; resume with: python -m dartlib {' '.join(argv)}")


def test_ctrl_c_on_grid_on_ray_prints_the_resume_command(monkeypatch, capsys):
    import dartlib.experiments.distributed as distributed

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "run_grid_ray", interrupted)
    argv = ["grid", "table1", "--profile", "smoke", "--backend", "ray", "--methods", "bnadapt"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("interrupted: the workers are stopped, every finished cell is in ")
    assert err.endswith(f"; resume with: python -m dartlib {' '.join(argv)}")


def _gone(pid: int, within: float = 10.0) -> bool:
    import psutil

    end = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_make_ends_its_python_child(sig):
    """`make signal-check` runs a python set up as `python -m dartlib` sets itself up; killing make
    (SIGTERM: make passes it on to its child; SIGKILL: it cannot, the child's parent-death signal
    does) must end that python, not leave it running."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MAKELEVEL", None)
    env.pop("MAKEFLAGS", None)
    make = subprocess.Popen(["make", "-s", "--no-print-directory", "-C", str(REPO_ROOT), "signal-check"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    import psutil

    descendants = []
    try:
        assert make.stdout.readline().strip() == "ready"
        descendants = [p.pid for p in psutil.Process(make.pid).children(recursive=True)]
        os.kill(make.pid, sig)
        make.wait(timeout=30)
        left = [pid for pid in descendants if not _gone(pid)]
        assert not left, f"make's children {left} still run after {signal.Signals(sig).name} to make"
        assert len(descendants) == 1  # python itself (the recipe execs it), no shell in between
    finally:
        if make.poll() is None:
            make.kill()
        for pid in descendants:
            if not _gone(pid, within=0):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_stops_a_command_as_ctrl_c_does():
    """python -m dartlib turns SIGTERM into KeyboardInterrupt: a command that resumes says how, and
    finally-blocks (the removal of a half-written file, the kernel's shutdown) run."""
    code = ("import os, signal, sys\n"
            "from dartlib import cli\n"
            "import dartlib.models.training as t\n"
            "def train(**kw):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    import time; time.sleep(30)\n"
            "t.train_source = train\n"
            "cli.signals_stop_the_command()\n"
            "sys.exit(cli.main(['train', '--profile', 'smoke', '--directory', sys.argv[1]]))\n")
    with_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"sigterm-{os.getpid()}"
    done = subprocess.run([sys.executable, "-c", code, str(with_dir)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().startswith("interrupted; resume with: python -m dartlib train --profile smoke")


_KILLED_BUILD = """
import sys, time
from pathlib import Path
import sphinx.cmd.build
import dartlib.book.site as book

def source(*, profile, out, **progress_options):
    out.mkdir(parents=True)
    (out / "index.md").write_text("# new\\n")
    return out

def build_main(args):
    Path(args[-1]).mkdir(parents=True)
    print("building", flush=True)
    time.sleep(600)

book.write_book_source = source
sphinx.cmd.build.build_main = build_main
book.build_book(profile="smoke", out=Path(sys.argv[1]))
"""


def test_a_killed_book_leaves_folders_that_the_next_build_removes(tmp_path, small_book):
    import fcntl
    import signal
    import subprocess
    import sys

    book, state = small_book
    state["sphinx"] = lambda html: 0
    _old_book(tmp_path / "smoke")
    child = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD, str(tmp_path / "smoke")], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "building"
    child.send_signal(signal.SIGKILL)  # no clean-up can run
    child.wait()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "smoke")
    assert [n.split("-")[0] for n in left] == [".smoke.build", ".smoke.building"]
    # a build still running (its lock held) keeps its folder
    running = tmp_path / f".smoke.building-{os.getpid()}-0abc"
    running.mkdir()
    with open(tmp_path / f".smoke.build-{os.getpid()}-0abc.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        book.build_book(profile="smoke", out=tmp_path / "smoke")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, Path(held.name).name, "smoke"])
    assert (tmp_path / "smoke" / "html" / "index.html").read_text() == "half"
    book.build_book(profile="smoke", out=tmp_path / "smoke")
    assert [p.name for p in tmp_path.iterdir()] == ["smoke"]
