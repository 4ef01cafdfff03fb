"""The CPU dry run of the paper-c10 profile: every notebook the profile lists, through papermill,
on the profile's code path with the tiny settings of notebooks/profiles/dry-run/paper-c10.yaml,
on the first 50 training and 30 test images of each class of the real CIFAR-10 (docs/gpu.md).
A GPU slot should meet no bug this could have met on the CPU.

Nothing is downloaded and nothing is substituted: without a CIFAR-10 copy the test skips and says
how to get one. Everything it writes goes to a temporary folder (its own data root and --output).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from dartlib.data import travel
from dartlib.paths import PROFILES_DIR, REPO_ROOT

PROFILE = "paper-c10"
OVERRIDES = PROFILES_DIR / "dry-run" / f"{PROFILE}.yaml"


@pytest.mark.dry_run
def test_the_paper_c10_profile_runs_through_on_the_cpu_at_tiny_size(tmp_path):
    missing = travel.cifar10_missing()
    if missing:
        pytest.skip(f"the paper-c10 dry run needs CIFAR-10: {missing}")
    data_root, cifar10, out = tmp_path / "data", tmp_path / "cifar10", tmp_path / "out"
    travel.tiny_cifar10(cifar10, data_root=data_root, train_per_class=50, test_per_class=30)
    env = {**travel.environment_for(data_root, cifar10), "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1",
           "DART_DEVICE": "cpu", "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dartlib", "run", "--profile", PROFILE, "--overrides", str(OVERRIDES), "--output", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - start
    print(done.stdout, done.stderr, f"dry run: {seconds:.0f} s", sep="\n")
    assert done.returncode == 0, done.stdout + done.stderr
    results = out / "results" / PROFILE
    table1 = pd.read_csv(results / "table1.csv")
    assert set(table1.method) == {"noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar"}
    assert set(table1.refiner) == {"none", "dart"} and set(table1.shift_param) == {1, 10, 100}
    assert set(pd.read_csv(results / "online_imbalance.csv").shift_param) >= {1, 5000}
    assert set(pd.read_csv(results / "accuracy_vs_rho.csv").rho) == {1, 10, 100}
    assert not (REPO_ROOT / "results" / PROFILE / "table1.csv").exists() or \
        (REPO_ROOT / "results" / PROFILE / "table1.csv").stat().st_mtime < start  # the repository's rows untouched
    assert {p.stem for p in (out / "runs" / PROFILE).glob("*.ipynb")} == \
        {p.stem for p in (REPO_ROOT / "notebooks").glob("*.ipynb") if p.stem[:2] in _listed()}


def _listed() -> set[str]:
    from dartlib.profiles import load_profile

    return set(load_profile(PROFILE)["notebooks"])


def test_the_dry_run_settings_are_valid_overrides_of_the_profile():
    from dartlib import runner
    from dartlib.schema import checked_profile

    overrides = runner.read_overrides(OVERRIDES)
    values = runner.overridden(checked_profile(PROFILE), overrides, profile=PROFILE)
    assert values["source_recipe"] == "paper-dry" and values["source_arch"].startswith("resnet26")
    # the dry run keeps the profile's methods, rhos and refiner kinds; it only shrinks sizes
    assert not {"lt_rhos", "extra_methods", "dart_alpha", "test_batch_size", "notebooks"} & set(overrides)
    assert os.path.basename(OVERRIDES) == f"{PROFILE}.yaml"
