"""The papermill runner, profiles and the command line."""

from __future__ import annotations

import ast
import shutil

import nbformat
import pytest

from dartlib import cli, runner
from dartlib.paths import PROFILES_DIR
from dartlib.profiles import load_profile, profile_names
from dartlib.registry import UnknownNameError


def test_profiles_listed_with_smoke_first():
    names = profile_names()
    assert names[0] == "smoke"
    assert {"smoke", "cpu", "paper"} <= set(names)
    for name in names:
        assert load_profile(name)["profile"] == name


def test_unknown_profile_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid names: smoke, cpu, gpu, paper"):
        load_profile("nightly")


def test_every_notebook_parameters_cell_holds_the_smoke_values():
    smoke = load_profile("smoke")  # the settings tree's defaults and smoke.yaml's differences from them
    paths = runner.notebook_paths()
    assert paths, "no numbered notebooks found"
    for path in paths:
        params = runner.notebook_parameters(path)
        assert params, f"{path.name} has no tagged parameters cell"
        assert ast.literal_eval(params.get("profile")) == "smoke", path.name
        for name, default in params.items():
            assert name in smoke, f"{path.name}: parameter {name} is no setting of dartlib/settings_tree.py"
            assert ast.literal_eval(default) == smoke[name], (f"{path.name}: {name}={default} != smoke; write the smoke "
                                                              "values in: python -m dartlib profiles --sync-notebooks")


def test_a_smoke_value_changed_once_reaches_every_parameters_cell(tmp_path, monkeypatch):
    """A smoke value is written once (the tree's default, or smoke.yaml where it differs); `profiles
    --sync-notebooks` carries it into the cells."""
    from dartlib import schema

    folder = tmp_path / "profiles"
    shutil.copytree(PROFILES_DIR, folder)
    monkeypatch.setattr("dartlib.profiles.PROFILES_DIR", folder)
    copies = []
    for name in ("01_toy_gaussian", "06_table1_main"):
        copies.append(tmp_path / f"{name}.ipynb")
        shutil.copy(runner.NOTEBOOKS_DIR / f"{name}.ipynb", copies[-1])
    assert schema.sync_parameters_cells(write=False, paths=copies) == []
    smoke = (folder / "smoke.yaml").read_text()
    (folder / "smoke.yaml").write_text(smoke + "toy_n_sim: 2000000\ntable1_corruptions: [gaussian_noise, fog]\n")
    changed = schema.sync_parameters_cells(write=True, paths=copies)
    assert changed == ["01_toy_gaussian: toy_n_sim 1000000 -> 2000000",
                       "06_table1_main: table1_corruptions [\"gaussian_noise\"] -> [\"gaussian_noise\", \"fog\"]"]
    cell = next(c for c in nbformat.read(copies[1], as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assert 'table1_corruptions: list = ["gaussian_noise", "fog"]  # corruptions of the Table 1 block' in cell.source
    toy = next(c for c in nbformat.read(copies[0], as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assert "toy_n_sim: int = 2000000  # Monte-Carlo" in toy.source
    assert schema.sync_parameters_cells(write=False, paths=copies) == []


def test_papermill_sees_every_name_of_every_parameters_cell():
    """papermill silently drops lines it cannot parse; a dropped name would never get a profile's value."""
    for path in runner.notebook_paths():
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assigned = {
            node.target.id if isinstance(node, ast.AnnAssign) else node.targets[0].id
            for node in ast.parse(cell.source).body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
        }
        assert assigned == set(runner.notebook_parameters(path)), path.name


def test_every_results_grid_states_the_trained_inputs_of_its_cells():
    """A ``run_grid`` call without ``inputs=`` keeps rows of a since-retrained g_phi (or IABN
    model) as current; every grid in the notebooks and the library must pass the digest."""
    from dartlib.paths import REPO_ROOT

    sources = {p.name: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
               for p in runner.notebook_paths()}
    sources.update({p.name: p.read_text() for p in (REPO_ROOT / "dartlib").rglob("*.py")})
    calls, runs = [], 0
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                runs += called == "run_cells"
                if called == "run_grid":
                    calls.append((name, node.lineno, {k.arg for k in node.keywords}))
    # one way to run cells: engine.run_cells, which keys every row by its context's inputs
    assert [(n, line) for n, line, _ in calls] == [("engine.py", calls[0][1])] and "inputs" in calls[0][2], calls
    assert runs >= 10


def test_every_profile_defines_every_notebook_parameter():
    wanted = set().union(*(runner.notebook_parameters(p) for p in runner.notebook_paths()))
    for name in profile_names():
        missing = wanted - set(load_profile(name))
        assert not missing, f"profile {name} lacks {sorted(missing)}"


def test_resolve_notebooks_by_number_stem_and_title():
    first = runner.notebook_paths()[0]
    for key in (first.stem[:2], first.stem, first.name, first.stem[3:]):
        assert runner.resolve_notebooks([key]) == [first]
    assert runner.resolve_notebooks(None) == runner.notebook_paths()


def test_unknown_notebook_lists_valid_names():
    with pytest.raises(UnknownNameError, match="01_toy_gaussian"):
        runner.resolve_notebooks(["42_nothing"])


def test_cli_reports_unknown_names(capsys):
    assert cli.main(["run", "--profile", "nightly"]) == 2
    assert "valid names: smoke" in capsys.readouterr().err
    assert cli.main(["run", "--profile", "smoke", "nope"]) == 2
    assert "unknown notebook 'nope'" in capsys.readouterr().err
    assert cli.main(["grid", "table1", "--shard", "2/2"]) == 2
    assert "shard must read i/n" in capsys.readouterr().err
    assert cli.main(["grid", "table1", "--profile", "nightly"]) == 2
    assert "valid names: smoke" in capsys.readouterr().err
    assert cli.main(["grid", "table1", "--methods", "tent,tnet"]) == 2
    assert "unknown method tnet; valid: noadapt, bnadapt, tent" in capsys.readouterr().err
    assert cli.main(["grid", "table1", "--refiners", "dart-split"]) == 2
    assert "unknown refiner dart-split; valid: none, dart" in capsys.readouterr().err


def _notebook(*sources: str, params: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell] + [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def test_run_profile_injects_values_and_names_the_failing_cell(tmp_path, monkeypatch, capsys):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copytree(PROFILES_DIR, nb_dir / "profiles")
    (nb_dir / "profiles" / "smoke.yaml").write_text("profile: smoke\nseed: 5\n")
    params = 'profile = "smoke"\nseed = 0'
    nbformat.write(_notebook("assert seed == 5, seed", params=params), nb_dir / "01_ok.ipynb")
    nbformat.write(_notebook("x = 1", "raise ValueError('boom')", params=params), nb_dir / "02_bad.ipynb")
    nbformat.write(_notebook("x = 1", params=params), nb_dir / "03_after.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nb_dir)
    monkeypatch.setattr("dartlib.schema.NOTEBOOKS_DIR", nb_dir)  # the profile is checked against these notebooks
    monkeypatch.setattr("dartlib.profiles.PROFILES_DIR", nb_dir / "profiles")
    monkeypatch.setattr(runner, "runs_dir", lambda profile: tmp_path / "runs")
    (tmp_path / "runs").mkdir()

    runs = runner.run_profile(profile="smoke")
    assert [r.status for r in runs] == ["ok", "failed", "not run"]
    assert "ValueError: boom" in runs[1].detail and "raise ValueError('boom')" in runs[1].detail
    assert (tmp_path / "runs" / "01_ok.ipynb").is_file()
    summary = runner.format_summary(runs)
    assert "02_bad" in summary and "failed" in summary

    assert cli.main(["run", "--profile", "smoke", "--keep-going"]) == 1
    err = capsys.readouterr().err
    assert "FAILED: notebook 02_bad, cell In[4] `raise ValueError('boom')`" in err


def test_an_override_the_cell_does_not_take_reaches_the_settings_and_the_page_records_what_it_read(tmp_path, monkeypatch):
    """A notebook's cell takes `profile` alone; `--set seed=5` reaches it through the settings tree,
    and the executed page records the settings it read, with their values."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copytree(PROFILES_DIR, nb_dir / "profiles")
    code = ("from dartlib.experiments.settings import Settings\n"
            "settings = Settings.from_params(globals())\n"
            "assert (settings.seed, settings.dart.alpha) == (5, 0.1), settings.seed")
    nbformat.write(_notebook(code, params='profile = "smoke"'), nb_dir / "01_ok.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nb_dir)
    monkeypatch.setattr("dartlib.profiles.PROFILES_DIR", nb_dir / "profiles")
    runs = runner.run_profile(profile="smoke", overrides={"seed": 5}, output=tmp_path / "out")
    assert [r.status for r in runs] == ["ok"], runs
    page = nbformat.read(next((tmp_path / "out").rglob("01_ok.ipynb")), as_version=4)
    assert page.metadata["dart"]["parameters"] == {"profile": "smoke", "seed": 5, "dart_alpha": 0.1}
    # a value the code derives from the profile's is recorded as the profile's: the page depends on that
    code = code.replace("settings = Settings.from_params(globals())", "settings = Settings.from_params(globals()).replace(dart_alpha=3.0)")
    nbformat.write(_notebook(code.replace("(5, 0.1)", "(5, 3.0)"), params='profile = "smoke"'), nb_dir / "01_ok.ipynb")
    assert [r.status for r in runner.run_profile(profile="smoke", overrides={"seed": 5}, output=tmp_path / "out")] == ["ok"]
    page = nbformat.read(next((tmp_path / "out").rglob("01_ok.ipynb")), as_version=4)
    assert page.metadata["dart"]["parameters"] == {"profile": "smoke", "seed": 5, "dart_alpha": 0.1}


def test_kernel_log_lines_go_to_a_file_not_the_terminal(tmp_path, capfd):
    """The kernel process's own warnings (TCP transport, KeyboardInterrupt) stay out of the
    runner's output; a cell's error still reaches the caller."""
    nbformat.write(_notebook("x = 1", params="profile = 'smoke'"), tmp_path / "01_ok.ipynb")
    nbformat.write(_notebook("raise ValueError('boom')", params="profile = 'smoke'"), tmp_path / "02_bad.ipynb")
    log = runner.kernel_log_path(tmp_path / "out" / "01_ok.ipynb")
    runner._execute(tmp_path / "01_ok.ipynb", tmp_path / "01_out.ipynb", {}, log=log)
    with pytest.raises(runner.PapermillExecutionError, match="boom"):
        runner._execute(tmp_path / "02_bad.ipynb", tmp_path / "02_out.ipynb", {}, log=log)
    shown = capfd.readouterr()
    assert "without encryption" not in shown.out + shown.err
    assert "[IPKernelApp]" in log.read_text()  # the kernel's log lines are kept, in the file


def test_strip_run_metadata_keeps_counts_and_outputs():
    nb = _notebook("print(1)", params="a = 1")
    nb.metadata["papermill"] = {"duration": 1.0}
    nb.cells[1].metadata["papermill"] = {"duration": 0.1}
    nb.cells[1].metadata["execution"] = {"iopub.status.busy": "2026"}
    nb.cells[1].metadata["tags"] = []
    nb.cells[1].execution_count = 2
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    out = runner.strip_run_metadata(nb)
    assert "papermill" not in out.metadata
    assert out.cells[1].metadata == {}
    assert out.cells[1].execution_count == 2 and out.cells[1].outputs
    assert out.cells[0].metadata["tags"] == ["parameters"]


def test_the_runner_reports_each_cell_of_a_notebook(tmp_path):
    """Progress inside a notebook: cells done of total and the first code line of the running one."""
    nb = _notebook("# a comment first\nx = 1\n", "y = x + 1", params="a = 1")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("text is not counted"))
    nbformat.write(nb, tmp_path / "01_cells.ipynb")
    seen: list[runner.CellProgress] = []
    runner._execute(tmp_path / "01_cells.ipynb", tmp_path / "out.ipynb", {"a": 2}, log=tmp_path / "kernel.log",
                    on_cell=seen.append)
    # papermill injects a cell of the values given: 4 code cells in all
    assert [(p.done, p.total) for p in seen] == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert [p.current for p in seen] == ["a = 1", "a = 2", "x = 1", "y = x + 1", ""]
    assert str(seen[2]) == "cell 2/4 `x = 1`" and str(seen[-1]) == "cell 4/4"
    assert runner.cell_head("# only\n\n" + "z" * 80, width=20) == "z" * 17 + "..."
