"""An installed copy behaves like a library: the wheel holds the package alone, and an install
writes its data and caches to the user's folders, never beside itself (docs/install.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from dartlib import paths
from dartlib.paths import REPO_ROOT


@pytest.fixture
def installed_layout(tmp_path, monkeypatch):
    """dartlib as if it lived in site-packages (no pyproject.toml beside it), with the XDG folders in tmp."""
    site = tmp_path / "site-packages"
    (site / "dartlib").mkdir(parents=True)
    monkeypatch.setattr(paths, "REPO_ROOT", site)
    monkeypatch.delenv("DART_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return tmp_path


def test_a_checkout_keeps_data_and_caches_under_its_data_folder(monkeypatch):
    monkeypatch.delenv("DART_DATA_DIR", raising=False)
    assert paths.from_checkout()
    assert paths.data_root() == REPO_ROOT / "data" and paths.cache_root() == REPO_ROOT / "data" / "cache"


def test_an_installed_copy_uses_the_users_folders(installed_layout, monkeypatch):
    from dartlib.dart.fit import default_cache_dir

    assert not paths.from_checkout()
    assert paths.data_root() == installed_layout / "xdg-data" / "dartlib"
    assert paths.cache_root() == installed_layout / "xdg-cache" / "dartlib"
    assert default_cache_dir() == installed_layout / "xdg-cache" / "dartlib" / "refiners"
    monkeypatch.setenv("DART_DATA_DIR", str(installed_layout / "mine"))  # the variable moves both
    assert paths.data_root() == installed_layout / "mine" and paths.cache_root() == installed_layout / "mine" / "cache"


def test_without_platformdirs_the_xdg_rules_apply(installed_layout, monkeypatch):
    monkeypatch.setitem(sys.modules, "platformdirs", None)
    assert paths.data_root() == installed_layout / "xdg-data" / "dartlib"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG rules say
    monkeypatch.setenv("HOME", str(installed_layout / "home"))
    assert paths.cache_root() == installed_layout / "home" / ".cache" / "dartlib"


# Run by the installed copy from a folder outside the checkout: fit a refiner with the default
# cache folder, wrap two methods around the model, and print where things went.
USER_SCRIPT = r"""
import json, sys
import numpy as np, torch
from torch import nn
import dartlib
from dartlib.dart.fit import fit_refiner
from dartlib.dart.refiner import DartConfig
from dartlib.paths import cache_root, data_root
from dartlib.tta.wrap import stream_accuracy, wrap

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)
images = rng.integers(0, 256, size=(160, 12, 12, 1), dtype=np.uint8)  # grey, 12 x 12
labels = np.arange(160) % 4
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 4))
fitted = fit_refiner(model=model, data=(images, labels), num_classes=4, device="cpu",
                     config=DartConfig(per_class=40, n_dir=4, epochs=1, batch_size=32, hidden=16), progress=False)
accuracy = {}
for refiner in (None, fitted.refiner):
    adapter = wrap("tent", model=model, refiner=refiner, device="cpu")
    accuracy["tent+dart" if refiner else "tent"] = stream_accuracy(adapter, (images, labels), num_classes=4,
                                                                    batch_size=40, device="cpu")
print(json.dumps({"package": dartlib.__file__, "refiner": str(fitted.path), "data_root": str(data_root()),
                  "cache_root": str(cache_root()), "accuracy": accuracy}))
"""


def _wheel(out: Path) -> Path:
    """The wheel of the checkout's package, built from a copy of what the build reads (setuptools
    leaves build/ and *.egg-info where it builds)."""
    source = out / "source"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "dartlib", source / "dartlib", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True, text=True)
    [wheel] = out.glob("dartlib-*.whl")
    return wheel


def test_the_wheel_installs_alone_and_writes_nothing_beside_itself(tmp_path):
    wheel = _wheel(tmp_path / "wheel")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"dartlib", wheel.name.split("-py3")[0] + ".dist-info"}, tops  # no top-level data, tests, notebooks
    assert {"dartlib/paths.py", "dartlib/dart/fit.py", "dartlib/tta/wrap.py", "dartlib/extras.py",
            "dartlib/book/assets/dart-book.css", "dartlib/book/assets/conf.py.in"} <= set(names)
    assert not [n for n in names if n.endswith((".pt", ".csv", ".ipynb"))]  # the checkout's artefacts stay there
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    assert "Requires-Dist: torch>=2.2" in metadata and "Provides-Extra: notebooks" in metadata

    # a venv that sees this interpreter's packages (torch) through a path line, not its editable dartlib
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "suite-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   env=env, cwd=work, capture_output=True, text=True)
    before = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    run = subprocess.run([str(python), "-c", USER_SCRIPT], env=env, cwd=work, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    import json

    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).is_relative_to(site / "dartlib")  # the installed copy, not the checkout
    assert Path(out["refiner"]).parent == home / "cache" / "dartlib" / "refiners" and Path(out["refiner"]).is_file()
    assert out["data_root"] == str(home / "data" / "dartlib") and out["cache_root"] == str(home / "cache" / "dartlib")
    assert set(out["accuracy"]) == {"tent", "tent+dart"} and all(0 <= a <= 100 for a in out["accuracy"].values())
    after = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    assert after == before  # nothing written inside site-packages
    assert sorted(p.name for p in work.iterdir()) == []  # nor in the working folder


def test_an_installed_copy_refuses_the_checkout_commands_in_one_line(installed_layout, capsys):
    from dartlib.cli import main
    from dartlib.cli.common import EXIT_MISSING

    assert main(["profiles"]) == EXIT_MISSING
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: `python -m dartlib profiles` works on a checkout of the repository") and "\n" not in err
    assert "an installed copy runs choose-alpha and data (docs/install.md)" in err
    with pytest.raises(FileNotFoundError, match="cpu's results/, figures/ and runs/ live in a checkout"):
        paths.results_dir("cpu")
    assert not (installed_layout / "site-packages" / "results").exists()
