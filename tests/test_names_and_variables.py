"""Names and variables are used as checked: a profile name is one of the profiles (never a path), a
DART_* value is normalised once and used as the check saw it, a YAML key set twice is refused, an
integer out of any range is refused at the schema, a file grown past the size limit is explained
like a full disk, an overridden run never writes into the committed results, and a grid waiting
on a cell another process holds says which and on whom, and gives up after a stated time."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dartlib import cli
from dartlib.cli.common import EXIT_USAGE
from dartlib.paths import REPO_ROOT
from dartlib.profiles import ProfileError, load_profile, load_yaml
from dartlib.registry import UnknownNameError


def test_a_path_like_profile_name_is_refused_with_the_valid_names(capsys, tmp_path):
    outside = tmp_path / "evil"
    outside.mkdir()
    (outside / "x.yaml").write_text("profile: ../../x\nseed: 0\n")
    name = os.path.relpath(outside / "x", REPO_ROOT / "notebooks" / "profiles")  # ../../../tmp/.../evil/x
    with pytest.raises(UnknownNameError, match="valid names: smoke, cpu"):
        load_profile(name)
    assert cli.main(["grid", "table1", "--profile", name, "--status"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "smoke" in err and "cpu" in err
    assert sorted(p.name for p in outside.iterdir()) == ["x.yaml"]  # no results folder made beside it


def test_data_dir_is_stripped_where_it_is_checked_and_where_it_is_used(tmp_path, monkeypatch):
    from dartlib.data.dataset import location
    from dartlib.paths import data_root

    monkeypatch.setenv("DART_DATA_DIR", f"  {tmp_path}\n")
    assert data_root() == tmp_path.resolve()
    monkeypatch.setenv("DART_CIFAR10_DIR", f" {tmp_path} ")
    assert location("DART_CIFAR10_DIR", Path("/nowhere")) == tmp_path


def test_workers_take_ascii_digits_only(monkeypatch):
    from dartlib.data.prepare import corruption_workers as workers
    from dartlib.environment import EnvironmentSettingError

    monkeypatch.setenv("DART_WORKERS", "\u00b2")
    with pytest.raises(EnvironmentSettingError, match="ASCII digits"):
        workers()
    monkeypatch.setenv("DART_WORKERS", " 3 ")
    assert workers() == 3


def test_a_yaml_key_set_twice_is_refused_naming_file_key_and_lines(tmp_path):
    from dartlib.runner import read_overrides

    path = tmp_path / "p.yaml"
    path.write_text("profile: smoke\nseed: 0\ndart_epochs: 2\nseed: 3\n")
    with pytest.raises(ProfileError) as err:
        load_yaml(path)
    assert str(err.value) == f"{path}: key `seed` is set twice (lines 2 and 4); keep one"
    with pytest.raises(ProfileError, match="set twice"):
        read_overrides(path)
    path.write_text("a:\n  b: 1\n  c: 2\nb: 1\n")  # the same name in two mappings is no repetition
    assert load_yaml(path) == {"a": {"b": 1, "c": 2}, "b": 1}


def test_integers_out_of_range_are_refused_at_the_schema():
    from dartlib.schema import check_values

    smoke = load_profile("smoke")
    check_values(smoke, file=Path("smoke.yaml"))
    with pytest.raises(ProfileError, match=r"seed: 100000000000000000000000 is out of range; expected an integer "
                                           r"between 0 and 4294967295"):
        check_values({**smoke, "seed": 10**23}, file=Path("smoke.yaml"))
    with pytest.raises(ProfileError, match="dart_epochs: .* within 64-bit integers"):
        check_values({**smoke, "dart_epochs": 10**30}, file=Path("smoke.yaml"))


def test_a_file_past_the_size_limit_is_explained_like_a_full_disk(tmp_path):
    from dartlib.data.files import NotWritableError, atomic_path

    target = tmp_path / "big.npy"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # `ulimit -f 8`; Python ignores SIGXFSZ
    try:
        with pytest.raises(NotWritableError) as err:
            with atomic_path(target) as tmp:
                np.save(tmp, np.zeros(10_000))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert err.value.errno == errno.EFBIG
    text = str(err.value)
    assert text.startswith(f"cannot write {target}: the file grew past the largest file") and "ulimit -f" in text
    assert "4.0 KiB" in text and "\n" not in text and not target.exists()


def test_an_overridden_run_into_the_committed_results_is_refused(monkeypatch, capsys, tmp_path):
    from dartlib.runner import check_override_output

    with pytest.raises(ProfileError, match="would land in the committed"):
        check_override_output(profile="cpu", overrides={"seed": 1}, output=REPO_ROOT)
    with pytest.raises(ProfileError, match="give --output DIR"):
        check_override_output(profile="cpu", overrides={"seed": 1}, output=None)
    check_override_output(profile="cpu", overrides={"seed": 1}, output=tmp_path)
    check_override_output(profile="cpu", overrides={}, output=None)
    import dartlib.runner

    monkeypatch.setattr(dartlib.runner, "run_profile", lambda **kw: pytest.fail("an overridden run started"))
    monkeypatch.chdir(REPO_ROOT)
    assert cli.main(["run", "--profile", "cpu", "--set", "seed=1", "--output", "."]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would land in the committed" in err


def _hold(results: Path, key: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from pathlib import Path; from dartlib.experiments.cell_claims import CellClaims\n"
        f"c = CellClaims(Path({str(results)!r})).__enter__(); assert c.claim({key!r}); print('held', flush=True); "
        "time.sleep(600)")], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_waiting_grid_names_the_cell_and_the_process_and_gives_up_after_the_stated_time(tmp_path):
    from dartlib.experiments.cell_claims import CellClaims, ClaimWaitTimeout, ClaimWaitWarning

    results = tmp_path / "r.csv"
    holder = _hold(results, "k1")
    try:
        with CellClaims(results) as claims:
            assert claims.holder("k1") == holder.pid and claims.holder("k2") is None
            start = time.monotonic()
            with pytest.warns(ClaimWaitWarning, match=f"cell fog s0 \\(key k1\\) is claimed by process {holder.pid}"):
                with pytest.raises(ClaimWaitTimeout) as err:
                    claims.claim("k1", wait=True, label="fog s0", limit=0.5)
            assert 0.5 <= time.monotonic() - start < 5
            assert f"gave up after 0.5 s waiting for cell fog s0 (key k1), claimed by process {holder.pid}" in str(
                err.value)
    finally:
        holder.kill()
        holder.wait()


def test_outcomes_claim_their_cells_as_the_grid_does(tmp_path, monkeypatch):
    from dartlib.experiments.grid import Cell, run_grid
    from dartlib.experiments.cell_claims import ClaimWaitTimeout
    from dartlib.experiments.outcome_backfill import fill_outcomes
    from dartlib.experiments.outcomes import sidecar

    cells = [Cell("sim", "lt", 1.0, c, 5, "bnadapt") for c in ("fog", "snow")]

    def evaluate(cell):
        from dartlib.experiments.outcomes import CellOutcomes

        correct = np.arange(10) % 3 == 0
        return {"n": 10, "accuracy": 40.0, "outcomes": CellOutcomes.from_stream(order=np.arange(10), correct=correct,
                                                                               size=10)}

    path = tmp_path / "g.csv"
    run_grid(cells, evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d")
    sidecar(path).unlink()
    holder = _hold(path, cells[1].key)
    monkeypatch.setenv("DART_CLAIM_WAIT", "1")
    computed = []
    try:
        with pytest.warns(UserWarning, match=f"claimed by process {holder.pid}"):
            with pytest.raises(ClaimWaitTimeout, match="snow"):
                fill_outcomes(cells, lambda c: computed.append(c.corruption) or evaluate(c), path=path,
                              experiment="g", inputs=lambda c: "d", progress=False)
    finally:
        holder.kill()
        holder.wait()
    assert computed == ["fog"]  # the held cell was not computed a second time


def test_a_notebook_stopped_by_a_refused_file_makes_run_exit_as_the_grid_does(monkeypatch, capsys, tmp_path):
    """A refused (damaged) file inside a notebook: run exits 4, like the command that reads it directly;
    any other failure stays 1."""
    import dartlib.runner
    from dartlib.cli.common import EXIT_DAMAGED, EXIT_FAILED
    from dartlib.runner import NotebookRun

    for error, status in (("DamagedFileError", EXIT_DAMAGED), ("CheckpointMismatchError", EXIT_DAMAGED),
                          ("ValueError", EXIT_FAILED)):
        failed = NotebookRun("03_confusion_matrices", 1.0, "failed", f"cell In[3]: {error}: ...", error)
        monkeypatch.setattr(dartlib.runner, "run_profile", lambda **kw: [failed])
        assert cli.main(["run", "--profile", "smoke", "--output", str(tmp_path), "03"]) == status, error
        assert "FAILED: notebook 03_confusion_matrices" in capsys.readouterr().err
