"""Every published executed notebook (results/<profile>/notebooks/) is current: the files it read
and the library code it ran (metadata.dart.inputs, dartlib.provenance) are still what they were when
it ran. A notebook published before the inputs were recorded must be listed, with why it has not been
executed again, in results/pages_without_inputs.txt; the list only shrinks."""

from __future__ import annotations

from pathlib import Path

import nbformat

from dartlib.paths import REPO_ROOT
from dartlib.profiles import load_profile
from dartlib.provenance import (recorded_parameters, setting_reads, sha256_file, stale_inputs, stale_outputs,
                                stale_parameters)

UNRECORDED = REPO_ROOT / "results" / "pages_without_inputs.txt"


def _published() -> list[Path]:
    return sorted((REPO_ROOT / "results").glob("*/notebooks/*.ipynb"))


def _unrecorded() -> set[str]:
    lines = UNRECORDED.read_text().splitlines() if UNRECORDED.is_file() else []
    return {line.split()[0] for line in lines if line.strip() and not line.startswith("#")}


def test_every_published_notebook_is_current_or_listed_as_unrecorded():
    problems, listed = [], _unrecorded()
    for path in _published():
        rel = path.relative_to(REPO_ROOT).as_posix()
        inputs = nbformat.read(path, as_version=4).metadata.get("dart", {}).get("inputs")
        if inputs is None:
            if rel not in listed:
                problems.append(f"{rel}: no recorded inputs; execute it again "
                                f"(python -m dartlib run --profile {path.parts[-3]} {path.stem[:2]} --publish)")
            continue
        if rel in listed:
            problems.append(f"{rel}: records its inputs now; remove it from {UNRECORDED.name}")
        stale = stale_inputs(inputs)
        parameters = recorded_parameters(nbformat.read(path, as_version=4))
        if parameters is None:
            problems.append(f"{rel}: records no parameters; execute it again "
                            f"(python -m dartlib run --profile {path.parts[-3]} {path.stem[:2]} --publish)")
        else:
            stale = stale_parameters(parameters, load_profile(path.parts[-3])) + stale  # a changed value first
        if stale:
            problems.append(f"{rel}: older than {', '.join(stale[:4])}{' ...' if len(stale) > 4 else ''}; execute it "
                            f"again (python -m dartlib run --profile {path.parts[-3]} {path.stem[:2]} --publish)")
    missing = listed - {p.relative_to(REPO_ROOT).as_posix() for p in _published()}
    problems += [f"{UNRECORDED.name} lists {m}, which is not published" for m in sorted(missing)]
    assert not problems, "\n".join(problems)


def test_every_figure_of_a_published_profile_is_what_its_page_drew():
    """A figure is checked as a page is: each figure of a profile with published pages was written
    by one of them (``metadata.dart.outputs``) and still holds the bytes it wrote, so a figure is
    current exactly when its page is (the test above)."""
    profiles = sorted({p.parts[-3] for p in _published()})
    assert profiles, "no published pages"
    problems = []
    for profile in profiles:
        pages = {p.relative_to(REPO_ROOT).as_posix(): nbformat.read(p, as_version=4).metadata.get("dart", {}).get("outputs", {})
                 for p in _published() if p.parts[-3] == profile}
        assert any(pages.values()), f"no page of {profile} records the figures it drew: publish them again"
        figures = [*(REPO_ROOT / "figures" / profile).glob("*.png"), *(REPO_ROOT / "figures" / profile).glob("*.pdf")]
        problems += stale_outputs(pages, files=figures)
    assert not problems, "\n".join(problems)


def test_a_figure_no_page_drew_or_changed_since_is_found(tmp_path):
    figure, other = tmp_path / "figures" / "cpu" / "fig3.png", tmp_path / "figures" / "cpu" / "old.png"
    figure.parent.mkdir(parents=True)
    figure.write_bytes(b"drawn")
    other.write_bytes(b"left over")
    pages = {"results/cpu/notebooks/05.ipynb": {"figures/cpu/fig3.png": sha256_file(figure)}}
    assert stale_outputs(pages, files=[figure], root=tmp_path) == []
    assert stale_outputs(pages, files=[other], root=tmp_path) == [
        "figures/cpu/old.png: drawn by no published page (delete it, or run the notebook that draws it)"]
    figure.write_bytes(b"edited")
    assert stale_outputs(pages, files=[figure], root=tmp_path) == [
        "figures/cpu/fig3.png: not what results/cpu/notebooks/05.ipynb drew (run it again, or restore the figure)"]


def test_a_page_records_the_figures_it_draws(tmp_path):
    """save_figure under the runner's variable notes each file it wrote for the page."""
    import os
    import subprocess
    import sys

    log = tmp_path / "reads"
    code = ("import matplotlib; matplotlib.use('Agg')\n"
            "import matplotlib.pyplot as plt\n"
            "from dartlib.reporting.figures import save_figure\n"
            "save_figure(plt.figure(), profile='smoke', name='provenance-probe')\n")
    try:
        subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True,
                       env={**os.environ, "DART_READS_LOG": str(log)})
        lines = log.read_text().split()
        assert "W:figures/smoke/provenance-probe.png" in lines and "W:figures/smoke/provenance-probe.pdf" in lines
    finally:
        for suffix in (".png", ".pdf"):
            (REPO_ROOT / "figures" / "smoke" / f"provenance-probe{suffix}").unlink(missing_ok=True)


def test_a_page_older_than_its_rows_is_found(tmp_path):
    rows = tmp_path / "results" / "cpu" / "table1.csv"
    rows.parent.mkdir(parents=True)
    rows.write_text("key,accuracy\na,70.0\n")
    recorded = {"results/cpu/table1.csv": sha256_file(rows)}
    assert stale_inputs(recorded, root=tmp_path) == []
    rows.write_text("key,accuracy\na,12.5\n")  # a row changed after the page ran
    assert stale_inputs(recorded, root=tmp_path) == ["results/cpu/table1.csv (changed)"]
    rows.unlink()
    assert stale_inputs(recorded, root=tmp_path) == ["results/cpu/table1.csv (missing)"]


def test_a_refiner_added_to_the_manifest_leaves_pages_current_but_a_changed_refiner_does_not(tmp_path):
    ckpt = tmp_path / "data" / "checkpoints"
    ckpt.mkdir(parents=True)
    (ckpt / "MANIFEST.json").write_text('{"files": [{"path": "m.dart-a.pt"}]}')
    (ckpt / "m.dart-a.pt").write_bytes(b"refiner a")
    recorded = {rel: sha256_file(tmp_path / rel) for rel in ("data/checkpoints/MANIFEST.json", "data/checkpoints/m.dart-a.pt")}
    (ckpt / "MANIFEST.json").write_text('{"files": [{"path": "m.dart-a.pt"}, {"path": "m.dart-b.pt"}]}')
    assert stale_inputs(recorded, root=tmp_path) == []
    (ckpt / "m.dart-a.pt").write_bytes(b"refiner a, trained again")
    assert stale_inputs(recorded, root=tmp_path) == ["data/checkpoints/m.dart-a.pt (changed)"]


def test_the_kernel_records_what_it_reads(tmp_path):
    """A process started with the runner's variable records the tracked files it opens (and only those)."""
    import os
    import subprocess
    import sys

    log = tmp_path / "reads"
    code = ("import dartlib, pandas\n"
            "pandas.read_csv('data/paper/table1_main.csv')\n"
            "open('README.md').read()\n"
            "open('data/checkpoints/MANIFEST.json').read()\n"
            "import dartlib.analysis.noise\n"
            "from dartlib.experiments.settings import Settings\n"
            "s = Settings.from_params({'profile': 'cpu', 'dart_epochs': 3})\n"
            "s.dart.alpha, s.dart.epochs, s.dart.alpha\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True,
                   env={**os.environ, "DART_READS_LOG": str(log)})
    lines = log.read_text().splitlines()
    read = [line for line in lines if not line.startswith("S:")]
    assert "data/paper/table1_main.csv" in read and "dartlib/analysis/noise.py" in read
    assert "README.md" not in read and "data/checkpoints/MANIFEST.json" not in read
    # the settings read through the tree, once each, with the values read: the profile's, the given on top
    assert setting_reads(lines) == {"dart_alpha": load_profile("cpu")["dart_alpha"], "dart_epochs": 3}
    assert sum(line.startswith("S:dart_alpha=") for line in lines) == 1


def test_a_profile_edit_makes_stale_exactly_the_pages_that_read_the_value():
    pages = REPO_ROOT / "results" / "cpu" / "notebooks"
    confusion, toy = (nbformat.read(pages / name, as_version=4) for name in ("03_confusion_matrices.ipynb",
                                                                              "01_toy_gaussian.ipynb"))
    profile = load_profile("cpu")
    assert stale_parameters(recorded_parameters(confusion), profile) == []
    edited = {**profile, "fig1_corruptions": ["fog"]}  # notebook 03 reads it, notebook 01 does not
    [line] = stale_parameters(recorded_parameters(confusion), edited)
    assert line.startswith("profile value fig1_corruptions (") and line.endswith("-> ['fog'])")
    assert stale_parameters(recorded_parameters(toy), edited) == []
    assert stale_parameters(recorded_parameters(toy), {**profile, "toy_n_sim": 7}) == [
        f"profile value toy_n_sim ({profile['toy_n_sim']!r} -> 7)"]
    assert stale_parameters({"toy_n_sim": 4}, {}) == ["profile value toy_n_sim (gone)"]


def test_the_parameters_recorded_at_run_time_take_precedence_over_the_injected_cell():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('# Parameters\nprofile = "cpu"\nrho_grid = [1.0, 10.0]\nretrain = False\n')
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.append(cell)
    assert recorded_parameters(nb) == {"profile": "cpu", "rho_grid": [1.0, 10.0], "retrain": False}
    assert stale_parameters(recorded_parameters(nb), {"profile": "cpu", "rho_grid": [1, 10], "retrain": False}) == []
    assert stale_parameters(recorded_parameters(nb), {"profile": "cpu", "rho_grid": [1, 10], "retrain": 0}) == [
        "profile value retrain (False -> 0)"]
    nb.metadata["dart"] = {"inputs": {}, "parameters": {"profile": "cpu", "rho_grid": [1.0]}}
    assert recorded_parameters(nb) == {"profile": "cpu", "rho_grid": [1.0]}
    assert recorded_parameters(nbformat.v4.new_notebook()) is None
