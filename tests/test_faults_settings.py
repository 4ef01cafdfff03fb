"""Bad settings caught before anything runs: a profile (notebooks/profiles/*.yaml) with a misspelt,
missing, mistyped or out-of-range key, or an unknown name, and command-line options out of range.
Each gives one line on stderr naming the file, the key, the value and what is allowed, exit
status 2, and nothing computed or written (the command's work is replaced by a function that
fails the test if it is reached)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from dartlib import cli, runner, schema
from dartlib.paths import PROFILES_DIR
from dartlib.profiles import ProfileError


@pytest.fixture()
def profiles(tmp_path, monkeypatch):
    """A copy of the real profiles folder, used in place of it."""
    folder = tmp_path / "profiles"
    shutil.copytree(PROFILES_DIR, folder)
    monkeypatch.setattr("dartlib.profiles.PROFILES_DIR", folder)
    return folder


def _edit(folder, line_from: str, line_to: str | None, name: str = "smoke") -> None:
    path = folder / f"{name}.yaml"
    lines = path.read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(line_from)]
    assert len(hits) == 1, line_from
    if line_to is None:
        del lines[hits[0]]
    else:
        lines[hits[0]] = line_to
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture()
def nothing_runs(monkeypatch, tmp_path):
    """Any notebook execution fails the test; runs/ goes to a scratch folder that must stay empty."""
    monkeypatch.setattr(runner, "_execute", lambda *a, **k: pytest.fail("a notebook ran despite bad settings"))
    monkeypatch.setattr(runner, "runs_dir", lambda profile: tmp_path / "runs")
    return tmp_path / "runs"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    return err


@pytest.mark.parametrize("line, expected", [
    ("toy_nsim: 2000", "smoke.yaml: unknown key 'toy_nsim' (did you mean 'toy_n_sim'?)"),
    ("table1_corruptions: gaussian_noise",
     "smoke.yaml: table1_corruptions: 'gaussian_noise' is a string; expected a list of corruption names such as "
     "`table1_corruptions: [gaussian_noise]`"),
    ("test_batch_size: -5", "smoke.yaml: test_batch_size: -5 is out of range; expected an integer >= 1"),
    ("table1_corruptions: [gausian_noise]",
     "table1_corruptions: unknown corruption 'gausian_noise' (did you mean 'gaussian_noise'?); valid: gaussian_noise"),
    ("severity: 6", "smoke.yaml: severity: 6 is out of range; expected an integer between 1 and 5"),
    ("extra_methods: [memo, rooid]", "extra_methods: unknown method 'rooid' (did you mean 'roid'?)"),
    ("dart_alpha: .nan", "smoke.yaml: dart_alpha: nan is not finite; expected a number >= 0"),
    ("retrain_check: yes please", "retrain_check: 'yes please' is a string; expected true or false"),
    ("seed: [0", "smoke.yaml, line 6: not valid YAML"),
    ("source_arch: resnet62", "source_arch: unknown architecture 'resnet62' (did you mean 'resnet26'?)"),
    ("shortcut_studies: [table1]", "shortcut_studies: unknown study 'table1'"),
])
def test_bad_profile_stops_run_before_any_notebook(profiles, nothing_runs, capsys, line, expected):
    path = profiles / "smoke.yaml"  # the root profile: only what differs from the settings tree's defaults
    path.write_text(path.read_text() + line + "\n")
    assert cli.main(["run", "--profile", "smoke", "01"]) == 2
    assert expected in _one_error_line(capsys)
    assert not nothing_runs.exists()


@pytest.mark.parametrize("argv, command", [
    (["grid", "table1", "--profile", "smoke"], "_cmd_grid"),
    (["train", "--profile", "smoke"], "_cmd_train"),
    (["claims", "--profile", "smoke"], "_cmd_claims"),
    (["book", "--profile", "smoke"], "_cmd_book"),
])
def test_every_profile_command_checks_the_profile_first(profiles, monkeypatch, capsys, argv, command):
    """grid, train, claims and book read the same profile: the same one line, nothing else loaded."""
    import dartlib.experiments.grid as grid
    import dartlib.models.training as training

    monkeypatch.setattr(grid, "run_grid", lambda *a, **k: pytest.fail("grid ran"))
    monkeypatch.setattr(training, "train_source", lambda *a, **k: pytest.fail("training ran"))
    monkeypatch.setattr("dartlib.book.site.build_book", lambda *a, **k: pytest.fail("book built"))
    (profiles / "smoke.yaml").write_text((profiles / "smoke.yaml").read_text() + "toy_nsim: 2000\n")
    assert cli.main(argv) == 2
    assert "unknown key 'toy_nsim' (did you mean 'toy_n_sim'?)" in _one_error_line(capsys)


def test_committed_profiles_pass_the_schema():
    for name in ("smoke", "cpu", "gpu", "paper", "paper-c10"):
        schema.checked_profile(name)


def test_a_profile_that_extends_another_holds_only_what_differs():
    from dartlib.profiles import load_profile

    gpu, c10 = load_profile("gpu"), load_profile("paper-c10")
    differ = {k for k in set(gpu) | set(c10) if gpu.get(k) != c10.get(k)}
    assert differ == {"profile", "notebooks", "source_recipe", "note_finetune_epochs"}
    assert c10["note_finetune_epochs"] == 30 and c10["source_recipe"] == "paper" and "extends" not in c10
    written = yaml.safe_load((PROFILES_DIR / "paper-c10.yaml").read_text())
    assert set(written) == {"profile", "extends", "notebooks", "source_recipe", "note_finetune_epochs"}


@pytest.mark.parametrize("name, line_from, line_to, expected", [
    ("paper-c10", "extends:", "extends: gpuu", "paper-c10.yaml: `extends: gpuu` names no profile; valid: smoke, cpu"),
    ("gpu", "extends:", "extends: paper-c10",
     "gpu.yaml: `extends: paper-c10` goes round in a circle (paper-c10 -> gpu -> paper-c10); fix the file"),
])
def test_a_bad_extends_is_one_line_naming_the_file(profiles, name, line_from, line_to, expected):
    from dartlib.profiles import load_profile

    _edit(profiles, line_from, line_to, name=name)
    with pytest.raises(ProfileError) as err:
        load_profile("paper-c10")
    assert expected in str(err.value) and len(str(err.value).splitlines()) == 1


def test_every_number_of_the_settings_tree_has_a_stated_range():
    """A numeric setting is given its range beside its default (dartlib/settings_tree.py), or profiles
    could set it to anything."""
    from dartlib.settings_tree import SETTINGS

    numeric = {k for k, p in SETTINGS.items() if schema._kind_of(p.default()) in ("int", "float", "list of int", "list of float")}
    assert numeric - set(schema.RANGES) == set()
    assert "dart_alpha" in numeric and "profile" not in numeric


def test_a_notebook_parameter_the_settings_tree_does_not_hold_is_found(tmp_path):
    """A parameters cell sets settings of the tree only: a new knob must be added to the tree first."""
    import json

    first, *others = runner.notebook_paths()
    assert schema.unknown_parameters() == []
    nb = json.loads(first.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    cell["source"] = "".join(cell["source"]) + "\nnew_knob = 3\n"
    (tmp_path / "01_copy.ipynb").write_text(json.dumps(nb))
    assert schema.unknown_parameters([tmp_path / "01_copy.ipynb", *others]) == ["01_copy: new_knob"]


@pytest.mark.parametrize("argv, message", [
    (["run", "--porfile", "cpu"], "unrecognized argument: --porfile (did you mean --profile?)"),
    (["train", "--arch", "resnet62"], "argument --arch: unknown architecture 'resnet62' (did you mean 'resnet26'?)"),
    (["data", "prepare", "fmnistc", "--corruptions", "gausian_noise"],
     "argument --corruptions: unknown corruption 'gausian_noise' (did you mean 'gaussian_noise'?)"),
    (["bench", "corruptions", "--n", "-3"], "argument --n: expected a positive integer, got -3"),
    (["bench", "corruptions", "--severity", "9"], "argument --severity: invalid choice: 9"),
    (["grid", "table1", "--gpus-per-cell", "-1"], "argument --gpus-per-cell: expected a finite number >= 0, got -1"),
    (["validate-alpha", "--heldout", "0"], "argument --heldout: expected a positive integer, got 0"),
])
def test_cli_options_checked_before_anything_runs(argv, message, monkeypatch, capsys):
    for module, name in ((cli.run, "_cmd_run"), (cli.train, "_cmd_train"), (cli.data, "_cmd_data_prepare"),
                         (cli.bench, "_cmd_bench_corruptions"), (cli.grid, "_cmd_grid"),
                         (cli.alpha, "_cmd_validate_alpha")):
        monkeypatch.setattr(module, name, lambda args: pytest.fail("the command ran"))
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err  # no usage block: one line, the usage is one --help away
